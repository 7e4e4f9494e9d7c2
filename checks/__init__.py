"""Proof that a generated script runs before GPU time is spent on it: `script_check` (compile, ruff,
basedpyright against the real `art`) and `dryrun` (the script end to end on a CPU, with a
stand-in policy and trainer)."""
