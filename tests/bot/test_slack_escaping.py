"""What a user types reaches the wizard as typed, and what the bot echoes shows it as typed.

The fake Slack escapes incoming text as Slack does (`&amp;`, `&lt;`, `&gt;`, and `<url>` links
in messages), so these transcripts go through the same formatting a real workspace applies.
"""

from __future__ import annotations

import ast
import json
import textwrap

from tests.bot.conftest import BotFactory, SlackUser, answer_after_the_reward
from tests.fakes.slack_api import FakeSlack
from tests.fakes.slack_requests import event_callback, file_share_event, message_event
from tests.fakes.workspace import BOT_USER_ID, CHANNEL_ID, USER_ID
from tests.flows.matrix import MATH_ROWS

ROWS = "\n".join(json.dumps(row) for row in MATH_ROWS)
TASK = "Q&A … 3 < 5 && x > 2"
REWARD = (
    "def compute_reward(scenario, answer, trajectory):\n"
    "    # Scoring rules: https://example.com/rules?kind=short&max=10\n"
    '    return 1.0 if 0 < len(answer) <= 10 and answer.strip() != "" else 0.0\n'
)
REWARD_WITH_AND_AND_GT = (
    "def compute_reward(scenario, answer, trajectory):\n"
    "    flags = len(answer) & 1\n"
    "    return 1.0 if len(answer) > 0 and flags >= 0 else 0.0\n"
)


def answer_until_the_reward_code(user: SlackUser, task: str) -> None:
    user.click("Only logged or static scenarios")
    user.click("Single-turn")
    user.reply(task)
    user.click("Paste them here")
    user.reply(f"```\n{ROWS}\n```")
    user.reply("skip")
    user.reply("default")  # what the agent sees
    user.click("Programmatic")


def stored_answers(user: SlackUser) -> dict[str, object]:
    stored = user.bot.service.store.get(user.key)
    assert stored is not None
    return dict(stored.session.answers)


def test_a_task_and_pasted_code_land_in_the_script_exactly_as_typed(
    make_bot: BotFactory, fake: FakeSlack
) -> None:
    user = SlackUser(make_bot())
    user.command()
    answer_until_the_reward_code(user, TASK)
    assert stored_answers(user)["task"] == TASK
    # The answered question shows the task as typed: each character escaped once in mrkdwn.
    echo = next(c for c in fake.calls("chat.update") if "Q&amp;A" in str(c.params["blocks"]))
    echoed = "\n".join(block["text"]["text"] for block in echo.json("blocks"))
    assert "Q&amp;A … 3 &lt; 5 &amp;&amp; x &gt; 2" in echoed and "&amp;amp;" not in echoed
    assert "&amp;lt;" not in echoed and "&amp;gt;" not in echoed
    answered = fake.message(CHANNEL_ID, echo.params["ts"])
    assert answered is not None and TASK in answered.shown

    user.reply(f"```\n{REWARD}```")  # Slack links the URL: `<https://example.com/...&amp;max=10>`
    assert user.asked() == "train_split"  # accepted: it parses
    assert stored_answers(user)["reward_logic"] == {"kind": "function", "code": REWARD}
    answer_after_the_reward(user)

    fake.wait_for(lambda f: any(u.name == "math-solver-001.py" for u in f.uploaded_files()), 60)
    script = next(u for u in fake.uploaded_files() if u.name == "math-solver-001.py")
    source = script.content.decode()
    task_line = next(line for line in source.splitlines() if line.startswith("TASK = "))
    assert ast.literal_eval(task_line.removeprefix("TASK = ")) == TASK
    assert textwrap.indent(REWARD, "    ") in source  # the body of user_reward, as typed
    assert "&amp;" not in source and "&lt;" not in source and "<https://" not in source


