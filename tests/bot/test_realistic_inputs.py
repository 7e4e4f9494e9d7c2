"""Realistic inputs, written from ART's examples and the seeds, through the whole Slack path.

Each wizard is answered the way a person in Slack would: a button for every choice, a thread
reply for everything else (code and data in a ``` block), every reply escaped as Slack escapes
it (`&amp;`, `&lt;`, `&gt;`, URLs linked, inside code blocks too). The script the bot uploads
must be exactly the one the same answers render from a file (`artbot render`): nothing was lost,
doubled or mangled on the way. The same answers pass `artbot check` and the dry run with the
user's own code shown to have run in tests/checks/test_user_code_scripts.py and
tests/checks/test_realistic_agents.py.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from checks.script_format import formatted_script
from flows import TRAIN_RL, replay
from tests.bot.conftest import BotFactory, SlackUser
from tests.fakes.slack_api import FakeSlack
from tests.flows.matrix import MATH_ROWS
from tests.flows.realistic import REALISTIC
from tests.flows.realistic_agents import email_agent
from tests.flows.realistic_tasks import (
    art_e,
    codenames,
    support_agent_with_a_customer,
    temporal_clue,
)

ESCAPING_TASK = "Q&A: is 3 < 5 && 7 > 2? Answer «yes» or «no» — “quoted” or 'single'."
ESCAPING_ROWS = [
    {"prompt": "Is 3 < 5 && 7 > 2?", "answer": "yes"},
    {"prompt": "Is 10 <= 9 || 1 >= 2? (A&B)", "answer": "no"},
    {"prompt": "Ist «ä» < «z»? 日本語 <b>bold</b>", "answer": "yes"},
    {"prompt": 'Does "&amp;" mean "&"?', "answer": "yes"},
]
ESCAPING_REWARD = """\
import re

# Spec: https://example.com/rules?kind=yes-no&strict=1 <- both words count
WORD = re.compile(r"\\b(yes|no)\\b", re.IGNORECASE)


def first_word(text: str) -> str:
    found = WORD.search(text or "")
    return found.group(1).lower() if found else ""


def compute_reward(scenario, answer, trajectory):
    said = first_word(answer)
    if not said:
        return -1.0 if len(answer) > 200 else 0.0
    return 1.0 if said == scenario["answer"] and 0 < len(answer) <= 40 else 0.0
"""

CORPUS: dict[str, dict[str, Any]] = {
    **REALISTIC,
    "email-agent": email_agent(),
    "art-e": art_e(),
    "support-agent": support_agent_with_a_customer("https://crm.internal"),
    "codenames": codenames(),
    "temporal-clue": temporal_clue(),
    "escaping": {
        **REALISTIC["math-reward"],
        "task": ESCAPING_TASK,
        "scenario_rows": ESCAPING_ROWS,
        "system_prompt": "Reply «yes» or «no» & nothing else; never write <html>.",
        "reward_logic": ESCAPING_REWARD,
        "run_name": "escaping-001",
    },
}
TURN_LIMIT = 60


def as_reply(value: Any) -> str:
    """An answer as a person types it: text as it is, code and data in a ``` block (a reward
    stored as `{"kind": "function", "code": ...}` is typed as its code)."""
    if isinstance(value, dict) and value.get("kind") in ("function", "expression"):
        value = value["code"]
    if value == "":  # an optional answer left empty (a rubric): its default, as replay reads it
        return "default"
    if isinstance(value, str):
        return f"```\n{value}\n```" if "\n" in value else value
    if isinstance(value, list | dict):
        return f"```\n{json.dumps(value, ensure_ascii=False)}\n```"
    return str(value)


def button_for(user: SlackUser, step_id: str, value: Any) -> str | None:
    """The label of the open question's button that answers `step_id` with `value`, if any."""
    try:
        message = user.open_question()
    except AssertionError:
        return None
    for block in message.blocks or []:
        for element in block.get("elements", []) if block.get("type") == "actions" else []:
            if element.get("value") == f"{step_id}|{value}":
                return element["text"]["text"]
    return None


def walk_the_wizard(user: SlackUser, answers: dict[str, Any]) -> None:
    """Answer every question the bot asks from `answers` (a question left out: `default`)."""
    for _ in range(TURN_LIMIT):
        step_id = user.asked()
        if step_id == "<done>":
            return
        value = answers.get(step_id, "default")
        label = button_for(user, step_id, value) if isinstance(value, str) else None
        if label is not None:
            user.click(label)
        else:
            user.reply(as_reply(value))
        assert user.asked() != step_id, f"{step_id}: {user.last_text()}"
    raise AssertionError(f"more than {TURN_LIMIT} questions")


def uploaded_script(fake: FakeSlack, name: str) -> str:
    fake.wait_for(lambda f: any(u.name == name for u in f.uploaded_files()), 60)
    return next(u for u in fake.uploaded_files() if u.name == name).content.decode()


def walked_through_slack(make_bot: BotFactory, fake: FakeSlack, name: str) -> None:
    answers = CORPUS[name]
    user = SlackUser(make_bot())
    user.command()
    walk_the_wizard(user, answers)
    script = uploaded_script(fake, f"{answers['run_name']}.py")
    assert script == formatted_script(replay(TRAIN_RL, answers).answers)
    typed = json.dumps(answers, ensure_ascii=False)
    for entity in ("&amp;", "&lt;", "&gt;", "<https://"):  # only where the user typed them
        assert script.count(entity) == typed.count(entity), entity


@pytest.mark.parametrize("database", ["sqlite"], indirect=True)
@pytest.mark.parametrize("name", sorted(set(CORPUS) - {"escaping"}))
def test_a_realistic_wizard_through_slack_gives_the_same_script_as_its_answers(
    make_bot: BotFactory, fake: FakeSlack, name: str
) -> None:
    walked_through_slack(make_bot, fake, name)


def test_a_wizard_full_of_slacks_escaped_characters_gives_the_script_as_typed(
    make_bot: BotFactory, fake: FakeSlack
) -> None:
    walked_through_slack(make_bot, fake, "escaping")
    script = uploaded_script(fake, "escaping-001.py")
    assert repr(ESCAPING_TASK) in script or json.dumps(ESCAPING_TASK, ensure_ascii=False) in script
    assert "https://example.com/rules?kind=yes-no&strict=1 <- both words count" in script
    assert MATH_ROWS != ESCAPING_ROWS
