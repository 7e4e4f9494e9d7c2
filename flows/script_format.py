"""The rendered script in ruff's format: what `ruff format rl_train.py` gives, with its defaults.

Templates and the literals printed from answers need not match the formatter column by column;
this one pass makes every script read the same, however the answers shaped it.
"""

from __future__ import annotations

import subprocess

from ruff import find_ruff_bin

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
