"""`artbot chat --flow train-sft` as a person would use it (a real process, replies piped), and
`artbot render` of a train-sft answers file."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from artbot.cli import main
from checks.script_format import formatted_script
from flows import MAX_ATTACHMENT_BYTES, TRAIN_SFT
from tests.artbot.terminal.test_chat import chat, environment, home, stored_step
from tests.flows.sft_data import INTRODUCTIONS, ROWS, ROWS_JSONL
from tests.flows.sft_matrix import VARIANTS

__all__ = ["home"]  # the fixture, used by name

FROM_A_PASTED_FILE = [
    "Train from a JSONL file",
    "LocalBackend",
    "paste",
    *ROWS_JSONL.splitlines(),  # JSONL rows piped one after another make one answer
    "held_out",
    "default",  # a tenth held out
    "1",  # base model
    "default",  # project: sft-project
    "weather-capitals-001",
    "defaults",
]
DISTILLATION_FROM_A_FILE = [
    "distillation",
    "serverless",
    "z-ai/glm-5",
    "default",  # OpenRouter
    "default",  # OPENROUTER_API_KEY
    "upload",
]


def test_a_pasted_dataset_becomes_a_checked_sft_script(home: Path) -> None:
    result = chat(home, FROM_A_PASTED_FILE, "--flow", "train-sft")

    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.startswith("artbot: the train-sft wizard.")
    script = home / "work" / "weather-capitals-001.py"
    assert f"{script}: ok (compile, ruff, pyright)" in result.stdout
    assert f"  = {len(ROWS)} examples" in result.stdout
    assert "3 rows (20%) with tool calls" in result.stdout
    assert "from_file" in script.read_text() and "SFT training script" in script.read_text()


def test_distillation_prompts_come_from_a_file_and_the_session_resumes_in_its_flow(
    home: Path,
) -> None:
    prompts = home / "prompts.txt"
    prompts.write_text("\n".join(INTRODUCTIONS) + "\n")
    started = chat(home, [*DISTILLATION_FROM_A_FILE, f"/file {prompts}"], "--flow", "train-sft")
    assert started.returncode == 3, started.stdout + started.stderr  # unfinished, saved
    assert f"  = {len(INTRODUCTIONS)} prompts" in started.stdout
    assert stored_step(home) == "val_split"

    # No --flow: the saved session goes on in its own wizard.
    resumed = chat(home, ["none", "2", "sft-distillation", "extractor-001", "defaults"])
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    assert resumed.stdout.startswith("artbot: the train-sft wizard.")
    assert "ok (compile, ruff, pyright)" in resumed.stdout


def test_a_200_mb_file_is_refused_unread_and_the_session_stays_at_its_question(
    home: Path,
) -> None:
    big = home / "huge.jsonl"
    with big.open("wb") as file:
        file.truncate(200 * 1024 * 1024)  # sparse: nothing is written, nothing needs reading
    steps = ["file", "local", "upload", f"/file {big}"]
    result = chat(home, steps, "--flow", "train-sft")

    assert result.returncode == 3, result.stdout + result.stderr
    assert f"{big} is 209,715,200 bytes; files can be at most {MAX_ATTACHMENT_BYTES:,}" in (
        result.stdout + result.stderr
    )
    assert "runner host" in result.stdout + result.stderr
    assert stored_step(home) == "dataset"


def test_a_session_of_another_wizard_is_never_taken_over(home: Path) -> None:
    chat(home, ["static"])  # a train-rl session, saved at its second question
    refused = chat(home, ["file"], "--flow", "train-sft")
    assert refused.returncode == 2
    assert "session “default” is a train-rl session: `--session NAME` starts a train-sft" in (
        refused.stderr
    )
    beside = chat(home, ["file"], "--flow", "train-sft", "--session", "sft")
    assert beside.returncode == 3 and stored_step(home, "sft") == "backend"
    assert stored_step(home) == "turns"  # the train-rl one is untouched


@pytest.mark.slow
def test_the_finished_script_is_also_dry_run(home: Path) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "artbot.cli", "chat", "--flow", "train-sft"],
        input="".join(f"{reply}\n" for reply in FROM_A_PASTED_FILE),
        cwd=home / "work",
        env=environment(home),
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "weather-capitals-001.py: dry run ok" in result.stdout
    assert "SFT: 8 examples in 3 train_sft call(s)" in result.stdout


# ---- artbot render ---------------------------------------------------------------------------


def test_render_finds_the_flow_of_an_sft_answers_file(tmp_path: Path) -> None:
    answers = tmp_path / "answers.json"
    answers.write_text(json.dumps(VARIANTS["distill-local-generator"]))
    out = tmp_path / "multiplier.py"

    assert main(["render", "--answers", str(answers), "--out", str(out)]) == 0

    expected = formatted_script(
        TRAIN_SFT.active_answers(VARIANTS["distill-local-generator"]), out.name, TRAIN_SFT
    )
    assert out.read_text() == expected


def test_render_says_which_answer_an_sft_flow_refuses(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    answers = tmp_path / "answers.json"
    bad = {**VARIANTS["file-local-paste"], "dataset": [{"messages": [{"role": "user"}]}]}
    answers.write_text(json.dumps(bad))

    status = main(["render", "--flow", "train-sft", "--answers", str(answers)])

    assert status == 1
    assert "dataset: 1 of the 1 row cannot be used" in capsys.readouterr().err
