"""Taking a trained model out of the runner from its thread: *Checkpoints and export* lists the
run's checkpoints with their val/reward and which one is the model, the owner makes another step
the model, pushes its LoRA adapter to the Hugging Face Hub through the export modal, and gets a
download link. A real runner on loopback with the stand-in trainer, pushing with the real
huggingface_hub to the loopback Hub (tests/fakes/hf_hub.py); the fake Slack's real requests."""

from __future__ import annotations

import io
import json
import tarfile
from collections.abc import Iterator

import httpx
import pytest

from bot.slack.blocks import RUN_CHOOSE_CHECKPOINT_ACTION, RUN_EXPORT_MODAL
from tests.bot.conftest import Bot, BotFactory, SlackUser
from tests.bot.test_run_stalls import STRANGER
from tests.bot.test_runs_end_to_end import STAND_IN, finished_wizard, follow_until_finished
from tests.bot.test_runs_end_to_end import runs_of as runs_of_user
from tests.fakes.hf_hub import FakeHub, xet_disabled
from tests.fakes.slack_api import FakeSlack, Message
from tests.fakes.slack_requests import block_actions, view_submission
from tests.fakes.workspace import USER_ID
from tests.runner.conftest import Runner, RunnerFactory, job_environ
from tests.runner.conftest import (
    make_runner as make_runner,  # the fixture: a real runner on loopback
)

GENEROUS_S = 60.0  # a hang guard on a loaded machine, never a measurement


@pytest.fixture
def hub() -> Iterator[FakeHub]:
    with FakeHub() as fake, xet_disabled():
        yield fake


@pytest.fixture
def gpu_host(make_runner: RunnerFactory, hub: FakeHub) -> Runner:
    return make_runner(
        environ=job_environ(
            OPENAI_API_KEY="sk-test-not-real", HF_TOKEN=hub.token, HF_ENDPOINT=hub.url
        ),
        command=f"{{python}} {STAND_IN} {{script}}",
    )


def a_trained_run(make_bot: BotFactory, fake: FakeSlack, runner: Runner) -> SlackUser:
    user = finished_wizard(make_bot, fake, runner.base_url)
    user.click("Approve and run")
    follow_until_finished(user)
    return user


def final_message(user: SlackUser) -> Message:
    return next(m for m in user.bot_messages() if "Training finished" in m.text)


def newest(user: SlackUser, needle: str) -> Message:
    """The thread's newest message saying `needle`, once there is one."""
    user.fake.wait_for(
        lambda f: any(needle in m.text for m in user.bot_messages()), timeout=GENEROUS_S
    )
    user.settle()
    return [m for m in user.bot_messages() if needle in m.text][-1]


def ephemeral_to(user: str, needle: str, fake: FakeSlack) -> Message:
    fake.wait_for(
        lambda f: any(needle in m.text and m.ephemeral_to == user for m in f.ephemerals()),
        timeout=GENEROUS_S,
    )
    return [m for m in fake.ephemerals() if needle in m.text and m.ephemeral_to == user][-1]


def choose(user: SlackUser, listed: Message, step: int) -> None:
    [select] = [
        element
        for block in listed.blocks or []
        for element in block.get("elements", [])
        if element.get("action_id") == RUN_CHOOSE_CHECKPOINT_ACTION
    ]
    [value] = [o["value"] for o in select["options"] if o["value"].endswith(f":{step}")]
    request = block_actions(
        RUN_CHOOSE_CHECKPOINT_ACTION,
        value,
        message_ts=listed.ts,
        user_id=user.user,
        channel_id=user.channel,
        message=listed.to_slack(),
        action_type="static_select",
    )
    assert user.bot.dispatch(request) == 200


def open_export_modal(user: SlackUser, listed: Message) -> dict[str, object]:
    before = len(user.fake.modals(user.user))
    user.click("Export to Hugging Face", wait=False, on=listed)
    user.fake.wait_for(lambda f: len(f.modals(user.user)) > before, timeout=GENEROUS_S)
    return user.fake.modals(user.user)[-1]


def submit(bot: Bot, modal: dict[str, object], repo: str, *ticked: str) -> tuple[int, str]:
    values: dict[str, dict[str, str | list[str]]] = {"repo": {"repo_id": repo}}
    values["visibility"] = {"public": list(ticked)}
    return bot.answer(view_submission(modal, values))


