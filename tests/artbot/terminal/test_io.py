"""The terminal's reading and printing, through its io: which lines make one answer (piped, and
typed or pasted at a terminal), the Edit menu's numbers, and Slack's markup as a terminal shows it.
`artbot chat` itself, with real processes, is in test_chat.py."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest

from artbot.terminal.io import SEND_WITH_EMPTY_LINE, EndOfInput, Terminal
from artbot.terminal.markup import terminal_text
from flows import EDIT_MENU, EditMenu, Notice, OptionView, Problem, Question, Reply

ROWS = [json.dumps({"prompt": f"What is {n} + {n}?", "answer": str(2 * n)}) for n in (1, 2, 3)]
ARRAY = json.dumps([json.loads(row) for row in ROWS], indent=2).splitlines()
GAME = """\
import random

SIZE = 4

def create_game(scenario):
    return {"target": scenario["target"], "guesses": []}


@dataclass_like
def apply_action(game, action):
    game["guesses"].append(int(action))""".splitlines()
HEADER_THEN_BODY = ["def compute_reward(scenario, answer, trajectory):", "", "    return 1.0"]
AUGMENTED = """\
LINES = [[c + r for c in "ABC"] for r in "123"]
LINES += [["A1", "B2", "C3"], ["C1", "B2", "A3"]]
SCORES["draw"] = 0.5


