"""Realistic inputs, written from ART's examples and the seeds, typed into a real `artbot chat`.

Each agent is answered the way a person answers at a terminal: a choice by its option's label or
its number (in turn), text as it is typed, Enter where the answer is the question's default, data
and code pasted as they are, without ``` fences (scenarios as JSONL rows, tool schemas as indented
JSON, code as written, blank lines and all), what the agent sees as its field names, tool URLs as
`name: METHOD url` lines and the auth header as `Name: Bearer $VARIABLE`. The script written must
be exactly the one the same answers render from a file (`artbot render`): nothing was lost,
doubled or split on the way, and it passes the checks the chat runs on it (`--no-dryrun`: the
dry runs of these agents are in tests/checks/test_realistic_agents.py). The replies are worked out
by feeding the same typed replies to the engine, which says which question comes next: piped, the
terminal reads ahead at code and data questions, so it cannot be answered one prompt at a time.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from artbot.exit_status import EXIT_INCONCLUSIVE
from artbot.terminal.markup import terminal_text
from checks.script_format import formatted_script
from flows import (
    TRAIN_RL,
    Choice,
    Question,
    Reply,
    Session,
    Text,
    Turn,
    ValuesMenu,
    advance,
    begin,
    replay,
)
from tests.artbot.terminal.test_chat import chat, environment, questions
from tests.flows.realistic import REALISTIC
from tests.flows.realistic_agents import (
    email_agent,
    game_2048_free_text,
    invalid_moves_game,
    tic_tac_toe_letters_on_top,
)
from tests.flows.realistic_tasks import (
    art_e,
    codenames,
    support_agent,
    support_agent_with_a_customer,
    temporal_clue,
)

CORPUS: dict[str, dict[str, Any]] = {
    **REALISTIC,
    "email-agent": email_agent(),
    "art-e": art_e(),
    "support-agent": support_agent("https://crm.internal"),
    "support-agent-with-a-customer": support_agent_with_a_customer("https://crm.internal"),
    "codenames": codenames(),
    "temporal-clue": temporal_clue(),
    "tic-tac-toe-letters": tic_tac_toe_letters_on_top(),
    # Room for a model that thinks before it moves, and bigger groups: the values menu, typed.
    "2048-free-text": game_2048_free_text(
        hyperparameters="customize",
        hyperparameter_values={"max_completion_tokens": 4096, "rollouts_per_group": 8},
    ),
}
"""tests/bot/test_realistic_inputs.py's corpus (less its entry of Slack's escapes), and the two
games of issue 26 that only the dry-run tests played."""
TURN_LIMIT = 60
ENTER = ""
"""An empty line: the open question's default."""


def typed_choice(
    question: Question, so_far: Mapping[str, Any], value: str, *, by_number: bool
) -> str:
    """The option that stores `value`, by the number shown or by its label (the step's: the label
    shown of the recommended one ends in " (recommended)", which the wizard refuses as typed); a
    value no option has (another judge model) as it is typed."""
    shown = next((o for o in question.options if o.value == value), None)
    if shown is None:
        return value
    step = TRAIN_RL.step(question.step_id)
    assert isinstance(step, Choice)
    label = next(o.label for o in step.options_for(so_far) if o.value == value)
    return str(shown.number) if by_number else label


def typed_text(step: Text, value: Any) -> list[str]:
    """A text, number, data or code answer as the lines a person types or pastes."""
    if value is None:
        return [ENTER]
    if isinstance(value, str):  # a paste ends at its last line: no empty line after it, which
        value = value.rstrip("\n")  # piped is the next question's Enter
        if "\n" in value and step.kind == "text":  # several lines of prose (a rubric): piped,
            return ["```", value, "```"]  # only a fenced block is one answer
        return ["default" if value == "" and step.default is not None else value]
    if isinstance(value, bool):
        return [json.dumps(value)]
    if isinstance(value, int | float):
        return [str(value)]
    if isinstance(value, list) and step.id == "scenario_rows":
        return [json.dumps(row, ensure_ascii=False) for row in value]  # JSONL, one row a line
    if isinstance(value, list):
        return [json.dumps(value, indent=2, ensure_ascii=False)]  # as copied from an editor
    assert isinstance(value, Mapping), f"{step.id}: {value!r}"
    if set(value) == {"kind", "code"}:  # a reward: the user wrote its code
        return [value["code"].rstrip("\n")]
    if step.id == "agent_prompt":  # {"fields": [...]}: the names; {"code": ...}: the function
        return [", ".join(value["fields"]) if "fields" in value else value["code"]]
    if step.id == "tool_urls":
        return [f"{name}: {endpoint}" for name, endpoint in value.items()]
    if step.id == "tool_auth":
        if not value:
            return ["skip"]
        return [f"{value['header']}: {value['prefix']}${value['variable']}{value['suffix']}"]
    if step.id == "simulated_user":  # {}: none; else its instructions, typed
        return [value["instructions"]] if value else ["skip"]
    raise AssertionError(f"{step.id}: how would a person type {value!r}?")