def test_the_owner_lists_checkpoints_chooses_the_model_exports_it_and_downloads_it(
    make_bot: BotFactory, fake: FakeSlack, gpu_host: Runner, hub: FakeHub
) -> None:
    user = a_trained_run(make_bot, fake, gpu_host)
    [run] = runs_of_user(user).runs.for_thread(user.key)
    assert run.job_id is not None
    on_runner = gpu_host.client.checkpoints(run.job_id)
    assert len(on_runner.checkpoints) >= 2 and on_runner.model_step == on_runner.best_step

    user.click("Checkpoints and export", wait=False, on=final_message(user))
    listed = newest(user, f"Checkpoints of run #{run.public_id}")
    for checkpoint in on_runner.checkpoints:
        assert f"step {checkpoint.step}:" in listed.text
    assert f"The model is step {on_runner.model_step} (the best val/reward)" in listed.text

    # Someone else sees the buttons too, and is refused.
    stranger = SlackUser(user.bot, user=STRANGER, thread=user.thread)
    stranger.click("Download the adapter", wait=False, on=listed)
    ephemeral_to(STRANGER, f"Only <@{USER_ID}> can export", fake)

    other = next(c.step for c in on_runner.checkpoints if c.step != on_runner.model_step)
    choose(user, listed, other)
    newest(user, f"model is now step {other}")
    assert gpu_host.client.checkpoints(run.job_id).chosen_step == other

    modal = open_export_modal(user, listed)
    assert modal["callback_id"] == RUN_EXPORT_MODAL
    status, body = submit(user.bot, modal, "alice/--bad")
    assert status == 200 and json.loads(body)["errors"]["repo"].startswith("A repository is")
    assert hub.repos == {}

    assert submit(user.bot, modal, "alice/math-agent") == (200, "")
    pushed = newest(user, "is on the Hugging Face Hub")
    repo = hub.repos["alice/math-agent"]
    assert repo.private and f"Step {other}'s LoRA adapter" in pushed.text
    assert "adapter_config.json" in repo.files and "README.md" in repo.files
    assert 'PeftModel.from_pretrained(base, "alice/math-agent")' in pushed.text
    assert "--lora-modules" in pushed.text and "(private)" in pushed.text

    user.click("Download the adapter", wait=False, on=listed)
    link = ephemeral_to(USER_ID, "LoRA adapter of run", fake)
    url = link.text.rsplit("\n", 1)[-1].strip().replace("&amp;", "&")
    downloaded = httpx.get(url, timeout=GENEROUS_S)  # no token: the link is the key
    assert downloaded.status_code == 200
    with tarfile.open(fileobj=io.BytesIO(downloaded.content), mode="r:gz") as archive:
        names = set(archive.getnames())
        config = archive.extractfile("adapter_config.json")
        assert config is not None and config.read() == repo.files["adapter_config.json"]
    assert "adapter_config.json" in names
    tampered = url[:-1] + ("A" if url[-1] != "A" else "B")
    assert httpx.get(tampered, timeout=GENEROUS_S).status_code in (401, 403)


def test_a_public_export_and_a_failed_one_say_so_in_the_thread(
    make_bot: BotFactory, fake: FakeSlack, gpu_host: Runner, hub: FakeHub
) -> None:
    user = a_trained_run(make_bot, fake, gpu_host)
    user.click("Checkpoints and export", wait=False, on=final_message(user))
    listed = newest(user, "Checkpoints of run #")

    assert submit(user.bot, open_export_modal(user, listed), "alice/open-agent", "public") == (
        200,
        "",
    )
    assert "(public)." in newest(user, "is on the Hugging Face Hub").text
    assert not hub.repos["alice/open-agent"].private

    # A namespace the runner's token may not write: the Hub's 403, said with what to do.
    assert submit(user.bot, open_export_modal(user, listed), "someone-else/agent") == (200, "")
    failed = newest(user, "The export to `someone-else/agent` failed")
    assert "someone-else" in failed.text and hub.token not in failed.text


def test_a_serverless_run_says_where_its_checkpoints_already_are(
    make_bot: BotFactory, fake: FakeSlack
) -> None:
    from tests.bot.test_run_followups import NOBODY_LISTENS, TOKEN, a_served_run

    bot = make_bot(ARTBOT_RUNNER_URL=NOBODY_LISTENS, ARTBOT_RUNNER_TOKEN=TOKEN)
    user, _ = a_served_run(bot, backend="serverless", model_url="https://api.training.wandb.ai/v1")
    run = runs_of_user(user).runs.for_thread(user.key)[-1]  # the one that succeeded
    runs_of_user(user).runs.update(
        run.id, result={**(run.result or {}), "model": "wandb-artifact:///acme/math/agent:step12"}
    )

    user.click("Checkpoints and export", wait=False, on=final_message(user))

    said = newest(user, "trained with ServerlessBackend")
    assert "https://wandb.ai/acme/math/artifacts/lora/agent/step12" in said.text
    assert "wandb artifact get acme/math/agent:step12" in said.text
