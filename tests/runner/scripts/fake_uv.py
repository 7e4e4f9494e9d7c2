#!/usr/bin/env python3
"""Stands in for `uv run --script`: fails to resolve the script's dependencies, as uv prints it."""

import sys

print("Reading inline script metadata from `rl_train.py`", file=sys.stderr)
print(
    """  \u00d7 No solution found when resolving script dependencies:
  \u2570\u2500\u25b6 Because there is no version of openpipe-art[backend]==0.5.99 and you require
      openpipe-art[backend]==0.5.99, we can conclude that your requirements are unsatisfiable.""",
    file=sys.stderr,
)
sys.exit(1)
