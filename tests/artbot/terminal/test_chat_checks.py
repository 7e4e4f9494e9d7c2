"""How `artbot chat` ends, after the checks: style in the user's pasted code is a note and the
script is dry-run; an error in it skips the dry run and says why. A real process, the replies
piped on stdin, the real check and dry run."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.artbot.terminal.test_chat import environment
from tests.flows.conversation import Conversation
from tests.flows.realistic_agents import GAME_2048_CALLS_UNDEFINED, game_2048


@pytest.fixture
def home(tmp_path: Path) -> Path:
    (tmp_path / "work").mkdir()
    return tmp_path


def typed(value: Any) -> str:
    """An answer as a person types it: text as it is, code and data between ``` lines."""
    if isinstance(value, dict) and value.get("kind") in ("function", "expression"):
        value = value["code"]
    if not isinstance(value, str):
        value = json.dumps(value)
    return f"```\n{value.rstrip()}\n```" if "\n" in value or value.startswith(("[", "{")) else value


def replies_for(answers: dict[str, Any]) -> list[str]:
    """The lines that answer every question the wizard asks with `answers` (a question left
    out: `default`), checked against the engine first."""
    conversation = Conversation()
    lines: list[str] = []
    while (step := conversation.asking()) is not None:
        reply = typed(answers.get(step, "default"))
        conversation.say(reply)
        assert conversation.problem() is None, f"{step}: {conversation.problem()}"
        lines += reply.split("\n")
    assert conversation.completed() is not None
    return lines


def chat_to_the_end(home: Path, answers: dict[str, Any]) -> subprocess.CompletedProcess[str]:
    """`artbot chat` given `answers`, in a session of its own, with the dry run."""
    return subprocess.run(
        [sys.executable, "-m", "artbot.cli", "chat", "--session", answers["run_name"]],
        input="".join(f"{line}\n" for line in replies_for(answers)),
        cwd=home / "work",
        env=environment(home),
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )


@pytest.mark.slow
def test_style_in_pasted_code_never_skips_the_dry_run_but_an_undefined_name_does(
    home: Path,
) -> None:
    pasted = chat_to_the_end(home, game_2048())

    out = pasted.stdout
    assert pasted.returncode == 0, out + pasted.stderr
    script = home / "work" / "game-2048-001.py"
    assert f"{script}: ok (compile, ruff, pyright)\n" in out
    assert "2 notes on your own code (matters of style: never a failure):\n" in out
    assert "note: ruff SIM905: Consider using a list literal" in out
    assert "note: ruff B905: `zip()` without an explicit `strict=` parameter" in out
    assert f"{script}: dry run ok" in out

    broken = chat_to_the_end(
        home, game_2048(environment=GAME_2048_CALLS_UNDEFINED, run_name="game-2048-002")
    )

    out = broken.stdout
    assert broken.returncode == 1, out + broken.stderr
    assert "ruff F821: Undefined name `spawn_bonus_tile`" in out
    assert (
        "The checks found errors, not matters of style, so the dry run was skipped. Fix them in "
        f"the script, then run `artbot check {home / 'work' / 'game-2048-002.py'}`."
    ) in out
    assert "Dry run:" not in out and "dry run ok" not in out