def typed_menu(question: Question, value: Mapping[str, Any] | None) -> list[str]:
    """A values menu: each changed value picked by its label, then its new value; then Done."""
    replies: list[str] = []
    for field_id, field_value in (value or {}).items():
        option = next(o for o in question.options if o.value == field_id)
        replies += [option.label.split(":")[0], str(field_value)]
    return [*replies, "Done"]


def as_reply(text: str) -> Reply:
    return Reply(text=text, empty_means_default=True)


def the_question(turn: Turn) -> Question | None:
    return next((m for m in turn.messages if isinstance(m, Question)), None)


def first_line(question: Question | None, otherwise: str) -> str:
    """The question's first line as the terminal prints it (after its [part · question])."""
    assert question is not None, otherwise
    return terminal_text(question.text.partition("\n")[0])


def replies_for(answers: Mapping[str, Any]) -> tuple[list[str], list[str]]:
    """The lines to type for `answers`, and the questions the terminal asks, by their first line.

    The engine takes each typed reply (a paste as one reply, as the terminal should read it) and
    says which question comes next.
    """
    turn = begin(TRAIN_RL, Session.start(TRAIN_RL.id))
    lines: list[str] = []
    asked: list[str] = []
    choices = 0
    for _ in range(TURN_LIMIT):
        if turn.session.status == "complete":
            return lines, asked
        question = the_question(turn)
        assert question is not None, turn.messages
        asked.append(first_line(question, ""))
        step = TRAIN_RL.step(question.step_id)
        value = answers.get(step.id)
        if isinstance(step, ValuesMenu):
            *picks, done = typed_menu(question, value)
            for reply in picks:  # a value's name, then its new value, each a reply
                turn = advance(TRAIN_RL, turn.session, as_reply(reply))
                asked.append(first_line(the_question(turn), f"{step.id}: {reply!r}: {turn}"))
            lines += picks
            typed = [done]
        elif isinstance(step, Choice):
            assert isinstance(value, str), f"{step.id}: {value!r}"
            by_number = choices % 2 == 1
            typed = [typed_choice(question, turn.session.answers, value, by_number=by_number)]
            choices += 1
        else:
            typed = typed_text(step, value)
        reply = "\n".join(typed)  # lines pasted together: one reply
        before = turn.session
        turn = advance(TRAIN_RL, turn.session, as_reply(reply))
        assert step.id in turn.session.answers and step.id not in before.answers, (
            f"{step.id}: {reply!r} was not taken: {turn.messages}"
        )
        lines += typed
    raise AssertionError(f"more than {TURN_LIMIT} questions")


@pytest.mark.parametrize("name", sorted(CORPUS))
def test_a_realistic_wizard_typed_at_a_terminal_writes_the_script_of_its_answers(
    tmp_path: Path, name: str
) -> None:
    answers = CORPUS[name]
    (tmp_path / "work").mkdir()
    lines, asked = replies_for(answers)

    result = chat(tmp_path, lines, "--session", name)

    assert questions(result.stdout) == asked, result.stdout
    assert "Problem:" not in result.stdout, result.stdout
    assert result.returncode == 0, result.stdout + result.stderr
    script = tmp_path / "work" / f"{answers['run_name']}.py"
    assert script.read_text() == formatted_script(replay(TRAIN_RL, answers).answers)


@pytest.mark.slow
def test_a_chat_whose_dry_run_proves_nothing_exits_as_artbot_dryrun_does(tmp_path: Path) -> None:
    """The stand-in player cannot find this game's moves: the script is fine, the dry run is
    inconclusive, and `artbot chat` says so with `artbot dryrun`'s status (4), not a failure."""
    answers = invalid_moves_game()
    (tmp_path / "work").mkdir()
    lines, _ = replies_for(answers)

    result = subprocess.run(
        [sys.executable, "-m", "artbot.cli", "chat", "--session", "moves"],
        input="".join(f"{line}\n" for line in lines),
        cwd=tmp_path / "work",
        env=environment(tmp_path),
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )

    assert "dry run INCONCLUSIVE" in result.stdout, result.stdout + result.stderr
    assert result.returncode == EXIT_INCONCLUSIVE, result.stdout + result.stderr
    assert (tmp_path / "work" / f"{answers['run_name']}.py").is_file()
