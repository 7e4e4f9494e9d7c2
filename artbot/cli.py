"""The `artbot` command line. Each subcommand is a `_cmd_xxx` function listed in SUBCOMMANDS."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from artbot.script_check import check_script

EXIT_OK = 0
EXIT_PROBLEMS = 1
EXIT_USAGE = 2


@dataclass(frozen=True)
class Subcommand:
    """One `artbot NAME ...` command: how to read its arguments and what to run."""

    name: str
    help: str
    add_arguments: Callable[[argparse.ArgumentParser], None]
    run: Callable[[argparse.Namespace], int]
    """Returns the exit status: EXIT_OK, EXIT_PROBLEMS or EXIT_USAGE."""


def _check_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("script", type=Path, help="the training script to check")


def _cmd_check(args: argparse.Namespace) -> int:
    script: Path = args.script
    if not script.is_file():
        print(f"artbot check: no such file: {script}", file=sys.stderr)
        return EXIT_USAGE
    try:
        report = check_script(script)
    except OSError as exc:
        print(f"artbot check: cannot read {script}: {exc}", file=sys.stderr)
        return EXIT_USAGE
    print(report.format())
    return EXIT_OK if report.ok else EXIT_PROBLEMS


# The one place subcommands are registered; add `chat`, `render`, `dryrun`, `serve` here.
SUBCOMMANDS: tuple[Subcommand, ...] = (
    Subcommand(
        "check",
        "verify a generated training script: compile, ruff, basedpyright against art",
        _check_arguments,
        _cmd_check,
    ),
)


def build_parser() -> argparse.ArgumentParser:
    """The argument parser for every registered subcommand."""
    parser = argparse.ArgumentParser(
        prog="artbot", description="The ART train-rl wizard, script generator and checks."
    )
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for command in SUBCOMMANDS:
        sub = commands.add_parser(command.name, help=command.help, description=command.help)
        command.add_arguments(sub)
        sub.set_defaults(run=command.run)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Run one `artbot` subcommand and return its exit status (2 for usage errors)."""
    try:
        args = build_parser().parse_args(argv)
    except SystemExit as exc:
        # argparse exits on --help and on usage errors; callers of main get a status instead.
        return exc.code if isinstance(exc.code, int) else EXIT_USAGE
    return args.run(args)


if __name__ == "__main__":
    raise SystemExit(main())
