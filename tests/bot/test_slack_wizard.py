"""The wizard in Slack, end to end: signed requests in, what the fake Slack received out."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path

import pytest

from bot.process.serve import BotServer, web_for
from bot.wizard.replies import Incoming
from checks.dryrun import DryrunReport
from checks.script_check import check_script
from flows import Reply
from tests.bot.conftest import BotFactory, SlackUser, answer_after_the_reward
from tests.fakes.slack_api import FakeSlack
from tests.fakes.slack_requests import (
    block_actions,
    event_callback,
    file_share_event,
    message_changed_event,
    message_deleted_event,
    message_event,
    slash_command,
    thread_broadcast_event,
)
from tests.fakes.workspace import CHANNEL_ID, TEAM_ID, USER_ID
from tests.flows.matrix import MATH_ROWS

ROWS = "\n".join(json.dumps(row) for row in MATH_ROWS)
OTHER_USER = "U0OTHER"


def answer_through_the_ruler_judge(user: SlackUser) -> None:
    """A single-turn RULER wizard on inline rows, with buttons and thread replies, up to and
    including the judge model and its rubric."""
    user.click("Only logged or static scenarios")
    user.click("Single-turn")
    user.reply("Answer arithmetic questions with only the final number.")
    user.click("Paste them here")
    user.reply(f"```\n{ROWS}\n```")
    user.reply("skip")
    user.reply("default")  # what the agent sees
    user.click("RULER")
    user.click("openai/gpt-5.4")
    user.reply("default")  # RULER's rubric: ART's


def answer_single_turn_ruler(user: SlackUser) -> None:
    """Walk a whole single-turn RULER wizard with buttons and thread replies."""
    answer_through_the_ruler_judge(user)
    answer_after_the_reward(user)


@pytest.fixture(params=["dispatch", "http"])
def transport(request: pytest.FixtureRequest) -> str:
    return str(request.param)


def test_a_full_wizard_ends_with_the_checked_script_in_the_thread(
    make_bot: BotFactory, fake: FakeSlack, transport: str
) -> None:
    bot = make_bot()
    if transport == "http":  # every request signed and POSTed to the real server, as Slack does
        server = BotServer(web_for(bot.app, bot.service)).start()
        bot.http_url = f"{server.base_url}/slack/events"
    user = SlackUser(bot)
    thread = user.command()
    parent = fake.message(CHANNEL_ID, thread)
    assert parent is not None and f"<@{USER_ID}>" in parent.text
    assert user.bot_messages()[0].text.startswith(
        "Can an episode"
    )  # the first question, in the thread

    answer_single_turn_ruler(user)

    card = user.wait_for_result()
    uploads = fake.uploaded_files()
    assert [u.name for u in uploads] == ["math-solver-001.py"]
    upload = uploads[0]
    # Uploaded without a share message of its own: the result card links it, and says what it is.
    assert upload.channel is None
    assert "/files/" in card.text and f"/{upload.id}/math-solver-001.py|" in card.text
    assert "artbot check" in card.text and "math-solver-001" in card.text
    script = (
        Path(user.bot.settings.artbot_scripts_dir or "")
        / TEAM_ID
        / CHANNEL_ID
        / thread
        / "math-solver-001.py"
    )
    assert script.read_bytes() == upload.content
    assert check_script(script).ok
    # Every answered question lost its buttons and shows its answer.
    updates = fake.calls("chat.update")
    assert len(updates) >= 19
    assert all(
        not any(b.get("type") == "actions" for b in (c.json("blocks") or [])) for c in updates
    )
    assert user.bot_messages()[-1] == card
    labels = [
        e["text"]["text"]
        for b in card.blocks or []
        if b["type"] == "actions"
        for e in b["elements"]
    ]
    assert labels == ["Approve and run", "Edit an answer", "Regenerate", "Cancel"]


def test_the_same_wizard_over_real_signed_http(make_bot: BotFactory, fake: FakeSlack) -> None:
    bot = make_bot()
    server = BotServer(web_for(bot.app, bot.service)).start()
    url = f"{server.base_url}/slack/events"
    try:
        started = time.monotonic()
        reply = slash_command(
            text="Sort support tickets by urgency", user_id=USER_ID, channel_id=CHANNEL_ID
        ).post(url)
        assert reply.status == 200 and time.monotonic() - started < 3
        fake.wait_for(lambda f: any(m.is_reply for m in f.messages(CHANNEL_ID)))
        parent = next(m for m in fake.messages(CHANNEL_ID) if not m.is_reply)
        event = message_event("static", channel=CHANNEL_ID, user=USER_ID, thread_ts=parent.ts)
        assert event_callback(event).post(url).status == 200
        fake.wait_for(
            lambda f: "Single-turn or multi-turn?" in f.thread(CHANNEL_ID, parent.ts)[-1].text
        )
        forged = event_callback(event, signing_secret="not-the-secret").post(url)
        assert forged.status == 401
        stale = event_callback(event, timestamp=int(time.time()) - 600).post(url)
        assert stale.status == 401
    finally:
        server.stop()


def test_text_after_the_command_prefills_the_task_but_must_be_confirmed(
    make_bot: BotFactory,
) -> None:
    user = SlackUser(make_bot())
    user.command("Classify support tickets by urgency")
    user.click("Only logged")
    user.click("Single-turn")
    assert "Classify support tickets by urgency" in user.last_text()
    assert user.asked() == "task"
    user.reply("yes")
    assert user.asked() == "scenario_source"


def test_a_retried_event_and_a_double_click_advance_the_session_once(
    make_bot: BotFactory, fake: FakeSlack
) -> None:
    user = SlackUser(make_bot())
    user.command()
    user.click("Only logged")
    stored = user.bot.service.store.get(user.key)
    assert stored is not None
    revision = stored.session.revision
    # The same click delivered twice (a double click): the second is a no-op.
    message = user.bot_messages()[-1]
    user.click("Single-turn")
    user.bot.wait_for_works_done(3)  # the command and both clicks, done to their end
    posted = len(user.bot_messages())
    element = next(
        e
        for b in message.blocks or []
        if b["type"] == "actions"
        for e in b["elements"]
        if "Single" in e["text"]["text"]
    )
    again = block_actions(
        element["action_id"],
        element["value"],
        message_ts=message.ts,
        user_id=USER_ID,
        channel_id=CHANNEL_ID,
        message=message.to_slack(),
    )
    assert user.bot.dispatch(again) == 200
    user.bot.wait_for_works_done(4)
    assert len(user.bot_messages()) == posted
    # A thread reply Slack retries with the same event_id: handled once.
    user.reply("Answer arithmetic questions with only the number.", event_id="Ev0RETRY")
    user.reply(
        "Answer arithmetic questions with only the number.",
        event_id="Ev0RETRY",
        retry_num=1,
        wait=False,
    )
    user.bot.wait_for_works_done(6)
    stored = user.bot.service.store.get(user.key)
    assert stored is not None
    assert stored.session.revision == revision + 2
    assert stored.session.answers["task"] == "Answer arithmetic questions with only the number."
    assert user.asked() == "scenario_source"


def test_a_retried_reply_that_would_answer_the_next_question_too_is_applied_once(
    make_bot: BotFactory,
) -> None:
    user = SlackUser(make_bot())
    user.command()
    answer_through_the_ruler_judge(user)
    user.click("All scenarios")
    user.click("Hold out a fraction")
    user.reply("0.25")
    user.reply("default", event_id="Ev0DEFAULT")
    user.settle()
    before = user.bot.service.store.get(user.key)
    assert before is not None
    posted = len(user.bot_messages())

    # Slack's retry of that event, handled to the end here (not on the listeners' pool).
    retry = Incoming(user.key, USER_ID, Reply(text="default"), "Ev0DEFAULT")
    user.bot.service.replies.handle(user.bot.app.client, retry)

    after = user.bot.service.store.get(user.key)
    assert after is not None and after.session == before.session
    assert user.bot.service.outbox.pending(user.key) == []
    assert len(user.bot_messages()) == posted
    # The same text as a new reply is an answer to the open question: the retry was turned away.
    user.reply("default")
    assert user.asked() == "base_model"


def test_racing_replies_in_one_thread_are_serialized(make_bot: BotFactory) -> None:
    user = SlackUser(make_bot())
    user.command()
    user.click("Only logged")
    user.click("Single-turn")
    user.reply("Answer arithmetic questions with only the number.")
    replies = ["inline", ROWS]
    requests = [
        event_callback(message_event(r, channel=CHANNEL_ID, user=USER_ID, thread_ts=user.thread))
        for r in replies
    ]
    threads = [threading.Thread(target=user.bot.dispatch, args=(req,)) for req in requests]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    user.fake.wait_for(
        lambda f: user.asked() in ("system_prompt", "scenario_rows", "scenario_source"), timeout=10
    )
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and user.asked() != "system_prompt":
        time.sleep(0.05)
    stored = user.bot.service.store.get(user.key)
    assert stored is not None
    # Whatever order they ran in, each reply was applied exactly once, one after the other:
    # "inline" then the rows (both accepted), or the rows first (refused), then "inline".
    answers = stored.session.answers
    if "scenario_rows" in answers:
        assert answers["scenario_rows"] == MATH_ROWS and user.asked() == "system_prompt"
    else:
        assert answers["scenario_source"] == "inline" and user.asked() == "scenario_rows"


def test_two_copies_of_one_delivery_at_once_are_one_turn(make_bot: BotFactory) -> None:
    """Slack's retry can arrive while the first attempt is still being handled: neither has been
    recorded yet, and only one of them may count. The delivery id is recorded in the transaction
    that saves the turn, so the copy that comes second fails there and changes nothing."""
    user = SlackUser(make_bot())
    user.command()
    user.click("Only logged")
    user.click("Single-turn")
    stored = user.bot.service.store.get(user.key)
    assert stored is not None
    revision = stored.session.revision
    posted = len(user.bot_messages())
    copies = [
        event_callback(
            message_event(
                "Answer arithmetic questions with only the number.",
                channel=CHANNEL_ID,
                user=USER_ID,
                thread_ts=user.thread,
            ),
            event_id="Ev0TWICE",
        )
        for _ in range(2)
    ]
    threads = [threading.Thread(target=user.bot.dispatch, args=(copy,)) for copy in copies]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    user.settle()

    stored = user.bot.service.store.get(user.key)
    assert stored is not None and stored.session.revision == revision + 1
    assert user.asked() == "scenario_source"
    assert len(user.bot_messages()) == posted + 1  # one question, no "not an option" either


def test_someone_else_gets_an_ephemeral_note_and_changes_nothing(
    make_bot: BotFactory, fake: FakeSlack
) -> None:
    owner = SlackUser(make_bot())
    owner.command()
    intruder = SlackUser(owner.bot, user=OTHER_USER, thread=owner.thread)
    before = owner.bot.service.store.get(owner.key)
    intruder.reply("static", wait=False)
    fake.wait_for(lambda f: any(m.ephemeral_to == OTHER_USER for m in f.ephemerals()))
    note = next(m for m in fake.ephemerals() if m.ephemeral_to == OTHER_USER)
    assert f"Only <@{USER_ID}>" in note.text
    intruder_click_status = intruder.click("Only logged", wait=False)
    assert intruder_click_status == 200
    owner.bot.wait_for_works_done(3)  # the command, the reply and the click, done to their end
    after = owner.bot.service.store.get(owner.key)
    assert before is not None and after is not None and after.session == before.session


def test_a_restart_mid_wizard_loses_nothing(make_bot: BotFactory) -> None:
    first = SlackUser(make_bot())
    first.command()
    first.click("Only logged")
    first.click("Single-turn")
    first.reply("Answer arithmetic questions with only the number.")
    restarted = SlackUser(make_bot(), thread=first.thread)  # a new app on the same database
    restarted.click("Paste them here")
    assert restarted.asked() == "scenario_rows"
    stored = restarted.bot.service.store.get(restarted.key)
    assert stored is not None and stored.session.answers["task"].startswith("Answer arithmetic")


def test_a_429_from_slack_is_retried(make_bot: BotFactory, fake: FakeSlack) -> None:
    user = SlackUser(make_bot())
    user.command()
    fake.rate_limit("chat.postMessage", times=1, retry_after=0)
    user.click("Only logged")
    assert "Single-turn or multi-turn?" in user.last_text()
    assert [c.status for c in fake.calls("chat.postMessage")].count(429) == 1


def test_a_jsonl_file_dropped_in_the_thread_answers_the_data_question(
    make_bot: BotFactory, fake: FakeSlack
) -> None:
    user = SlackUser(make_bot(ARTBOT_MAX_UPLOAD_BYTES="2000"))
    user.command()
    user.click("Only logged")
    user.click("Single-turn")
    user.reply("Answer arithmetic questions with only the number.")
    user.click("Upload a .jsonl file")
    too_big = fake.add_user_file("big.jsonl", b'{"prompt": "x"}\n' * 500)
    event = file_share_event([too_big], channel=CHANNEL_ID, user=USER_ID, thread_ts=user.thread)
    user.bot.dispatch(event_callback(event))
    fake.wait_for(lambda f: any("limit" in m.text for m in f.ephemerals()))
    assert user.asked() == "scenario_rows"
    good = fake.add_user_file("rows.jsonl", ROWS.encode())
    count = len(user.bot_messages())
    user.bot.dispatch(
        event_callback(
            file_share_event([good], channel=CHANNEL_ID, user=USER_ID, thread_ts=user.thread)
        )
    )
    fake.wait_for(lambda f: len(user.bot_messages()) > count)
    stored = user.bot.service.store.get(user.key)
    assert stored is not None and stored.session.answers["scenario_rows"] == MATH_ROWS


def test_edits_deletions_broadcasts_and_other_bots(make_bot: BotFactory, fake: FakeSlack) -> None:
    user = SlackUser(make_bot())
    user.command()
    original = message_event("static", channel=CHANNEL_ID, user=USER_ID, thread_ts=user.thread)
    user.bot.dispatch(event_callback(message_changed_event(original, "multi")))
    fake.wait_for(lambda f: any("not edits" in m.text for m in f.ephemerals()))
    user.bot.dispatch(event_callback(message_deleted_event(original)))
    from tests.fakes.slack_requests import bot_message_event

    user.bot.dispatch(
        event_callback(bot_message_event("static", channel=CHANNEL_ID, thread_ts=user.thread))
    )
    # The command and the edit's note; a deletion and another bot's message are no work at all.
    user.bot.wait_for_works_done(2)
    assert user.asked() == "replayable"
    count = len(user.bot_messages())
    user.bot.dispatch(
        event_callback(
            thread_broadcast_event(
                "static", channel=CHANNEL_ID, user=USER_ID, thread_ts=user.thread
            )
        )
    )
    fake.wait_for(lambda f: len(user.bot_messages()) > count)
    assert user.asked() == "turns"


def test_a_key_in_a_reply_is_neither_stored_nor_echoed(
    make_bot: BotFactory, fake: FakeSlack
) -> None:
    user = SlackUser(make_bot())
    user.command()
    user.click("Only logged")
    user.click("Single-turn")
    secret = "sk-proj-" + "a1B2c3D4" * 5
    user.reply(secret)
    # One message: the warning, then the question asked again.
    said = user.last_text()
    assert said.index("never stores") < said.index("What must the agent accomplish")
    assert all(secret not in c.params.__repr__() for c in fake.calls() if c.method != "upload")
    stored = user.bot.service.store.get(user.key)
    assert stored is not None and secret not in stored.session.to_json()


def test_list_home_tab_and_expiry(make_bot: BotFactory, fake: FakeSlack) -> None:
    user = SlackUser(make_bot())
    user.command("Summarize contracts")
    user.bot.dispatch(
        slash_command(
            text="list", user_id=USER_ID, channel_id=CHANNEL_ID, response_url=fake.response_url()
        )
    )
    fake.wait_for(lambda f: any("Your wizards (1)" in json.dumps(r) for r in f.responses()))
    from tests.fakes.slack_requests import app_home_opened

    user.bot.dispatch(app_home_opened(USER_ID))
    fake.wait_for(lambda f: f.home_view(USER_ID) is not None)
    home = json.dumps(fake.home_view(USER_ID))
    assert "Summarize contracts" in home and "waiting for your answer" in home
    assert f"/archives/{CHANNEL_ID}/p{user.thread.replace('.', '')}" in home  # the thread's link
    from datetime import timedelta

    expired = user.bot.service.expiry.expire_idle(timedelta(seconds=0))
    assert expired == [user.key]
    fake.wait_for(lambda f: "expired" in user.last_text())
    assert user.open_question_or_none() is None  # the open question lost its buttons
    user.reply("static")
    assert "expired" in user.last_text()


def test_approve_records_who_and_which_script_for_the_owner_only(
    make_bot: BotFactory, fake: FakeSlack
) -> None:
    user = SlackUser(make_bot())
    user.command()
    answer_single_turn_ruler(user)
    user.wait_for_result()
    intruder = SlackUser(user.bot, user=OTHER_USER, thread=user.thread)
    intruder.click("Approve and run", wait=False)
    fake.wait_for(
        lambda f: any("Only <@" in m.text for m in f.ephemerals() if m.ephemeral_to == OTHER_USER)
    )
    assert user.bot.service.records.approvals(user.key) == []
    user.click("Approve and run")
    approvals = user.bot.service.records.approvals(user.key)
    assert len(approvals) == 1 and approvals[0].approved_by == USER_ID
    assert "No GPU runner is configured" in user.last_text()
    upload = fake.uploaded_files()[0]
    import hashlib

    assert approvals[0].script_sha256 == hashlib.sha256(upload.content).hexdigest()


@pytest.mark.slow
def test_the_dry_run_outcome_is_posted_when_ready(make_bot: BotFactory, fake: FakeSlack) -> None:
    from checks.dryrun import dryrun_script

    def dryrun(path: Path) -> DryrunReport:
        return dryrun_script(path, workdir=path.parent / "dryrun")

    user = SlackUser(make_bot(dryrun=dryrun))
    user.command()
    answer_single_turn_ruler(user)
    fake.wait_for(
        lambda f: any("Dry run passed" in m.text for m in user.bot_messages()), timeout=120
    )


def test_it_works_the_same_in_a_direct_message(make_bot: BotFactory, fake: FakeSlack) -> None:
    user = SlackUser(make_bot(), channel="D0DIRECT")
    user.command()
    assert user.bot_messages()[0].text.startswith("Can an episode")
    user.click("Only logged")
    assert user.asked() == "turns"


def test_a_long_dry_run_report_goes_into_the_thread_as_a_file(
    make_bot: BotFactory, fake: FakeSlack
) -> None:
    def failing_dryrun(path: Path) -> DryrunReport:
        return DryrunReport(
            script=path,
            exit_code=1,
            rollouts=8,
            rollout_exceptions=8,
            reward_min=None,
            reward_max=None,
            steps_trained=0,
            validations=0,
            last_val_reward=None,
            first_error="Traceback (most recent call last):\n"
            + "  frame\n" * 1000
            + "ZeroDivisionError: division by zero",
            problems=("every rollout raised",),
            output_tail="",
        )

    user = SlackUser(make_bot(dryrun=failing_dryrun))
    user.command()
    answer_single_turn_ruler(user)
    fake.wait_for(
        lambda f: any(u.name == "math-solver-001.dryrun.txt" for u in f.uploaded_files()),
        timeout=60,
    )
    report = next(u for u in fake.uploaded_files() if u.name.endswith(".dryrun.txt"))
    assert b"ZeroDivisionError" in report.content
    assert any("Dry run failed" in m.text for m in user.bot_messages())


def test_a_channel_the_bot_is_not_in_gets_an_invitation_hint(
    make_bot: BotFactory, fake: FakeSlack
) -> None:
    bot = make_bot()
    fake.fail("chat.postMessage", error="not_in_channel")
    assert (
        bot.dispatch(
            slash_command(
                user_id=USER_ID, channel_id="C0ELSEWHERE", response_url=fake.response_url()
            )
        )
        == 200
    )
    fake.wait_for(lambda f: any("/invite @artbot" in json.dumps(r) for r in f.responses()))
