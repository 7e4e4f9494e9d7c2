"""`/train-sft` in Slack: the fine-tuning wizard in a thread, from an uploaded JSONL file to a
checked script, then approved and trained on the runner (its stand-in SFT trainer), with the
loss in the thread and the model at the end."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from pathlib import Path

import pytest

from bot.runs.service import required_env
from bot.wizard.script_results import Dryrun
from checks.dryrun import DryrunReport, dryrun_script
from flows import TRAIN_SFT, replay
from tests.bot.conftest import BotFactory, SlackUser
from tests.bot.test_runs_end_to_end import follow_until_finished, runs_of
from tests.bot.test_slack_escaping import drop
from tests.bot.test_slack_wizard import answer_through_the_ruler_judge
from tests.fakes.slack_api import FakeSlack
from tests.fakes.slack_requests import slash_command
from tests.fakes.workspace import USER_ID
from tests.flows.sft_data import ROWS, ROWS_JSONL
from tests.flows.sft_matrix import VARIANTS as SFT_VARIANTS
from tests.runner.conftest import TOKEN, Runner, RunnerFactory, job_environ
from tests.runner.conftest import (
    make_runner as make_runner,  # the fixture: a real runner on loopback
)

STAND_IN = Path(__file__).resolve().parent / "scripts" / "stand_in_trainer.py"
"""The stand-in SFT trainer for fine-tuning scripts, the stand-in RL trainer for the others."""


@pytest.fixture
def gpu_host(make_runner: RunnerFactory) -> Iterator[Runner]:
    yield make_runner(
        environ=job_environ(OPENAI_API_KEY="sk-test-not-real"),
        command=f"{{python}} {STAND_IN} {{script}}",
    )


def stored_answers(user: SlackUser) -> dict[str, object]:
    stored = user.bot.service.store.get(user.key)
    assert stored is not None
    return dict(stored.session.answers)


def answer_up_to_the_dataset(user: SlackUser) -> None:
    user.command("answer weather questions with the weather tool", name="/train-sft")
    user.click("Train from a JSONL file")
    user.click("LocalBackend")
    user.click("Upload a .jsonl file")


def answer_after_the_dataset(user: SlackUser) -> None:
    user.click("Hold out a fraction")
    user.reply("default")  # a tenth
    user.click("OpenPipe/Qwen3-14B-Instruct")
    user.reply("default")  # project: sft-project
    user.reply("weather-capitals-001")
    user.click("Use defaults")


def test_train_sft_opens_the_fine_tuning_wizard_in_a_thread(
    make_bot: BotFactory, fake: FakeSlack
) -> None:
    user = SlackUser(make_bot())
    user.command("answer weather questions", name="/train-sft")

    [parent] = [m for m in fake.messages(user.channel) if m.ts == user.thread]
    assert f"<@{USER_ID}> started a fine-tuning (SFT) wizard" in parent.text
    stored = user.bot.service.store.get(user.key)
    assert stored is not None and stored.session.flow == "train-sft"
    assert user.asked() == "scenario"
    assert "Train from a JSONL file" in str(user.open_question().blocks)
    # The RL wizard's task question does not exist here: the text only heads the thread.
    assert stored.session.prefill == {}

    help_request = slash_command("/train-sft", "help", response_url=fake.response_url())
    assert user.bot.dispatch(help_request) == 200
    fake.wait_for(lambda f: bool(f.responses()))
    assert "`/train-sft list` lists your wizards" in fake.responses()[-1]["text"]


def test_an_uploaded_jsonl_file_becomes_a_checked_sft_script_in_the_thread(
    make_bot: BotFactory, fake: FakeSlack
) -> None:
    user = SlackUser(make_bot())
    answer_up_to_the_dataset(user)
    drop(user, fake, "weather.jsonl", ROWS_JSONL.encode())
    assert stored_answers(user)["dataset"] == ROWS
    assert f"Checked {len(ROWS)} rows: every one can be used." in user.last_text()
    answer_after_the_dataset(user)

    card = user.wait_for_result()
    assert "*weather-capitals-001* (sft-project): fine-tuning (SFT) from the rows given here" in (
        card.text
    )
    assert "Base model `OpenPipe/Qwen3-14B-Instruct` on LocalBackend" in card.text
    assert "batch size 2, peak learning rate 0.0002, linear schedule" in card.text
    assert "Estimate: 13 training rows x 10 epochs ≈ " in card.text
    assert ":white_check_mark: `artbot check`" in card.text
    [script] = [f for f in fake.uploaded_files() if f.name == "weather-capitals-001.py"]
    source = script.content.decode()
    assert "train_sft_from_file" in source and "SFT TRAINING COMPLETE" in source
    assert "uv run weather-capitals-001.py" in source  # its docstring names the file it is


def test_a_broken_dataset_is_refused_by_line_and_the_wizard_waits_at_its_question(
    make_bot: BotFactory, fake: FakeSlack
) -> None:
    user = SlackUser(make_bot())
    answer_up_to_the_dataset(user)
    lines = ROWS_JSONL.splitlines()
    broken = [*lines[:2], '{"messages": [{"role": "user", "content": "no reply"}]}', *lines[2:]]
    drop(user, fake, "weather.jsonl", "\n".join(broken).encode())

    said = user.last_text()
    assert "line 3" in said
    assert user.asked() == "dataset" and "dataset" not in stored_answers(user)
    drop(user, fake, "weather.jsonl", b"\xff\xfe not utf-8\n")
    assert user.asked() == "dataset"
    drop(user, fake, "weather.jsonl", ROWS_JSONL.encode())
    assert stored_answers(user)["dataset"] == ROWS
    assert user.asked() == "val_split"


def trained_sft_run(
    make_bot: BotFactory, fake: FakeSlack, runner_url: str, dryrun: Dryrun | None = None
) -> SlackUser:
    """A fine-tuning wizard on an uploaded file, approved and trained to its end."""
    user = SlackUser(
        make_bot(ARTBOT_RUNNER_URL=runner_url, ARTBOT_RUNNER_TOKEN=TOKEN, dryrun=dryrun)
    )
    answer_up_to_the_dataset(user)
    drop(user, fake, "weather.jsonl", ROWS_JSONL.encode())
    answer_after_the_dataset(user)
    user.wait_for_result()
    user.click("Approve and run")
    follow_until_finished(user)
    return user


def test_an_approved_sft_script_trains_and_its_loss_and_model_reach_the_thread(
    make_bot: BotFactory, fake: FakeSlack, gpu_host: Runner
) -> None:
    user = trained_sft_run(make_bot, fake, gpu_host.base_url)

    [run] = runs_of(user).runs.for_thread(user.key)
    assert run.state == "succeeded" and run.card_ts is not None
    texts = [m.text for m in user.bot_messages()]
    assert any(t.startswith(":rocket: Training started") for t in texts)
    final = next(m for m in user.bot_messages() if "Training finished at step" in m.text)
    assert "weather-capitals-001@" in final.text and "http://127.0.0.1:8000/v1" in final.text
    assert "*Before and after* (held-out rows" in final.text and "base model 0.30" in final.text
    buttons = [
        element["text"]["text"]
        for block in final.blocks or []
        if block.get("type") == "actions"
        for element in block["elements"]
    ]
    assert "Continue with RL from this model" in buttons
    assert not any(label.startswith("Compare") for label in buttons)  # no reward to compare
    card = fake.message(user.channel, run.card_ts)
    assert card is not None and "succeeded" in card.text
    assert "loss " in card.text and "reference similarity" in card.text
    assert "train/reward" not in card.text
    assert [p["loss"] for p in run.points if p.get("loss") is not None][-1] < 2.0
    curves = [u for u in fake.uploaded_files() if u.name.endswith("-loss.png")]
    assert len(curves) == 1 and curves[0].content.startswith(b"\x89PNG")
    assert not [u for u in fake.uploaded_files() if u.name.endswith("-rewards.png")]


def test_a_finished_sft_run_continues_with_rl_from_its_model_in_its_job_folder(
    make_bot: BotFactory, fake: FakeSlack, gpu_host: Runner
) -> None:
    forked: list[Mapping[str, str] | None] = []

    def dryrun(path: Path, *, forks_from: Mapping[str, str] | None = None) -> DryrunReport:
        forked.append(forks_from)
        return dryrun_script(path, workdir=path.parent / "dryrun", forks_from=forks_from)

    user = trained_sft_run(make_bot, fake, gpu_host.base_url, dryrun)
    [sft_run] = runs_of(user).runs.for_thread(user.key)
    sft_thread = user.thread
    final = next(m for m in user.bot_messages() if "Training finished at step" in m.text)

    parents_before = {m.ts for m in fake.messages(user.channel) if not m.is_reply}
    stranger = SlackUser(user.bot, user="U0STRANGER", thread=sft_thread)
    stranger.click("Continue with RL from this model", on=final, wait=False)
    fake.wait_for(lambda f: bool(f.ephemerals(user.channel)))
    assert f"Only <@{USER_ID}> can continue this run." in fake.ephemerals(user.channel)[-1].text
    user.click("Continue with RL from this model", on=final, wait=False)
    fake.wait_for(
        lambda f: any(
            not m.is_reply and m.ts not in parents_before for m in f.messages(user.channel)
        )
    )
    user.settle()
    [parent] = [
        m for m in fake.messages(user.channel) if not m.is_reply and m.ts not in parents_before
    ]
    assert f"continues the fine-tuning run #{sft_run.public_id}" in parent.shown
    said_there = [m.text for m in SlackUser(user.bot, thread=sft_thread).bot_messages()]
    assert any("continues this model with RL in <" in t for t in said_there)

    user.thread = parent.ts
    stored = user.bot.service.store.get(user.key)
    assert stored is not None and stored.session.flow == "train-rl"
    assert stored.session.answers["start_from"] == {
        "model": "weather-capitals-001",
        "project": "sft-project",
        "base_model": "OpenPipe/Qwen3-14B-Instruct",
        "backend": "local",
        "run": sft_run.public_id,
    }
    assert "forks the latest checkpoint of `weather-capitals-001`" in user.bot_messages()[0].text
    answer_through_the_ruler_judge(user)
    user.click("All scenarios")
    user.click("Hold out a fraction")
    user.reply("0.25")
    user.reply("default")
    user.reply("default")
    user.reply("default")  # project
    user.reply("weather-rl-001")  # no base model, no backend: the SFT run's
    user.click("Use defaults")
    user.click("Epochs over the fixed dataset")
    card = user.wait_for_result()
    assert ":white_check_mark: `artbot check`" in card.text
    # The dry run forks a stand-in of the SFT model in its own folder, and passes.
    user.fake.wait_for(lambda f: "Dry run passed" in user.result_cards()[-1].text, timeout=240)
    assert forked[-1] == stored.session.answers["start_from"]
    [script] = [f for f in fake.uploaded_files() if f.name == "weather-rl-001.py"]
    assert "backend._experimental_fork_checkpoint(" in script.content.decode()

    user.click("Approve and run")
    follow_until_finished(user)
    [rl_run] = runs_of(user).runs.for_thread(user.key)
    # LocalBackend forks from the art path: the job works in the SFT job's folder, where the
    # stand-in found the SFT model's checkpoints (without them it fails as the script would).
    assert rl_run.resume_from_job == sft_run.job_id
    assert rl_run.state == "succeeded", [m.text for m in user.bot_messages()][-3:]
    assert any("Training finished at step" in m.text for m in user.bot_messages())


def test_a_file_on_the_runner_host_is_not_dry_run_on_the_bot_host_and_the_card_says_why(
    make_bot: BotFactory, fake: FakeSlack
) -> None:
    dry_run_scripts: list[Path] = []

    def dryrun(path: Path) -> DryrunReport:
        dry_run_scripts.append(path)
        raise AssertionError("a script whose data is on the runner host was dry-run here")

    user = SlackUser(make_bot(dryrun=dryrun))
    user.command(name="/train-sft")
    user.click("Train from a JSONL file")
    user.click("ServerlessBackend")
    user.click("A JSONL file on the runner host")
    user.reply("/data/pii/train.jsonl")
    user.click("No validation")
    user.click("OpenPipe/Qwen3-14B-Instruct")
    user.reply("default")
    user.reply("pii-redactor-001")
    user.click("Use defaults")

    card = user.wait_for_result()
    assert "from `/data/pii/train.jsonl` on the runner host" in card.text
    assert "epochs from the row count at start" in card.text
    assert (
        "Not dry-run here: the script reads `/data/pii/train.jsonl` on the runner host" in card.text
    )
    assert dry_run_scripts == []


def test_a_distillation_run_needs_its_teacher_key_where_it_trains() -> None:
    answers = replay(TRAIN_SFT, SFT_VARIANTS["distill-serverless-paste-val"]).answers
    assert required_env(answers) == ["WANDB_API_KEY", "OPENROUTER_API_KEY"]
    from_file = replay(TRAIN_SFT, SFT_VARIANTS["file-local-paste"]).answers
    assert required_env(from_file) == []
