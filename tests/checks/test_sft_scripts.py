"""The train-sft scripts: every variant renders and passes `artbot check` against the real
`art`; the script checks a file on the runner host with the wizard's own rules when it starts,
splits as the wizard counted, and asks a stand-in teacher on loopback only once per prompt."""

from __future__ import annotations

import ast
import asyncio
import json
import os
from pathlib import Path
from types import ModuleType

import pytest

from checks.dryrun.standins.policy_server import PolicyServer
from checks.script_check import check_scripts
from checks.script_format import formatted_script
from flows import TRAIN_SFT, replay
from flows.wizards.sft.dataset import split_counts
from flows.wizards.sft.rows import SCRIPT_DEFINITIONS
from flows.wizards.sft.train_sft import hyperparameters
from tests.flows.sft_data import CAPITAL_ROWS, INTRODUCTIONS, ROWS
from tests.flows.sft_matrix import VARIANTS
from tests.flows.test_final_answer import load_script

GOLDEN = Path(__file__).resolve().parent.parent / "golden"
SFT_ROWS = Path(__file__).resolve().parents[2] / "flows" / "wizards" / "sft" / "rows.py"


def script_of(name: str) -> str:
    answers = replay(TRAIN_SFT, VARIANTS[name]).answers
    return formatted_script(TRAIN_SFT.active_answers(answers), flow=TRAIN_SFT)


def test_every_variant_passes_the_checks_against_the_real_art(tmp_path: Path) -> None:
    paths = []
    for name in sorted(VARIANTS):
        path = tmp_path / f"{name}.py"
        path.write_text(script_of(name))
        paths.append(path)
    reports = check_scripts(paths)
    assert [report.format() for report in reports if not report.ok] == []
    assert all(not report.notes for report in reports)


@pytest.mark.parametrize("name", ["file-local-paste", "distill-serverless-paste-val"])
def test_representative_sft_scripts_match_their_golden_files(name: str) -> None:
    script = script_of(name)
    golden = GOLDEN / f"sft_{name.replace('-', '_')}.py"
    if os.environ.get("ARTBOT_UPDATE_GOLDEN") == "1":
        golden.write_text(script)
    assert golden.exists(), f"run with ARTBOT_UPDATE_GOLDEN=1 to create {golden}"
    assert script == golden.read_text(), (
        f"{golden.name} changed: review, then ARTBOT_UPDATE_GOLDEN=1"
    )


def definitions(source: str) -> dict[str, str]:
    return {
        name: ast.dump(node)
        for node in ast.parse(source).body
        for name in (
            [node.name]
            if isinstance(node, ast.FunctionDef)
            else [t.id for t in node.targets if isinstance(t, ast.Name)]
            if isinstance(node, ast.Assign)
            else []
        )
        if name in SCRIPT_DEFINITIONS
    }


@pytest.mark.parametrize("name", sorted(VARIANTS))
def test_the_script_checks_rows_with_the_wizards_own_rules(name: str) -> None:
    ours = definitions(SFT_ROWS.read_text(encoding="utf-8"))
    assert definitions(script_of(name)) == ours
    assert sorted(ours) == sorted(SCRIPT_DEFINITIONS)


@pytest.mark.parametrize("name", sorted(VARIANTS))
def test_the_flags_default_to_the_answers(name: str, tmp_path: Path) -> None:
    source = script_of(name)
    module = ast.parse(source)
    constants = {
        t.id: ast.literal_eval(node.value)
        for node in module.body
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Constant)
        for t in node.targets
        if isinstance(t, ast.Name)
    }
    answers = replay(TRAIN_SFT, VARIANTS[name]).answers
    hp = hyperparameters(answers)
    assert constants["EPOCHS"] == hp["epochs"]
    assert constants["WARMUP_RATIO"] == hp["warmup_ratio"]
    assert constants["BATCH_SIZE"] == hp["batch_size"]
    assert constants["PEAK_LR"] == hp["learning_rate"]
    assert constants["SCHEDULE"] == hp["schedule"]
    assert constants["RUN_NAME"] == answers["run_name"]
    if answers["scenario"] == "distillation":
        assert constants["TEACHER_KEY_ENV"] == answers["teacher_key_env"]
        assert answers["teacher_key_env"].endswith("_API_KEY")