def create_game(scenario):
    return {"cells": {}}""".splitlines()
ENDPOINTS = [
    "list_orders: GET https://crm.internal/customers/{customer_id}/orders",
    "refund: https://crm.internal/orders/{order_id}/refund",
]


class Keyboard:
    """Lines of input, each typed on its own or pasted with the line before it (`+` in front)."""

    def __init__(self, lines: list[str]) -> None:
        self.lines = [(line.removeprefix("+"), line.startswith("+")) for line in lines]
        self.prompts: list[str] = []

    def read_line(self, prompt: str) -> str | None:
        self.prompts.append(prompt)
        return self.lines.pop(0)[0] + "\n" if self.lines else None

    def waiting(self) -> bool:
        """A line pasted with the last one is already there; a typed one is not yet."""
        return bool(self.lines) and self.lines[0][1]


class Screen:
    """A Terminal over a Keyboard, and what it printed."""

    def __init__(self, keyboard: Keyboard, *, interactive: bool, color: bool = False) -> None:
        self.printed: list[str] = []
        self.terminal = Terminal(
            keyboard.read_line,
            self.printed.append,
            interactive=interactive,
            color=color,
            waiting=keyboard.waiting,
        )


def replies(screen: Screen, kind: str) -> Iterator[str]:
    """The replies read at a question of `kind`, until the input ends."""
    screen.terminal.show([Question("step", "What is it?", kind)])
    while True:
        try:
            yield screen.terminal.read_reply().text
        except EndOfInput:
            return


@pytest.mark.parametrize(
    ("kind", "lines", "expected"),
    [
        # JSONL: one row per line, then the next reply.
        ("json", [*ROWS, "skip"], ["\n".join(ROWS), "skip"]),
        # A JSON array over many lines: it goes on while its brackets are open; Enter after it
        # is the next reply (a default), not part of it.
        ("json", [*ARRAY, "", "next"], ["\n".join(ARRAY), "", "next"]),
        ("json", [ROWS[0], "", "next"], [ROWS[0], "", "next"]),
        # Code: definitions, blank lines between them, constants, decorators; then words.
        (
            "code",
            [*GAME, "When the number is guessed."],
            ["\n".join(GAME), "When the number is guessed."],
        ),
        ("code", [*HEADER_THEN_BODY, "0.5"], ["\n".join(HEADER_THEN_BODY), "0.5"]),
        (
            "code",
            ['1.0 if answer == scenario["answer"] else 0.0', "all"],
            ['1.0 if answer == scenario["answer"] else 0.0', "all"],
        ),
        ("code", ["draft", "y"], ["draft", "y"]),
        # Augmented and subscript assignments at the top level are more code too.
        (
            "code",
            [*AUGMENTED, "End the episode"],
            ["\n".join(AUGMENTED), "End the episode"],
        ),
        # Text, a choice: one line is one reply, as before.
        ("text", ["Add two numbers.", "Then stop."], ["Add two numbers.", "Then stop."]),
        # ... but the tools' URLs, one `name: [METHOD] url` a line, are one answer (the header
        # after them, `Name: value`, is the next).
        (
            "text",
            [*ENDPOINTS, "Authorization: Bearer $CRM_API_KEY"],
            ["\n".join(ENDPOINTS), "Authorization: Bearer $CRM_API_KEY"],
        ),
        ("choice", ["1", "2"], ["1", "2"]),
    ],
)
def test_piped_lines_make_one_answer_where_the_text_says_so(
    kind: str, lines: list[str], expected: list[str]
) -> None:
    screen = Screen(Keyboard(lines), interactive=False)
    assert list(replies(screen, kind)) == expected


@pytest.mark.parametrize(
    ("kind", "lines", "expected", "noted"),
    [
        # Pasted rows arrive together: one answer, sent by an empty line (which may also finish
        # a paste whose last line had no newline: it waits in the line being edited).
        (
            "json",
            [ROWS[0], f"+{ROWS[1]}", f"+{ROWS[2]}", "", "skip"],
            ["\n".join(ROWS), "skip"],
            True,
        ),
        ("json", [ROWS[0], f"+{ROWS[1]}", ROWS[2], "", "skip"], ["\n".join(ROWS), "skip"], True),
        # A multi-line paste at a text question is one answer too.
        (
            "text",
            ["You are a tutor.", "+", "+Answer with a number."],
            ["You are a tutor.\n\nAnswer with a number."],
            True,
        ),
        # Typed: a line is sent as it is, unless it cannot be the whole answer.
        ("json", [ROWS[0], "skip"], [ROWS[0], "skip"], False),
        (
            "json",
            ["[", ROWS[0] + ",", ROWS[1], "]", "", "skip"],
            ["\n".join(["[", ROWS[0] + ",", ROWS[1], "]"]), "skip"],
            True,
        ),
        (
            "code",
            [HEADER_THEN_BODY[0], HEADER_THEN_BODY[2], "", "0.5"],
            [f"{HEADER_THEN_BODY[0]}\n{HEADER_THEN_BODY[2]}", "0.5"],
            True,
        ),
        ("choice", ["1", "2"], ["1", "2"], False),
    ],
)
def test_at_a_terminal_a_paste_is_one_answer_and_an_empty_line_sends_it(
    kind: str, lines: list[str], expected: list[str], noted: bool
) -> None:
    keyboard = Keyboard(lines)
    screen = Screen(keyboard, interactive=True)
    assert list(replies(screen, kind)) == expected
    assert (SEND_WITH_EMPTY_LINE in screen.printed) == noted
    assert ("... " in keyboard.prompts) == noted  # the prompt says the answer goes on


MENU = EditMenu(
    "Which answer do you want to change?",
    (
        OptionView("replayable", "Replayability", "Only logged or static scenarios", 1, False),
        OptionView("turns", "Single or multi-turn", "Single-turn", 2, False),
        OptionView("task", "Task", "Add small numbers.", 3, False),
    ),
    "Or type `edit` and the question's number or name, e.g. `edit 2`.",
)


def test_the_edit_menu_takes_its_own_numbers_and_names() -> None:
    screen = Screen(Keyboard(["2", "task", "9", "3", "", "2", "status"]), interactive=False)
    show, read = screen.terminal.show, screen.terminal.read_reply

    show([MENU])
    assert read() == Reply.button(EDIT_MENU, "turns")
    show([MENU])
    assert read() == Reply.button(EDIT_MENU, "task")
    show([MENU])
    assert read() == Reply.button(EDIT_MENU, "task")  # 9 refused, then 3
    assert "Problem: The menu goes from 1 to 3: pick one of those." in screen.printed
    show([MENU])
    # An empty line closes the menu without a change; the number after it is an answer again.
    assert read() == Reply(text="2")
    assert "Nothing picked, so nothing changes." in screen.printed
    assert read() == Reply(text="status")  # the menu is for the next reply only
    assert "  Reply with its number or name; an empty line changes nothing." in screen.printed


UNTOUCHED = "`*kept*` and `scenario_id`, 2 * 3 * 4, f(*args, **kwargs)"


def test_slack_markup_reads_as_plain_text_and_code_is_left_as_it_is() -> None:
    cases = {
        "*What “Max turns” needs:* a number": "What “Max turns” needs: a number",
        "_Part 2_ of 7": "Part 2 of 7",
        "see <https://art.openpipe.ai/ruler|RULER's docs> &amp; <https://x.dev>": (
            "see RULER's docs (https://art.openpipe.ai/ruler) & https://x.dev"
        ),
        UNTOUCHED: UNTOUCHED,
        "```\n*kept* _too_\n```\n*not*": "```\n*kept* _too_\n```\nnot",
        "x &lt; 3 and a_b_c": "x < 3 and a_b_c",
    }
    for slack, shown in cases.items():
        assert terminal_text(slack) == shown


def test_messages_are_shown_without_markup_and_in_bold_when_colour_is_on() -> None:
    messages = [
        Notice("*Status:* active, 2 questions answered."),
        Problem("“x” is wrong.\n\n*What “Task” needs:* words"),
        Question("task", "What must the agent *accomplish*?\nSay it _plainly_.", "text"),
    ]
    plain = Screen(Keyboard([]), interactive=False)
    plain.terminal.show(messages)
    assert plain.printed == [
        "Status: active, 2 questions answered.",
        "Problem: “x” is wrong.\n\nWhat “Task” needs: words",
        "",
        "What must the agent accomplish?",
        "Say it plainly.",
    ]
    colored = Screen(Keyboard([]), interactive=False, color=True)
    colored.terminal.show(messages[:1])
    assert colored.printed == ["\x1b[1mStatus:\x1b[0m active, 2 questions answered."]