def test_code_with_every_escaped_character_is_accepted_as_typed(make_bot: BotFactory) -> None:
    user = SlackUser(make_bot())
    user.command()
    answer_until_the_reward_code(user, "Answer arithmetic questions with only the number.")
    user.reply(REWARD_WITH_AND_AND_GT)
    assert user.asked() == "train_split"
    assert stored_answers(user)["reward_logic"] == {
        "kind": "function",
        "code": REWARD_WITH_AND_AND_GT,
    }


def test_a_slash_command_task_shows_in_the_parent_as_typed(
    make_bot: BotFactory, fake: FakeSlack
) -> None:
    user = SlackUser(make_bot())
    thread = user.command("Q&A <fast>")  # Slack sends `Q&amp;A &lt;fast&gt;`
    parent = fake.message(CHANNEL_ID, thread)
    assert parent is not None
    posted = "\n".join(block["text"]["text"] for block in parent.blocks or [])
    assert "Q&amp;A &lt;fast&gt;" in posted and "&amp;amp;" not in posted
    assert "started an RL training wizard for: _Q&A <fast>_" in parent.shown
    assert parent.text.startswith(f"<@{USER_ID}> started")  # the mention is still a mention
    user.click("Only logged")
    user.click("Single-turn")
    confirm = user.bot_messages()[-1]
    assert "Q&A <fast>" in confirm.shown and "&amp;" not in confirm.shown
    assert "Q&amp;A &lt;fast&gt;" in confirm.text  # the fallback `text` is mrkdwn too
    user.reply("yes")  # keep the task from the command
    assert stored_answers(user)["task"] == "Q&A <fast>"


def test_uploaded_files_are_raw_bytes_never_unescaped(
    make_bot: BotFactory, fake: FakeSlack
) -> None:
    rows = [{"prompt": "Is 3 &lt; 5 &amp; 2 > 1? Reply yes or no.", "answer": "yes"}] * 8
    jsonl = "\n".join(json.dumps(row) for row in rows).encode()
    code = (
        "# In a message Slack writes < as &lt; and & as &amp;; a file keeps its bytes.\n"
        "def compute_reward(scenario, answer, trajectory):\n"
        '    return 1.0 if answer.strip() == scenario["answer"] and 0 < 1 else 0.0\n'
    )
    user = SlackUser(make_bot())
    user.command()
    user.click("Only logged")
    user.click("Single-turn")
    user.reply("Answer yes-or-no questions about numbers, with only yes or no.")
    user.click("Upload a .jsonl file")
    drop(user, fake, "rows.jsonl", jsonl)
    assert stored_answers(user)["scenario_rows"] == rows
    user.reply("skip")
    user.reply("default")  # what the agent sees
    user.click("Programmatic")
    drop(user, fake, "reward.py", code.encode())
    assert stored_answers(user)["reward_logic"] == {"kind": "function", "code": code}


def drop(user: SlackUser, fake: FakeSlack, name: str, content: bytes) -> None:
    """The user drops a file into the thread; wait for the bot's answer."""
    file = fake.add_user_file(name, content)
    count = len(user.bot_messages())
    event = file_share_event([file], channel=CHANNEL_ID, user=USER_ID, thread_ts=user.thread)
    user.bot.dispatch(event_callback(event))
    fake.wait_for(lambda f: len(user.bot_messages()) > count)
    user.settle()


def test_a_reply_addressed_to_the_bot_is_read_without_the_mention(
    make_bot: BotFactory, fake: FakeSlack
) -> None:
    user = SlackUser(make_bot())
    user.command()
    count = len(user.bot_messages())
    # "@artbot static", picked from Slack's autocomplete, arrives as `<@U0BOT> static`.
    event = message_event(
        f"<@{BOT_USER_ID}> static",
        channel=user.channel,
        user=user.user,
        thread_ts=user.thread,
        typed=False,
    )
    assert user.bot.dispatch(event_callback(event)) == 200
    fake.wait_for(lambda f: len(user.bot_messages()) > count)
    user.settle()
    assert stored_answers(user)["replayable"] == "static"
