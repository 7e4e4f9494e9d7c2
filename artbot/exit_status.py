"""The exit statuses that artbot's commands return, so that scripts and CI can tell them apart."""

EXIT_OK = 0
EXIT_PROBLEMS = 1
"""The command ran, and found or met problems (a failed check, a database that refused)."""
EXIT_USAGE = 2
"""The command was asked wrongly (argparse's status too): a bad option, a missing file."""
EXIT_UNFINISHED = 3
"""`artbot chat`: input ended before the wizard did; the session is saved."""
EXIT_INCONCLUSIVE = 4
"""`artbot dryrun`: the run proves nothing, through no fault found in the script (the stand-in
player could not play the game). Defined again in checks.dryrun.command, which imports no artbot."""
EXIT_INTERRUPTED = 130  # the shell's convention for a program stopped by Ctrl-C
