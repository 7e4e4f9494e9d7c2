"""Datasets at the train-sft question: every rule of ART's SFT skill and the few more a careful
engineer checks, each refused with the line it is on and the session left as it was; what is
taken is summarized with its warnings."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from flows import MAX_ATTACHMENT_BYTES, Attachment, Reply
from flows.wizards.sft.dataset import (
    MAX_DATASET_CHARS,
    MAX_PROBLEMS_SHOWN,
    dataset_rows,
    summary_text,
)
from flows.wizards.sft.rows import MAX_SEQ_TOKENS, row_problems
from flows.wizards.sft.train_sft import TRAIN_SFT
from tests.flows.conversation import Conversation
from tests.flows.sft_data import CAPITAL_ROWS, ROWS, ROWS_JSONL, WEATHER_TOOL, weather_row
from tests.flows.test_train_sft import skill_snippet

GOOD = [json.dumps(row, ensure_ascii=False) for row in CAPITAL_ROWS[:3]]


def at_dataset() -> Conversation:
    chat = Conversation(flow=TRAIN_SFT)
    chat.play([("file", "backend"), ("local", "dataset_source"), ("paste", "dataset")])
    return chat


def refused(chat: Conversation, reply: Reply) -> str:
    """Send a bad reply: the problem is said, nothing is stored, the same question comes again."""
    before = chat.session
    chat.send(reply)
    problem = chat.problem()
    assert problem is not None, f"{reply.text[:80]!r} was accepted"
    assert chat.session.answers == before.answers
    assert chat.session.history == before.history
    assert chat.asking() == "dataset"
    assert not chat.last.effects
    return problem


def with_line(line: str, at: int = 2) -> str:
    """Three good rows with `line` put in at line `at`."""
    lines = list(GOOD)
    lines.insert(at - 1, line)
    return "\n".join(lines)


USER_ONLY = {"messages": [{"role": "user", "content": "Hi"}]}
BAD_ROWS = [
    pytest.param('{"messages": [', "line 2: not valid JSON", id="not-json"),
    pytest.param(
        json.dumps({**CAPITAL_ROWS[0], "weight": float("nan")}),
        "line 2: not valid JSON: NaN is not a JSON number",
        id="nan",
    ),
    pytest.param('["user", "Hi"]', "line 2: a row must be a JSON object, not a list", id="array"),
    pytest.param(
        '{"prompt": "Hi", "completion": "Hello"}',
        "line 2: `messages` must be a non-empty list",
        id="no-messages",
    ),
    pytest.param('{"messages": []}', "line 2: `messages` must be a non-empty list", id="empty"),
    pytest.param(
        '{"messages": [{"role": "user", "content": "Hi"}, {"role": "bot", "content": "Hello"}]}',
        'line 2: messages[1]: invalid role "bot"',
        id="role",
    ),
    pytest.param(
        '{"messages": [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": ""}]}',
        "line 2: messages[1]: no content and no tool calls",
        id="no-content",
    ),
    pytest.param(
        '{"messages": [{"role": "user", "content": 42}, {"role": "assistant", "content": "Hi"}]}',
        "line 2: messages[0]: content must be text or a list of content parts, not a number",
        id="content-type",
    ),
    pytest.param(
        json.dumps(USER_ONLY),
        "line 2: the last message must be the assistant's",
        id="last-not-assistant",
    ),
    pytest.param(
        json.dumps({"input": USER_ONLY}),
        "line 2: has `input` but no `messages`: ART 0.5.18 trains only on a row's `messages`",
        id="input-row",
    ),
    pytest.param(
        json.dumps({**CAPITAL_ROWS[0], "tools": {"get_weather": {}}}),
        "line 2: `tools` must be a list of function schemas",
        id="tools-not-list",
    ),
    pytest.param(
        json.dumps(
            {
                **CAPITAL_ROWS[0],
                "tools": [{"type": "function", "function": {"name": "get weather"}}],
            }
        ),
        "line 2: tools[0]: the name must be 1 to 64 letters, digits, _ or -",
        id="tool-name",
    ),
    pytest.param(
        json.dumps({**CAPITAL_ROWS[0], "tools": [{"name": "get_weather"}]}),
        'line 2: tools[0]: must be {"type": "function"',
        id="tool-shape",
    ),
    pytest.param(
        json.dumps(
            {
                **CAPITAL_ROWS[0],
                "tools": [
                    {
                        "type": "function",
                        "function": {"name": "f", "parameters": {"type": "string"}},
                    }
                ],
            }
        ),
        'line 2: tools[0]: "parameters" must be {"type": "object", ...}',
        id="tool-parameters",
    ),
    pytest.param(
        json.dumps(
            {
                "messages": [
                    {"role": "user", "content": "Weather in Hobart?"},
                    {
                        "role": "assistant",
                        "tool_calls": [
                            {
                                "type": "function",
                                "function": {
                                    "name": "get_weather",
                                    "arguments": "{location: Hobart}",
                                },
                            }
                        ],
                    },
                    {"role": "tool", "content": "15°C"},
                    {"role": "assistant", "content": "15°C in Hobart."},
                ],
                "tools": [WEATHER_TOOL],
            }
        ),
        "line 2: messages[1]: tool_calls[0]: the arguments of 'get_weather' are not valid JSON",
        id="tool-arguments",
    ),
    pytest.param(
        json.dumps(
            {
                "messages": [
                    {
                        "role": "user",
                        "content": "Hi",
                        "tool_calls": [{"function": {"name": "f", "arguments": "{}"}}],
                    },
                    {"role": "assistant", "content": "Hello"},
                ]
            }
        ),
        "line 2: messages[0]: only the assistant's messages make tool calls, not the user's",
        id="user-tool-call",
    ),
]


@pytest.mark.parametrize(("line", "said"), BAD_ROWS)
def test_a_wrong_row_is_refused_naming_its_line_and_the_session_is_intact(
    line: str, said: str
) -> None:
    problem = refused(at_dataset(), Reply(text=with_line(line)))
    assert problem.startswith("1 of the 4 rows cannot be used; nothing was saved.")
    assert said in problem


@pytest.mark.parametrize(("line", "said"), BAD_ROWS)
def test_the_same_rows_are_refused_in_an_uploaded_file(line: str, said: str) -> None:
    text = with_line(line)
    problem = refused(at_dataset(), Reply(attachments=(Attachment("train.jsonl", text.encode()),)))
    assert said in problem


def test_lines_are_counted_as_in_the_file_blank_ones_too() -> None:
    text = GOOD[0] + "\n\n\n" + json.dumps(USER_ONLY) + "\n"
    problem = refused(at_dataset(), Reply(text=text))
    assert "line 4: the last message must be the assistant's" in problem


def test_a_json_array_names_its_items() -> None:
    text = json.dumps([CAPITAL_ROWS[0], USER_ONLY])
    assert "item 2: the last message" in refused(at_dataset(), Reply(text=text))


def test_many_wrong_rows_are_listed_up_to_a_limit() -> None:
    text = "\n".join([*GOOD, *[json.dumps(USER_ONLY)] * 30])
    problem = refused(at_dataset(), Reply(text=text))
    assert problem.startswith("30 of the 33 rows cannot be used")
    assert problem.count("• line ") == MAX_PROBLEMS_SHOWN
    assert f"(and {30 - MAX_PROBLEMS_SHOWN} more)" in problem


def test_a_file_that_is_not_utf8_is_refused_naming_the_line() -> None:
    content = (GOOD[0] + "\n" + GOOD[1] + "\n").encode() + '{"messages": "caf\xe9"}\n'.encode(
        "latin-1"
    )
    problem = refused(at_dataset(), Reply(attachments=(Attachment("train.jsonl", content),)))
    assert "not UTF-8 text: line 3" in problem


def test_data_too_big_for_the_script_points_to_the_runner_host() -> None:
    row = json.dumps(CAPITAL_ROWS[0])
    count = MAX_DATASET_CHARS // len(row) + 10
    content = "\n".join([row] * count).encode()
    assert MAX_DATASET_CHARS < len(content) < MAX_ATTACHMENT_BYTES
    problem = refused(at_dataset(), Reply(attachments=(Attachment("train.jsonl", content),)))
    assert f"at most {MAX_DATASET_CHARS:,}" in problem and "runner host" in problem


def test_a_file_over_the_upload_limit_is_refused_before_it_is_decoded() -> None:
    content = b"x" * (MAX_ATTACHMENT_BYTES + 1)
    problem = refused(at_dataset(), Reply(attachments=(Attachment("train.jsonl", content),)))
    assert f"the limit is {MAX_ATTACHMENT_BYTES:,}" in problem and "runner host" in problem


def long_row(characters: int, *, last: str = "assistant") -> str:
    filler = "The quick brown fox jumps over the lazy dog. " * (characters // 45 + 1)
    row = {
        "messages": [
            {"role": "user", "content": "Summarize this report:\n" + filler[:characters]},
            {"role": last, "content": "A fox jumps over a dog, many times."},
        ]
    }
    return json.dumps(row)


def test_a_row_of_100k_characters_is_taken_with_a_warning_that_it_may_be_too_long() -> None:
    chat = at_dataset()
    chat.say(with_line(long_row(100_000)))
    assert chat.problem() is None and chat.asking() == "val_split"
    summary = "\n".join(chat.notices())
    assert "Row 2: up to about 25," in summary and "tokens (estimated)" in summary
    assert f"{MAX_SEQ_TOKENS:,} tokens ART's LocalBackend trains on" in summary
    assert len(summary) < 3_000  # the row is never echoed


def test_a_wrong_row_of_100k_characters_is_named_not_echoed() -> None:
    problem = refused(at_dataset(), Reply(text=with_line(long_row(100_000, last="user"))))
    assert "line 2: the last message must be the assistant's" in problem
    assert len(problem) < 1_000


def test_duplicates_few_rows_and_undeclared_tools_are_warned_about_not_refused() -> None:
    calls_other = weather_row("Hobart", "15°C")
    calls_other["messages"][2]["tool_calls"][0]["function"]["name"] = "get_forecast"
    rows = [CAPITAL_ROWS[0], CAPITAL_ROWS[1], CAPITAL_ROWS[0], calls_other, CAPITAL_ROWS[1]]
    text = summary_text(rows)
    assert "Row 3 repeats row 1 (1 more duplicates: rows 5)" in text
    assert "Row 4 calls `get_forecast`, which its `tools` do not declare" in text
    assert "Only 5 rows" in text
    assert "1 row (20%) with tool calls" in text


def test_the_summary_counts_turns_tool_calls_and_lengths() -> None:
    text = summary_text(ROWS)
    assert "3 to 5 messages a row (median 3)" in text
    assert "3 rows (20%) with tool calls" in text
    assert "Length: median " in text and "90th percentile" in text and "longest" in text


def test_the_skill_and_the_wizard_refuse_the_same_lines(tmp_path: Path) -> None:
    """ART's own row checker (the python block of its SKILL.md), run on the same file, flags
    the lines we flag, for every rule the skill has; the rows only we refuse are the rules we
    add (`input` rows ART 0.5.18 cannot train on, content types, tool schemas and calls)."""
    ours_only = {
        "input-row",
        "content-type",
        "tool-name",
        "tool-shape",
        "tool-parameters",
        "tool-arguments",
        "user-tool-call",
        "nan",
    }
    for param in BAD_ROWS:
        line, _ = param.values
        path = tmp_path / f"{param.id}.jsonl"
        path.write_text(with_line(str(line)) + "\n", encoding="utf-8")
        skill = subprocess.run(
            [sys.executable, "-c", skill_snippet("ROLES = "), str(path)],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        flagged_by_skill = "Line 2:" in skill.stdout
        try:
            dataset_rows(path.read_text(encoding="utf-8"), {})
            flagged_by_us = False
        except ValueError as error:
            flagged_by_us = "line 2:" in str(error)
        assert flagged_by_us, param.id
        assert flagged_by_skill == (param.id not in ours_only), (param.id, skill.stdout)


def test_the_rows_of_arts_sft_docs_are_valid() -> None:
    assert [row_problems(row) for row in ROWS] == [[]] * len(ROWS)
    assert dataset_rows(ROWS_JSONL, {}) == ROWS
