"""`artbot render --answers answers.json`: the same validation as a chat, then the script."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import pytest

from artbot.cli import SUBCOMMANDS, main
from checks.script_format import formatted_script
from tests.flows.matrix import answers_for

ANSWERS = answers_for("tools", "custom", "open_ended", "local", True)


@pytest.fixture
def workdir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    return tmp_path


def write_answers(folder: Path, answers: Any, name: str = "answers.json") -> Path:
    path = folder / name
    path.write_text(json.dumps(answers))
    return path


def test_valid_answers_render_the_script_where_asked(
    workdir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    write_answers(workdir, ANSWERS)

    status = main(["render", "--answers", "answers.json", "--out", "rl_train.py"])

    assert status == 0
    assert capsys.readouterr().out == "wrote rl_train.py\n"
    script = (workdir / "rl_train.py").read_text()
    assert script == formatted_script(ANSWERS, "rl_train.py")
    assert "Run it with `uv run rl_train.py`." in script


def test_the_script_is_named_after_the_run_by_default(workdir: Path) -> None:
    write_answers(workdir, ANSWERS)

    assert main(["render", "--answers", "answers.json"]) == 0

    script = workdir / f"{ANSWERS['run_name']}.py"
    assert f"Run it with `uv run {script.name}`." in script.read_text()


def test_check_runs_the_script_checks(workdir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    write_answers(workdir, ANSWERS)

    status = main(["render", "--answers", "answers.json", "--out", "rl_train.py", "--check"])

    assert status == 0
    assert "rl_train.py: ok (compile, ruff, pyright)" in capsys.readouterr().out


def test_answers_can_come_on_stdin(workdir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("sys.stdin", io.StringIO(json.dumps(ANSWERS)))
    assert main(["render", "--answers", "-", "--out", "rl_train.py"]) == 0
    assert (workdir / "rl_train.py").is_file()


@pytest.mark.parametrize(
    ("change", "error"),
    [
        (
            {"run_name": "no spaces please"},
            "answers.json: run_name: “no spaces please” is not a safe name",
        ),
        ({"reward_mix": 2}, "answers.json: reward_mix: 2 is out of range: it must be in [0, 1]."),
        (
            {"tool_execution": "carrier pigeon"},
            "answers.json: tool_execution: 'carrier pigeon' is not one of local, http",
        ),
        ({"epochs": 3}, "answers.json: epochs: not a question of the train-rl flow"),
        (
            {"run_name": None},
            "answers.json: run_name: no answer (the question: What is this run called?",
        ),
    ],
    ids=["bad text", "out of range", "bad option", "unknown key", "missing"],
)
def test_invalid_answers_name_the_file_and_the_step(
    workdir: Path, capsys: pytest.CaptureFixture[str], change: dict[str, Any], error: str
) -> None:
    answers = {k: v for k, v in {**ANSWERS, **change}.items() if v is not None}
    write_answers(workdir, answers)

    status = main(["render", "--answers", "answers.json", "--out", "rl_train.py"])

    assert status == 1
    assert capsys.readouterr().err.startswith(error)
    assert not (workdir / "rl_train.py").exists()


@pytest.mark.parametrize(
    ("content", "error"),
    [
        (
            "{not json",
            "answers.json: not valid JSON: Expecting property name enclosed in double quotes "
            "(line 1, column 2)",
        ),
        ("[1, 2]", "answers.json: expected a JSON object of answers by question id"),
    ],
)
def test_a_file_that_is_not_an_answers_object_is_invalid(
    workdir: Path, capsys: pytest.CaptureFixture[str], content: str, error: str
) -> None:
    (workdir / "answers.json").write_text(content)
    assert main(["render", "--answers", "answers.json"]) == 1
    assert capsys.readouterr().err.strip() == error


def test_a_missing_answers_file_is_a_usage_error(
    workdir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["render", "--answers", "nowhere.json"]) == 2
    assert "cannot read nowhere.json" in capsys.readouterr().err


def test_a_file_artbot_did_not_write_is_only_replaced_with_force(
    workdir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    write_answers(workdir, ANSWERS)
    mine = workdir / "rl_train.py"
    mine.write_text("# my own training script\n")

    refused = main(["render", "--answers", "answers.json", "--out", "rl_train.py"])

    assert refused == 2
    assert "rl_train.py exists and was not written by artbot" in capsys.readouterr().err
    assert mine.read_text() == "# my own training script\n"
    assert main(["render", "--answers", "answers.json", "--out", "rl_train.py", "--force"]) == 0
    assert mine.read_text() == formatted_script(ANSWERS, "rl_train.py")


def test_rendering_again_after_a_change_keeps_the_previous_script(
    workdir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    write_answers(workdir, ANSWERS)
    assert main(["render", "--answers", "answers.json", "--out", "rl_train.py"]) == 0
    first = (workdir / "rl_train.py").read_text()
    write_answers(workdir, {**ANSWERS, "max_turns": 7})

    assert main(["render", "--answers", "answers.json", "--out", "rl_train.py"]) == 0

    assert "kept as rl_train.py.bak" in capsys.readouterr().out
    assert (workdir / "rl_train.py.bak").read_text() == first
    assert "MAX_TURNS = 7\n" in (workdir / "rl_train.py").read_text()


def test_chat_render_and_dryrun_are_registered_next_to_check() -> None:
    assert {"check", "chat", "dryrun", "render"} <= {command.name for command in SUBCOMMANDS}
