"""benchmarks/assistant_eval.py runs against the scripted fake (as in CI): every case reaches the
assistant through the real client and, with the expected replies, scores all right. Its timings
are printed, never asserted."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent.parent


def test_the_eval_runs_against_the_fake_and_scores_the_expected_replies_right() -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("ARTBOT_LLM_")}
    result = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "assistant_eval.py"), "--fake"],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
        check=False,
    )

    assert result.returncode == 0, result.stdout + result.stderr
    out = result.stdout
    assert "understanding (proposal == expected)   11/11 (100%)" in out
    assert "questions answered, session unmoved    3/3 (100%)" in out
    assert "drafts passing checks, first try       5/5 (100%)" in out
    assert "recommendations right (step, value)    5/5 (100%)" in out
    assert "wrong:" not in out and "refused" not in out
