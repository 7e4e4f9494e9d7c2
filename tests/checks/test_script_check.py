"""`artbot check`: compile, ruff and basedpyright against the installed openpipe-art, for real."""

from __future__ import annotations

import itertools
import subprocess
import sys
import time
from pathlib import Path

import pytest

from artbot.cli import main
from checks import script_check
from checks.script_check import (
    MAX_SCRIPT_BYTES,
    CheckReport,
    check_script,
    check_scripts,
    check_source,
    user_code_lines,
)
from checks.script_format import formatted_script
from tests.checks.test_generated_scripts import GENERATOR
from tests.flows.matrix import TOOL_CODE, answers_for
from tests.flows.realistic_agents import GAME_2048, GAME_2048_CALLS_UNDEFINED, game_2048

GOOD = Path(__file__).parent / "check_fixtures" / "good_script.py"
GOOD_SOURCE = GOOD.read_text()
TRAIN_CALL = "result = await backend.train(model, groups, learning_rate=1e-5)"


def line_of(source: str, needle: str) -> int:
    """The 1-based line of the only line in `source` that contains `needle`."""
    lines = [n for n, text in enumerate(source.splitlines(), 1) if needle in text]
    assert len(lines) == 1, f"{needle!r} is on lines {lines}"
    return lines[0]


def found(report: CheckReport) -> list[tuple[str, str, int]]:
    return [(p.tool, p.code, p.line) for p in report.problems]


def variant(old: str, new: str) -> str:
    assert old in GOOD_SOURCE
    return GOOD_SOURCE.replace(old, new)


def test_the_good_script_passes_compile_ruff_and_pyright() -> None:
    started = time.monotonic()
    report = check_script(GOOD)
    assert report.problems == ()
    assert report.ok
    assert report.format() == f"{GOOD}: ok (compile, ruff, pyright)"
    assert time.monotonic() - started < 20


def test_a_syntax_error_is_the_only_problem_reported() -> None:
    source = variant("for _ in range(await model.get_step(), 3):", "for _ in range(3)")
    line = line_of(source, "for _ in range(3)")

    report = check_source(source)

    assert [(p.tool, p.code, p.line) for p in report.problems] == [("compile", "syntax", line)]
    assert report.problems[0].column >= 1
    assert report.format().startswith(f"rl_train.py:{line}:")


def test_an_unused_import_is_reported_by_ruff() -> None:
    source = variant("import asyncio\n", "import asyncio\nimport json\n")

    report = check_source(source)

    assert found(report) == [("ruff", "F401", line_of(source, "import json"))]
    assert report.problems[0].column == 8
    assert "json" in report.problems[0].message
    assert report.errors == ()  # a matter of style: it fails the check, and stops no dry run


