"""The generated script as users get it, and proof that it runs before GPU time is spent on it:
`script_format` (the rendered script in ruff's format), `script_check` (compile, ruff,
basedpyright against the real `art`) and `dryrun` (the script end to end on a CPU, with a
stand-in policy and trainer)."""
