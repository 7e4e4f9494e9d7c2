"""The script users get: the rendered script in ruff's format, what `ruff format rl_train.py`
gives with its defaults.

Templates and the literals printed from answers need not match the formatter column by column;
this one pass makes every script read the same, however the answers shaped it. It runs ruff (a
subprocess), so it lives here, not in the pure wizard (`flows.render_script` renders the
templates; `formatted_script` is what the bot and the command line save and post).
"""

from __future__ import annotations

import subprocess
from collections.abc import Mapping
from typing import Any

from ruff import find_ruff_bin

from flows import TRAIN_RL, Flow, render_script

# The oldest Python the scripts declare (`requires-python = ">=3.11"`).
TARGET_VERSION = "py311"
FORMAT_TIMEOUT_S = 30.0


class ScriptFormatError(RuntimeError):
    """ruff could not format the script (the message has ruff's own words)."""


def ruff_formatted(source: str) -> str:
    """`source` formatted by ruff with its default settings (`--isolated`: no config file)."""
    try:
        done = subprocess.run(
            [
                find_ruff_bin(),
                "format",
                "--isolated",
                "--target-version",
                TARGET_VERSION,
                "--stdin-filename",
                "rl_train.py",
                "-",
            ],
            input=source,
            capture_output=True,
            text=True,
            encoding="utf-8",
            timeout=FORMAT_TIMEOUT_S,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as error:
        raise ScriptFormatError(f"cannot run ruff format: {error}") from error
    if done.returncode != 0:
        raise ScriptFormatError(f"ruff format failed: {done.stderr.strip()[:500]}")
    return done.stdout


def formatted_script(
    answers: Mapping[str, Any], script_file: str | None = None, flow: Flow = TRAIN_RL
) -> str:
    """The complete training script for these answers of `flow`, in ruff's format; `script_file`
    is the name it is saved under (default `<run_name>.py`), which its docstring tells to run."""
    script = render_script(answers, script_file, flow)
    try:
        return ruff_formatted(script)
    except ScriptFormatError:
        # Layout only: the unformatted script is the same program (a test keeps this rare).
        return script
