"""A whole wizard in Slack, read as a person reads it: no internal id in any text, button or menu
option; progress that only counts up within a part; an Edit menu of answered questions by their
labels (buttons, then a select menu) that jumps back to the one picked."""

from __future__ import annotations

import itertools
import json
import re
from typing import Any

from tests.bot.conftest import BotFactory, SlackUser
from tests.fakes.slack_api import FakeSlack, Message
from tests.fakes.slack_requests import block_actions
from tests.flows.matrix import MATH_ROWS
from tests.flows.test_wording import leaked_ids

ROWS = "\n".join(json.dumps(row) for row in MATH_ROWS)
PROGRESS = re.compile(r"Part (\d) of 7: ([^·]+) · question (\d+) of this part")
SHOWN_FIELDS = ("text", "initial_comment")


def shown_strings(value: Any) -> list[str]:
    """Every string under a `text` key (mrkdwn and plain_text objects alike), at any depth."""
    if isinstance(value, dict):
        found = [value["text"]] if isinstance(value.get("text"), str) else []
        return found + [s for v in value.values() for s in shown_strings(v)]
    if isinstance(value, list):
        return [s for v in value for s in shown_strings(v)]
    return []


def everything_shown(fake: FakeSlack) -> list[str]:
    """What any person could read: every message's text and blocks (posted, updated, ephemeral,
    sent to a response URL) and file comments."""
    texts: list[str] = []
    for call in fake.calls():
        texts += [str(call.params[f]) for f in SHOWN_FIELDS if isinstance(call.params.get(f), str)]
        texts += shown_strings(call.json("blocks") or [])
    return texts


def labels_of(message: Message) -> list[str]:
    return [
        e["text"]["text"]
        for b in message.blocks or []
        if b["type"] == "actions"
        for e in b["elements"]
        if e["type"] == "button"
    ]


def select_in(user: SlackUser, label: str) -> None:
    """Pick the option `label` of the newest select menu in the thread."""
    for message in reversed(user.bot_messages()):
        for block in message.blocks or []:
            for element in block.get("elements", []) if block["type"] == "actions" else []:
                if element["type"] != "static_select":
                    continue
                option = next(o for o in element["options"] if o["text"]["text"] == label)
                count = len(user.bot_messages())
                request = block_actions(
                    element["action_id"],
                    option["value"],
                    message_ts=message.ts,
                    message=message.to_slack(),
                    action_type="static_select",
                )
                assert user.bot.dispatch(request) == 200
                user.fake.wait_for(lambda f, before=count: len(user.bot_messages()) > before)
                user.settle()
                return
    raise AssertionError("no select menu in the thread")


def test_a_whole_wizard_reads_as_words_with_steady_progress_and_an_edit_menu(
    make_bot: BotFactory, fake: FakeSlack
) -> None:
    user = SlackUser(make_bot())
    user.command()
    user.click("Only logged or static scenarios")
    user.click("Single-turn")
    user.reply("Answer arithmetic questions with only the final number.")

    user.reply("edit")  # mid-way: the answered questions, by label, as buttons
    menu = user.bot_messages()[-1]
    assert menu.text.startswith("Which answer do you want to change?")
    assert labels_of(menu) == ["1. Replayability", "2. Single or multi-turn", "3. Task"]
    user.click("3. Task")
    assert user.asked() == "task" and "Current answer" in user.last_text()
    user.reply("keep")
    assert user.asked() == "scenario_source"

    user.click("Paste them here")
    user.reply(f"```\n{ROWS}\n```")
    user.reply("skip")
    user.reply("default")  # what the agent sees
    user.click("RULER")
    user.click("openai/gpt-5.4")
    user.reply("default")  # RULER's rubric: ART's
    user.click("All scenarios")
    user.click("Hold out a fraction")
    user.reply("0.25")
    user.reply("default")
    user.reply("default")
    user.click("OpenPipe/Qwen3-14B-Instruct")
    user.reply("default")
    user.reply("math-solver-001")
    user.click("LocalBackend")
    user.click("Customize")
    user.click("Epochs (dataset loop)")
    user.reply("2")
    assert "Epochs (dataset loop): 2" in user.last_text()
    user.click("Done")
    user.click("Epochs over the fixed dataset")
    user.wait_for_result()

    before_the_last_edit = everything_shown(fake)
    user.click("Edit an answer")  # at the end: more than five answers, so a select menu
    assert user.bot_messages()[-1].text.startswith("Which answer do you want to change?")
    select_in(user, "Run name")
    assert user.asked() == "run_name"
    user.reply("math-solver-002")
    user.wait_for_result(count=2)

    assert leaked_ids(everything_shown(fake)) == []
    shown = everything_shown(fake)
    assert any("Epochs (dataset loop): 2" in text for text in shown)  # the menu's answer
    seen: dict[str, list[int]] = {}
    for text in before_the_last_edit:  # (a jump back is the one way a number goes down)
        for number, part, question in PROGRESS.findall(text):
            seen.setdefault(f"{number} {part}", []).append(int(question))
    assert list(seen)[:2] == ["1 Your task", "2 Scenarios"] and len(seen) == 7
    for part, numbers in seen.items():
        steps = [b - a for a, b in itertools.pairwise(numbers)]
        assert numbers[0] == 1 and all(step in (0, 1) for step in steps), (part, numbers)
