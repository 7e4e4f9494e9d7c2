"""`python -m checks.dryrun SCRIPT [ARGS...]`, the same as `artbot dryrun`."""

import argparse
import sys

from checks.dryrun.command import add_dryrun_arguments, run_dryrun_command

if __name__ == "__main__":
    parser = argparse.ArgumentParser(prog="artbot dryrun")
    add_dryrun_arguments(parser)
    sys.exit(run_dryrun_command(parser.parse_args()))