def test_style_is_a_note_in_the_users_code_and_never_an_error_but_an_undefined_name_is(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pasted, broken, ours = tmp_path / "pasted.py", tmp_path / "broken.py", tmp_path / "ours.py"
    pasted.write_text(formatted_script(game_2048()))
    broken.write_text(formatted_script(game_2048(environment=GAME_2048_CALLS_UNDEFINED)))
    # The same style in the script's own code, where no user code is (a hand-written script).
    register = "    await model.register(backend)\n"
    ours.write_text(variant(register, f"{register}    print(list(zip([1], [2])))\n"))

    pasted_report, broken_report, ours_report = check_scripts([pasted, broken, ours])

    # 2048 as pasted (`zip(*cells)`, `"""...""".split()`) passes; its style is said in notes.
    assert pasted_report.ok
    source = pasted.read_text()
    style = [
        ("ruff", "SIM905", line_of(source, 'MOVES = """')),
        ("ruff", "B905", line_of(source, "zip(*cells)")),
    ]
    assert [(p.tool, p.code, p.line) for p in pasted_report.notes] == style
    assert main(["check", str(pasted)]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[:2] == [
        f"{pasted}: ok (compile, ruff, pyright)",
        "2 notes on your own code (matters of style: never a failure):",
    ]
    assert out[2].startswith(f"{pasted}:{style[0][2]}:13: note: ruff SIM905: ")
    # Calling a function that does not exist is an error, in the user's code as anywhere.
    line = line_of(broken.read_text(), "spawn_bonus_tile(board)")
    assert found(broken_report) == [
        ("ruff", "F821", line),
        ("pyright", "reportUndefinedVariable", line),
    ]
    assert broken_report.errors == broken_report.problems
    assert len(broken_report.notes) == 2
    assert main(["check", str(broken)]) == 1
    # Style outside the user's code (in a generated script, artbot's bug) fails the check, but
    # is no error: it stops no dry run.
    assert found(ours_report) == [("ruff", "B905", line_of(ours.read_text(), "zip([1], [2])"))]
    assert ours_report.errors == ()
    assert ours_report.notes == ()


def text_lines(code: str) -> set[str]:
    return {line.strip() for line in code.split("\n") if line.strip()}


def test_the_users_code_is_found_under_its_markers_without_the_templates_lines() -> None:
    reward = (
        "def compute_reward(scenario, answer):\n    return float(answer == scenario['answer'])\n"
    )
    tools = answers_for("tools", "programmatic", "dataset", "local", False)
    tools["reward_logic"] = {"kind": "function", "code": reward}
    generator = answers_for("single", "ruler", "open_ended", "local", False)
    generator.update(
        scenario_source="generator", scenario_generator=GENERATOR, val_generated="none"
    )
    for key in ("scenario_rows", "train_split", "val_split"):
        del generator[key]
    for answers, code in [
        (game_2048(), [GAME_2048]),
        (tools, [TOOL_CODE, reward]),
        (generator, [GENERATOR]),
    ]:
        script = formatted_script(answers)
        lines = script.split("\n")
        found = sorted(user_code_lines(script))
        assert text_lines("\n".join(lines[n - 1] for n in found)) == text_lines("\n".join(code))
        # Each piece is one run of lines: the user's first to their last, nothing in between.
        pieces = 1 + sum(1 for a, b in itertools.pairwise(found) if b != a + 1)
        assert pieces == len(code)

    # A reward expression: the function's body less its docstring.
    expression = formatted_script(answers_for("single", "programmatic", "dataset", "local", False))
    returned = line_of(expression, "    return float(")
    assert line_of(expression, '"""Your reward expression."""') == returned - 1
    closed = returned + expression.split("\n")[returned:].index("    )") + 1
    assert user_code_lines(expression) == set(range(returned, closed + 1))

    assert user_code_lines(GOOD_SOURCE) == frozenset()


@pytest.mark.parametrize(
    ("old", "new", "expected"),
    [
        pytest.param(
            TRAIN_CALL,
            "result = await model.train(groups, config=art.TrainConfig(learning_rate=1e-5))",
            [("pyright", "reportAttributeAccessIssue", "model.train(")],
            id="TrainableModel.train is gone",
        ),
        pytest.param(
            TRAIN_CALL,
            "result = await backend.train(model, groups, lr=1e-5)",
            [("pyright", "reportCallIssue", "lr=1e-5")],
            id="wrong keyword to backend.train",
        ),
        pytest.param(
            'backend = LocalBackend(path="./.art")',
            'backend = art.LocalBackend(path="./.art")',
            [
                ("ruff", "F401", "from art.local import LocalBackend"),
                ("pyright", "reportAttributeAccessIssue", "art.LocalBackend("),
            ],
            id="art.LocalBackend is in __all__ but undefined",
        ),
        pytest.param(
            "await model.register(backend)",
            "model.register(backend)",
            [("pyright", "reportUnusedCoroutine", "model.register(backend)")],
            id="a coroutine never awaited",
        ),
        pytest.param(
            'metadata={"prompt": prompt},',
            'metadata={"prompt": prompt},\n        final_answer="x",',
            [("pyright", "reportCallIssue", "final_answer=")],
            id="Trajectory has no final_answer (pydantic drops it silently)",
        ),
    ],
)
def test_art_misuse_is_reported_on_its_line(
    old: str, new: str, expected: list[tuple[str, str, str]]
) -> None:
    source = variant(old, new)

    report = check_source(source)

    assert found(report) == [(tool, code, line_of(source, at)) for tool, code, at in expected]


def test_configuration_next_to_the_script_does_not_change_the_verdict(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text(
        '[tool.ruff.lint]\nselect = ["ALL"]\n\n[tool.basedpyright]\ntypeCheckingMode = "all"\n'
    )
    (tmp_path / "pyrightconfig.json").write_text('{"typeCheckingMode": "strict"}')
    script = tmp_path / "rl_train.py"
    script.write_text(GOOD_SOURCE)

    assert check_script(script).problems == ()


def test_a_module_beside_the_script_resolves_as_it_would_at_run_time(tmp_path: Path) -> None:
    (tmp_path / "rewards.py").write_text("def score(text: str) -> float:\n    return 1.0\n")
    script = tmp_path / "rl_train.py"
    script.write_text("from rewards import score\n\nreward: float = score('hi')\nprint(reward)\n")
    (tmp_path / "uses_missing.py").write_text(
        "from rewardz import score\n\nreward: float = score('hi')\nprint(reward)\n"
    )

    assert check_script(script).problems == ()
    assert found(check_script(tmp_path / "uses_missing.py")) == [
        ("pyright", "reportMissingImports", 1)
    ]


def test_an_oversized_file_is_refused_without_running_the_tools(tmp_path: Path) -> None:
    script = tmp_path / "rl_train.py"
    script.write_text("x = 1\n" * (MAX_SCRIPT_BYTES // 6 + 1))

    started = time.monotonic()
    report = check_script(script)

    assert found(report) == [("compile", "too-large", 1)]
    assert "refusing" in report.problems[0].message
    assert time.monotonic() - started < 1
    assert found(check_source("x = 1\n" * (MAX_SCRIPT_BYTES // 6 + 1))) == [
        ("compile", "too-large", 1)
    ]


def test_a_tool_that_runs_too_long_is_a_problem(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(script_check, "TOOL_TIMEOUT_S", 0.05)

    report = check_source(GOOD_SOURCE)

    assert ("pyright", "timeout", 1) in found(report)
    assert not report.ok


def test_tools_missing_from_the_environment_are_problems_not_a_pass() -> None:
    # The interpreter the venv was made from: same stdlib, none of the venv's tools.
    base_python = Path(sys.base_prefix) / "bin" / "python3"
    if sys.prefix == sys.base_prefix or not base_python.exists():
        pytest.skip("needs the tests to run in a virtual environment")
    program = (
        "import sys; sys.path.insert(0, sys.argv[1])\n"
        "from importlib.util import find_spec\n"
        "if find_spec('ruff') or find_spec('basedpyright'): raise SystemExit(3)\n"
        "from checks.script_check import check_source\n"
        "print(check_source('x = 1\\n').format())\n"
    )
    repo_root = Path(script_check.__file__).parent.parent
    run = subprocess.run(
        [str(base_python), "-I", "-c", program, str(repo_root)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    if run.returncode == 3:
        pytest.skip("the base interpreter has ruff or basedpyright of its own")

    assert run.returncode == 0, run.stderr
    assert run.stdout.splitlines() == [
        f"rl_train.py:1:1: ruff tool-missing: ruff is not installed in {sys.base_prefix}; "
        "the script was not checked by it",
        f"rl_train.py:1:1: pyright tool-missing: basedpyright is not installed in "
        f"{sys.base_prefix}; the script was not checked by it",
    ]


def test_check_source_wants_a_bare_file_name() -> None:
    with pytest.raises(ValueError, match="bare file name"):
        check_source("x = 1\n", filename="../rl_train.py")


def test_cli_exits_0_for_a_clean_script(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["check", str(GOOD)]) == 0
    assert capsys.readouterr().out == f"{GOOD}: ok (compile, ruff, pyright)\n"


def test_cli_exits_1_and_lists_problems(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    script = tmp_path / "rl_train.py"
    script.write_text(variant(TRAIN_CALL, "result = await backend.train(model, groups, lr=1e-5)"))

    assert main(["check", str(script)]) == 1

    (line,) = capsys.readouterr().out.splitlines()
    assert line.startswith(f"{script}:{line_of(script.read_text(), 'lr=1e-5')}:")
    assert 'pyright reportCallIssue: No parameter named "lr"' in line


@pytest.mark.parametrize(
    "argv",
    [["check", "no/such/rl_train.py"], ["check", "."], ["check"], [], ["frobnicate"]],
    ids=["missing file", "a directory", "no script", "no command", "unknown command"],
)
def test_cli_exits_2_on_usage_errors(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    assert main(argv) == 2
    assert capsys.readouterr().err
