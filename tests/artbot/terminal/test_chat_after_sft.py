"""`artbot chat --after-sft` / `--after-sft-session`: RL that continues a finished fine-tuning
run, in a new train-rl session whose script forks the SFT model (a real process, replies piped;
the refusals in process, where they cost nothing)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from artbot.cli import main
from bot.migrations import BOT_DATABASE
from flows import TRAIN_SFT, replay
from storage import migrations
from storage.sessions import SessionKey, SessionStore
from tests.artbot.terminal.test_chat import UP_TO_SCENARIOS, USER, chat, environment, home
from tests.flows.matrix import MATH_ROWS, answers_for
from tests.flows.sft_matrix import VARIANTS

__all__ = ["home"]  # the fixture, used by name

SFT = VARIANTS["file-local-paste"]  # capitals-001 of sft-project, on LocalBackend
# A single-turn RULER run: no base model and no backend asked (the SFT run's).
RL_REPLIES = [
    *UP_TO_SCENARIOS,
    "inline",
    *(json.dumps(row) for row in MATH_ROWS[:3]),
    "skip",  # system prompt
    "default",  # what the agent sees
    "ruler",
    "1",  # judge model
    "default",  # RULER's rubric
    "all",
    "none",  # validation
    "default",  # project: rl-project
    "math-rl-001",
    "defaults",
    "dataset",
]
FORK_SAID = (
    "This RL run starts from your SFT model `capitals-001` (project `sft-project`): its script "
    "forks that model's latest checkpoint with ART 0.5.18's experimental "
    "`_experimental_fork_checkpoint`"
)
ART_PATH_SAID = "run the script with the same --art-path as the SFT run"


def database(home: Path) -> str:
    return f"sqlite:///{home / 'data' / 'artbot' / 'artbot.db'}"


def stored(home: Path, name: str) -> tuple[str, str] | None:
    """The flow and status of the saved session NAME."""
    store = SessionStore.open(database(home))
    try:
        found = store.get(SessionKey("terminal", USER, name))
        return (found.session.flow, found.session.status) if found is not None else None
    finally:
        store.close()


def finish_sft_session(home: Path, name: str = "default") -> None:
    """A finished train-sft session NAME of the test's user, as `artbot chat --flow train-sft`
    leaves it."""
    (home / "data" / "artbot").mkdir(parents=True, exist_ok=True)
    migrations.upgrade(BOT_DATABASE, database(home))
    store = SessionStore.open(database(home))
    try:
        store.create(SessionKey("terminal", USER, name), USER, replay(TRAIN_SFT, SFT))
    finally:
        store.close()


def test_the_last_finished_sft_session_starts_a_new_rl_session_that_forks_its_model(
    home: Path,
) -> None:
    finish_sft_session(home)

    result = chat(home, RL_REPLIES, "--after-sft-session")

    assert result.returncode == 0, result.stdout + result.stderr
    said = result.stdout
    assert "Started the train-rl session “capitals-001-rl”: `artbot chat --session " in said
    assert FORK_SAID in said and ART_PATH_SAID in said
    assert "Which base model" not in said and "Which backend" not in said
    script = home / "work" / "math-rl-001.py"
    assert f"{script}: ok (compile, ruff, pyright)" in said
    assert "`uv run math-rl-001.py --art-path PATH`" in said
    assert "_experimental_fork_checkpoint(" in script.read_text()
    # A session of its own; the SFT session is kept as it was.
    assert stored(home, "capitals-001-rl") == ("train-rl", "complete")
    assert stored(home, "default") == ("train-sft", "complete")


def test_what_is_not_a_finished_sft_run_is_refused_and_no_session_is_replaced(
    home: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("LOGNAME", USER)  # whose sessions: the chat asks getpass
    monkeypatch.setenv("USER", USER)

    def refused(*args: str) -> str:
        assert main(["chat", "--no-dryrun", "--database-url", database(home), *args]) == 2
        return capsys.readouterr().err

    rl_file = home / "rl.json"
    rl_file.write_text(json.dumps(answers_for("single", "ruler", "dataset", "local", False)))
    unfinished = home / "unfinished.json"
    unfinished.write_text(json.dumps({k: v for k, v in SFT.items() if k != "run_name"}))
    sft_file = home / "sft.json"
    sft_file.write_text(json.dumps(SFT))

    assert "rl.json: these are a train-rl session's answers" in refused("--after-sft", str(rl_file))
    assert "unfinished.json: not a finished train-sft session's answers: run_name: no answer" in (
        refused("--after-sft", str(unfinished))
    )
    assert "you have no finished train-sft session" in refused("--after-sft-session")
    finish_sft_session(home, "sft")
    assert "session “sft” is the SFT session the RL one starts from" in refused(
        "--after-sft-session", "sft", "--session", "sft", "--new"
    )
    finish_sft_session(home, "capitals-001-rl")  # the name the RL session would take
    assert (
        "there is already a session “capitals-001-rl” (train-sft, finished): `--session NAME` "
        "starts the RL one beside it, `--new` discards it"
    ) in refused("--after-sft", str(sft_file))
    assert stored(home, "capitals-001-rl") == ("train-sft", "complete")


@pytest.mark.slow
def test_exported_sft_answers_continue_and_the_dry_run_forks_a_stand_in_sft_model(
    home: Path,
) -> None:
    finish_sft_session(home)
    exported = chat(home, [], "--export", "sft.json")
    assert exported.returncode == 0, exported.stderr

    result = subprocess.run(
        [sys.executable, "-m", "artbot.cli", "chat", "--after-sft", "sft.json"],
        input="".join(f"{reply}\n" for reply in RL_REPLIES),
        cwd=home / "work",
        env=environment(home),
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )

    assert result.returncode == 0, result.stdout + result.stderr
    said = result.stdout
    assert FORK_SAID in said
    # Not the user's SFT model, which the dry run never touches, and it says so.
    assert "Your SFT model `capitals-001` is not part of the dry run: it forks a stand-in" in said
    assert "math-rl-001.py: dry run ok" in said
    assert (
        "LocalBackend._experimental_fork_checkpoint copied checkpoint 3 of "
        "sft-project/capitals-001 into rl-project/math-rl-001."
    ) in said