def serverless_script(name: str, tmp_path: Path) -> ModuleType:
    # ServerlessBackend: a LocalBackend script imports torch, which tests do not install.
    assert VARIANTS[name]["backend"] == "serverless"
    return load_script(script_of(name), tmp_path, name.replace("-", "_"))


def test_a_file_on_the_runner_host_is_checked_when_the_script_starts(tmp_path: Path) -> None:
    script = serverless_script("file-serverless-runner", tmp_path)
    data = tmp_path / "train.jsonl"
    lines = [json.dumps(row, ensure_ascii=False).encode() for row in CAPITAL_ROWS[:3]]
    lines.insert(1, b'{"messages": [{"role": "user", "content": "Hi"}]}')
    lines.insert(3, '{"messages": "caf\xe9"}'.encode("latin-1"))
    data.write_bytes(b"\n".join(lines) + b"\n")
    args = script.parse_args(["--dataset", str(data), "--data-dir", str(tmp_path / "out")])
    with pytest.raises(SystemExit) as stopped:
        script.prepare_data(args)
    said = str(stopped.value.code)
    assert said.startswith(f"2 of the 5 rows of {data} cannot be trained on")
    assert "line 2: the last message must be the assistant's" in said
    assert "line 4: not UTF-8 text (byte 18 of the line)" in said


def test_a_good_file_becomes_ascii_jsonl_for_art_and_long_rows_are_warned_about(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    script = serverless_script("file-serverless-runner", tmp_path)
    long_row = {
        "messages": [
            {"role": "user", "content": "Summarize: " + "Zürich is a city. " * 6_000},
            {"role": "assistant", "content": "A city."},
        ]
    }
    data = tmp_path / "train.jsonl"
    data.write_text(
        "\n".join(json.dumps(r, ensure_ascii=False) for r in [*ROWS, long_row]) + "\n\n",
        encoding="utf-8",
    )
    args = script.parse_args(["--dataset", str(data), "--data-dir", str(tmp_path / "out")])
    prepared = script.prepare_data(args)
    assert prepared.train_rows == len(ROWS) + 1
    written = prepared.train_file.read_bytes()
    assert written.isascii()
    assert [json.loads(line) for line in written.splitlines()] == [*ROWS, long_row]
    assert f"line(s) {len(ROWS) + 1} may be longer than" in capsys.readouterr().err


def test_the_script_holds_out_the_rows_the_wizard_counted(tmp_path: Path) -> None:
    script = serverless_script("file-serverless-upload-val", tmp_path)
    args = script.parse_args(["--data-dir", str(tmp_path / "out"), "--val-samples", "100"])
    prepared = script.prepare_data(args)
    train, held = split_counts(ROWS, VARIANTS["file-serverless-upload-val"]["val_fraction"])
    assert (prepared.train_rows, len(prepared.val_rows)) == (train, held)
    plan = script.plan_for(prepared.train_rows, prepared.digest, args)
    hp = hyperparameters(replay(TRAIN_SFT, VARIANTS["file-serverless-upload-val"]).answers)
    assert (plan.epochs, plan.warmup_ratio) == (hp["epochs"], hp["warmup_ratio"])


def test_distillation_asks_a_teacher_on_loopback_once_per_prompt(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    script = serverless_script("distill-serverless-paste-val", tmp_path)
    monkeypatch.setenv("OPENROUTER_API_KEY", "stand-in")
    with PolicyServer(seed=1) as teacher:
        argv = ["--teacher-base-url", teacher.base_url, "--data-dir", str(tmp_path / "out")]
        args = script.parse_args([*argv, "--val-samples", "100"])
        data = asyncio.run(script.distill(args))
        asked = teacher.stats.requests
        again = asyncio.run(script.distill(args))
        assert teacher.stats.requests == asked == len(INTRODUCTIONS)
    assert teacher.stats.models_asked == {"z-ai/glm-5": len(INTRODUCTIONS)}
    assert len(data.train_rows) + len(data.val_rows) == len(INTRODUCTIONS)
    assert again == data
    prompts = replay(TRAIN_SFT, VARIANTS["distill-serverless-paste-val"]).answers["prompts"]
    assert len(data.val_rows) == split_counts(prompts, 0.25)[1]
    first = data.train_rows[0]["messages"]
    assert first[-1]["role"] == "assistant" and first[-1]["content"]
