"""`artbot chat` with an assistant (ARTBOT_LLM_*): a real process, replies on stdin, the model a
scripted OpenAI-compatible server on loopback."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from bot.migrations import BOT_DATABASE
from storage import migrations
from storage.sessions import SessionKey, SessionStore
from tests.artbot.terminal.test_chat import ROWS_JSON, UP_TO_SCENARIOS, USER, environment
from tests.artbot.terminal.test_chat import chat as chat_without_a_model
from tests.assistant.test_recommendations import AGENT
from tests.fakes.openai_server import FakeOpenAI, Scripted
from tests.flows.matrix import MATH_ROWS

BIGGER_QWEN = "Qwen/Qwen3-30B-A3B-Instruct-2507"
ANSWER = "Llama-3.1-8B-Instruct is the smallest of the three: the first to try on a small GPU."


@pytest.fixture
def home(tmp_path: Path) -> Path:
    (tmp_path / "work").mkdir()
    return tmp_path


@pytest.fixture
def fake() -> Iterator[FakeOpenAI]:
    with FakeOpenAI() as server:
        yield server
        assert server.refused == []


def chat(home: Path, fake: FakeOpenAI, replies: list[str]) -> subprocess.CompletedProcess[str]:
    env = environment(home) | {
        "ARTBOT_LLM_MODEL": "gpt-test",
        "ARTBOT_LLM_BASE_URL": fake.base_url,
        "ARTBOT_LLM_API_KEY": fake.key,
    }
    return subprocess.run(
        [sys.executable, "-m", "artbot.cli", "chat", "--no-dryrun"],
        input="".join(f"{reply}\n" for reply in replies),
        cwd=home / "work",
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def stored_answers(home: Path) -> dict[str, object]:
    url = f"sqlite:///{home / 'data' / 'artbot' / 'artbot.db'}"
    assert migrations.current(BOT_DATABASE, url) is not None
    store = SessionStore.open(url)
    try:
        stored = store.get(SessionKey("terminal", USER, "default"))
        assert stored is not None
        return dict(stored.session.answers)
    finally:
        store.close()


NO_ADVICE = Scripted.json({"recommendations": []})
"""The reply to the recommendations asked for once the scenarios are given: none."""


def reading(value: str, reason: str) -> Scripted:
    return Scripted.json({"understood": True, "value": value, "reason": reason})


def test_questions_answered_free_text_confirmed_and_the_script_written(
    home: Path, fake: FakeOpenAI
) -> None:
    fake.script(
        NO_ADVICE,
        reading("held_out", "Keep some scenarios back for validation."),
        reading("0.2", "A fifth is 0.2."),
        Scripted.text(ANSWER),
        reading(BIGGER_QWEN, "The bigger Qwen."),
        reading(BIGGER_QWEN, "The bigger Qwen."),
    )
    replies = [
        *UP_TO_SCENARIOS,
        "inline",
        "```json",
        *ROWS_JSON.splitlines(),
        "```",
        "skip",
        "default",  # what the agent sees: `prompt`
        "ruler",
        "1",
        "default",  # RULER's rubric: ART's
        "all",
        "hold some back",
        "yes",
        "hold out a fifth",
        "yes",
        "default",
        "default",
        "which model fits a 24 GB GPU?",
        "the bigger Qwen",
        "no",
        "the bigger Qwen",
        "y",
        "default",
        "chat-assist-001",
        "serverless",
        "defaults",
        "dataset",
    ]

    result = chat(home, fake, replies)

    assert result.returncode == 0, result.stdout + result.stderr
    out = result.stdout
    assert "An assistant is on" in out
    assert ANSWER in out
    assert "I read that as: Hold out a fraction." in out
    assert "I read that as: 0.2." in out
    assert "Reply `yes` to use it, or `no` to answer again." in out
    assert "Not used." in out
    assert (
        out.count("Which base model should training start from?") >= 3
    )  # asked, asked again after the answer, after no
    script = home / "work" / "chat-assist-001.py"
    assert script.is_file()
    assert BIGGER_QWEN in script.read_text()
    assert fake.unused == 0 and len(fake.requests) == 6
    answers = stored_answers(home)
    assert answers["val_fraction"] == 0.2
    assert answers["base_model"] == BIGGER_QWEN


def test_a_proposal_is_not_stored_until_yes(home: Path, fake: FakeOpenAI) -> None:
    fake.script(reading("static", "The scenarios come from logs."))

    result = chat(home, fake, ["we only have logged chats"])

    assert result.returncode == 3
    assert "I read that as: Only logged or static scenarios." in result.stdout
    assert stored_answers(home) == {}


def test_a_bad_assistant_setting_stops_the_chat_before_it_starts(home: Path) -> None:
    env = environment(home) | {"ARTBOT_LLM_MODEL": "gpt-test", "ARTBOT_LLM_TIMEOUT_S": "-1"}
    env.pop("OPENAI_API_KEY", None)
    env.pop("ARTBOT_LLM_API_KEY", None)
    env["ARTBOT_LLM_BASE_URL"] = "http://127.0.0.1:9/v1"

    result = subprocess.run(
        [sys.executable, "-m", "artbot.cli", "chat"],
        input="",
        cwd=home / "work",
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )

    assert result.returncode == 2
    assert "artbot chat: Cannot start the assistant:" in result.stderr
    assert "ARTBOT_LLM_TIMEOUT_S" in result.stderr


TO_REWARD_LOGIC = [
    *UP_TO_SCENARIOS,
    "inline",
    json.dumps(MATH_ROWS[:3]),
    "skip",
    "default",
    "programmatic",
]
EXACT_REWARD = (
    "def compute_reward(scenario, answer):\n"
    "    return 1.0 if answer.strip() == scenario['answer'] else 0.0\n"
)
CRASHING = "def compute_reward(scenario, answer):\n    return 1.0 / 0\n"


def drafted(code: str) -> Scripted:
    return Scripted.json({"code": code, "summary": "Exact match with the expected answer."})


def test_a_draft_is_used_with_y(home: Path, fake: FakeOpenAI) -> None:
    fake.script(NO_ADVICE, drafted(EXACT_REWARD))

    result = chat(home, fake, [*TO_REWARD_LOGIC, "draft", "y"])

    out = result.stdout
    assert result.returncode == 3, result.stderr
    assert "A draft of the Reward code (2 lines):" in out
    assert "run on 3 scenarios in a sandbox" in out
    assert "Reply `y` to use it, `edit` to change it, or `again` for another draft." in out
    assert stored_answers(home)["reward_logic"] == {"kind": "function", "code": EXACT_REWARD}


def test_a_draft_drafted_again_then_edited_counts_as_the_edited_code(
    home: Path, fake: FakeOpenAI
) -> None:
    fake.script(NO_ADVICE, drafted(CRASHING), drafted(EXACT_REWARD), drafted(EXACT_REWARD))
    edited = EXACT_REWARD.replace("1.0 if", "2.0 if")

    result = chat(
        home,
        fake,
        [*TO_REWARD_LOGIC, "draft", "again", "edit", "```", *edited.splitlines(), "```"],
    )

    out = result.stdout
    assert result.returncode == 3, result.stderr
    assert "ZeroDivisionError" in fake.requests[2]["messages"][-1]["content"]
    assert out.count("A draft of the Reward code") == 2  # the crashing one was not shown
    assert "Here is the draft to edit" in out
    assert len(fake.requests) == 4  # advice, `draft` (crashing, retried), then `again`
    assert stored_answers(home)["reward_logic"] == {"kind": "function", "code": edited}


def test_a_draft_not_used_is_not_stored(home: Path, fake: FakeOpenAI) -> None:
    fake.script(NO_ADVICE, drafted(EXACT_REWARD))

    result = chat(home, fake, [*TO_REWARD_LOGIC, "draft", "no"])

    assert result.returncode == 3
    assert "Not used." in result.stdout
    assert "reward_logic" not in stored_answers(home)


def test_without_a_model_draft_says_the_assistant_is_not_configured(home: Path) -> None:
    result = chat_without_a_model(home, [*TO_REWARD_LOGIC, "draft"])

    assert result.returncode == 3
    assert "The assistant is not configured, so I cannot draft code" in result.stdout
    assert "reward_logic" not in stored_answers(home)


def test_a_recommendation_is_shown_in_the_terminal_and_picked_by_its_number(
    home: Path, fake: FakeOpenAI
) -> None:
    checkable = "The answers are exact numbers, which code can check."
    fake.script(
        Scripted.json(
            {
                "recommendations": [
                    {"step": "reward", "value": "programmatic", "reason": checkable},
                    {"step": "reward", "value": "best", "reason": "Not an option."},
                    {"step": "uses_tools", "value": "yes", "reason": "Single-turn: never asked."},
                ]
            }
        )
    )

    result = chat(home, fake, [*TO_REWARD_LOGIC[:-1], "1"])

    out = result.stdout
    assert result.returncode == 3, result.stderr
    assert "I will recommend answers for: Reward." in out
    assert f"The assistant recommends this: {checkable} Please confirm." in out
    assert "1. Programmatic (recommended)" in out
    assert stored_answers(home)["reward"] == "programmatic"


def test_an_agent_file_sent_with_slash_file_gives_recommendations(
    home: Path, fake: FakeOpenAI
) -> None:
    agent = home / "work" / "agent.py"
    agent.write_bytes(AGENT)
    replayable = "The tools only read a fixed docs snapshot, so episodes can be replayed."
    fake.script(
        Scripted.json(
            {"recommendations": [{"step": "replayable", "value": "yes", "reason": replayable}]}
        )
    )

    result = chat(home, fake, [f"/file {agent}", "1"])

    out = result.stdout
    assert result.returncode == 3, result.stderr
    assert "From your code, I will recommend answers for: Replayability." in out
    assert f"The assistant recommends this: {replayable} Please confirm." in out
    assert "1. Episodes can be recreated (recommended)" in out
    assert stored_answers(home) == {"replayable": "yes"}
