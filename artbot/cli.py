"""The `artbot` command line: every subcommand, its options, and what it runs (SUBCOMMANDS).

Options that several subcommands read (`--out`, `--database-url`) are declared once here.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from artbot.exit_status import EXIT_OK, EXIT_PROBLEMS, EXIT_USAGE
from artbot.script_files import ScriptExists, script_path, write_script
from artbot.terminal.chat import DEFAULT_SESSION_NAME, run_chat_command
from checks.dryrun.command import add_dryrun_arguments, run_dryrun_command
from checks.preflight.command import add_preflight_arguments, run_preflight_command
from checks.script_check import CheckReport, check_script
from checks.script_format import formatted_script
from flows import FLOWS, TRAIN_RL, AnswersError, Flow, RenderError, replay

DATABASE_URL_ENV = "ARTBOT_DATABASE_URL"


@dataclass(frozen=True)
class Subcommand:
    """One `artbot NAME ...` command: how to read its arguments and what to run."""

    name: str
    help: str
    add_arguments: Callable[[argparse.ArgumentParser], None]
    run: Callable[[argparse.Namespace], int]
    """Returns the exit status: EXIT_OK, EXIT_PROBLEMS or EXIT_USAGE."""


# ---- options more than one subcommand reads ----------------------------------------------


def _add_out_argument(parser: argparse.ArgumentParser) -> None:
    """`--out`, as `chat` and `render` both read it (resolved by `script_path`)."""
    parser.add_argument(
        "--out",
        type=Path,
        metavar="PATH",
        help="where to write the script (a file, or a folder for RUN_NAME.py) [./RUN_NAME.py]",
    )


def _add_database_url_argument(parser: argparse.ArgumentParser, what: str) -> None:
    """`--database-url`, defaulting to $ARTBOT_DATABASE_URL; `what` begins its help."""
    parser.add_argument(
        "--database-url",
        default=os.environ.get(DATABASE_URL_ENV),
        metavar="URL",
        help=(
            f"{what} (also ${DATABASE_URL_ENV}): sqlite:///PATH or "
            "postgresql+psycopg://USER@HOST/DB [an SQLite file in $XDG_DATA_HOME/artbot]"
        ),
    )


# ---- each subcommand's options (and the small commands themselves) -------------------------


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
    return _print_report(report)


def _print_report(report: CheckReport) -> int:
    """Print a check report; the exit status says whether the script passed."""
    print(report.format())
    return EXIT_OK if report.ok else EXIT_PROBLEMS


def _add_flow_argument(parser: argparse.ArgumentParser, default_help: str) -> None:
    """`--flow`, the wizard: one of FLOWS, by its id."""
    parser.add_argument(
        "--flow",
        choices=sorted(FLOWS),
        default=None,
        help=f"which wizard: {', '.join(sorted(FLOWS))} [{default_help}]",
    )


def answers_flow(answers: dict[str, Any]) -> Flow:
    """The one flow whose questions include every answer's id, else train-rl (whose replay
    then names the answers it does not know)."""
    fitting = [flow for flow in FLOWS.values() if all(flow.has_step(key) for key in answers)]
    return fitting[0] if len(fitting) == 1 else TRAIN_RL


def _render_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--answers",
        required=True,
        type=Path,
        metavar="ANSWERS.json",
        help="a JSON object of answers by question id, as the wizard stores them ('-' for stdin)",
    )
    _add_flow_argument(parser, "the one whose questions the answers are")
    _add_out_argument(parser)
    parser.add_argument("--check", action="store_true", help="then check it as `artbot check` does")
    parser.add_argument(
        "--force", action="store_true", help="replace --out even if artbot did not write it"
    )


def _cmd_render(args: argparse.Namespace) -> int:
    source: Path = args.answers
    try:
        text = sys.stdin.read() if str(source) == "-" else source.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        print(f"artbot render: cannot read {source}: {exc}", file=sys.stderr)
        return EXIT_USAGE
    try:
        answers: Any = json.loads(text)
    except json.JSONDecodeError as exc:
        print(
            f"{source}: not valid JSON: {exc.msg} (line {exc.lineno}, column {exc.colno})",
            file=sys.stderr,
        )
        return EXIT_PROBLEMS
    if not isinstance(answers, dict):
        print(f"{source}: expected a JSON object of answers by question id", file=sys.stderr)
        return EXIT_PROBLEMS
    flow = FLOWS[args.flow] if args.flow else answers_flow(answers)
    try:
        session = replay(flow, answers)
        active = flow.active_answers(session.answers)
        path = script_path(args.out, str(active["run_name"]))
        script = formatted_script(active, path.name, flow)  # its docstring says to run that file
    except AnswersError as exc:
        print(f"{source}: {exc.step_id}: {exc.message}", file=sys.stderr)
        return EXIT_PROBLEMS
    except RenderError as exc:
        print(f"{source}: {exc}", file=sys.stderr)
        return EXIT_PROBLEMS
    try:
        written = write_script(path, script, force=args.force)
    except (OSError, ScriptExists) as exc:
        print(f"artbot render: {exc}", file=sys.stderr)
        return EXIT_USAGE
    print(f"wrote {written.path}" + (f" ({written.note})" if written.note else ""))
    if not args.check:
        return EXIT_OK
    return _print_report(check_script(written.path))


def _chat_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--session",
        default=None,
        metavar="NAME",
        help=f"which of your sessions to resume or start [{DEFAULT_SESSION_NAME}; with "
        "--after-sft: MODEL-rl]",
    )
    start = parser.add_mutually_exclusive_group()
    start.add_argument(
        "--new", action="store_true", help="discard the session NAME has and start over"
    )
    start.add_argument(
        "--export",
        type=Path,
        metavar="ANSWERS.json",
        help="write the session's answers as `artbot render --answers` reads them ('-' for "
        "stdout), then stop",
    )
    after = parser.add_mutually_exclusive_group()
    after.add_argument(
        "--after-sft",
        type=Path,
        metavar="ANSWERS.json",
        help="start a new train-rl session that continues the finished fine-tuning run of "
        "these train-sft answers (as --export writes them): its script forks the SFT model",
    )
    after.add_argument(
        "--after-sft-session",
        nargs="?",
        const=True,
        metavar="NAME",
        help="the same, from your finished train-sft session NAME [the one finished last]",
    )
    _add_flow_argument(parser, "a resumed session's own; train-rl for a new one")
    _add_database_url_argument(parser, "where sessions are kept")
    _add_out_argument(parser)
    parser.add_argument(
        "--no-dryrun",
        dest="dryrun",
        action="store_false",
        help="skip the dry run of the finished script (its checks still run)",
    )
    parser.add_argument(
        "--preflight",
        action="store_true",
        help="after the dry run, preflight the RL script against ARTBOT_PREFLIGHT_BASE_URL's "
        "ARTBOT_PREFLIGHT_MODEL (as `artbot preflight` does)",
    )


def _db_arguments(parser: argparse.ArgumentParser) -> None:
    """`artbot db upgrade|current|rotate-token-key [--database-url URL]`."""
    actions = parser.add_subparsers(dest="db_action", required=True, metavar="ACTION")
    for name, help_text in (
        ("upgrade", "create or migrate the tables to the newest revision (safe to repeat)"),
        ("current", "print the revision the database is at, and the newest one"),
        (
            "rotate-token-key",
            "encrypt every stored Slack token again with the first of ARTBOT_TOKEN_KEYS "
            "(or of the key file)",
        ),
    ):
        action = actions.add_parser(name, help=help_text, description=help_text)
        _add_database_url_argument(action, "the database")


def _serve_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--port", type=int, default=None, help="HTTP port (default: $PORT or 3000)")
    parser.add_argument(
        "--host",
        default="0.0.0.0",
        help="address to listen on (Slack in HTTP mode; /healthz and /metrics in both)",
    )
    parser.add_argument(
        "--workers",
        type=int,
        default=None,
        help="bot processes behind one router, each owning some channels' conversations "
        "(HTTP mode; default: $ARTBOT_WORKERS or 1)",
    )
    # What the router's workers are started with (bot.process.workers), not for people.
    parser.add_argument("--shard", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--uds", default=None, help=argparse.SUPPRESS)


# The one place subcommands are registered; add `chat`, `render`, `dryrun`, `serve` here.
SUBCOMMANDS: tuple[Subcommand, ...] = (
    Subcommand(
        "check",
        "verify a generated training script: compile, ruff, basedpyright against art",
        _check_arguments,
        _cmd_check,
    ),
    Subcommand(
        "chat",
        "answer a wizard (train-rl, or train-sft with --flow) in this terminal; saved after "
        "every reply, resumable",
        _chat_arguments,
        run_chat_command,
    ),
    Subcommand(
        "dryrun",
        "run a training script end to end on this CPU with a stand-in policy and trainer",
        add_dryrun_arguments,
        run_dryrun_command,
    ),
    Subcommand(
        "preflight",
        "run the script's rollouts and reward against a real model before GPU time: does the "
        "reward vary within groups, and what does it cost",
        add_preflight_arguments,
        run_preflight_command,
    ),
    Subcommand(
        "serve",
        "run the Slack bot: HTTP at /slack/events, or Socket Mode when SLACK_APP_TOKEN is set",
        _serve_arguments,
        lambda args: _serve_module().run_serve_command(args),
    ),
    Subcommand(
        "db",
        "create or migrate artbot's database tables (upgrade), show their revision (current), "
        "or encrypt the stored Slack tokens with a new key (rotate-token-key)",
        _db_arguments,
        lambda args: _database_module().run_db_command(args),
    ),
    Subcommand(
        "runner",
        "the GPU runner: `artbot runner serve` trains approved scripts (settings: ARTBOT_RUNNER_*)",
        lambda parser: _runner_module().add_runner_arguments(parser),
        lambda args: _runner_module().run_runner_command(args),
    ),
    Subcommand(
        "render",
        "turn a JSON file of answers into a training script, validated as in chat",
        _render_arguments,
        _cmd_render,
    ),
)


def _serve_module() -> Any:
    # Imported on use: the other commands need none of Slack's libraries.
    import bot.process.serve

    return bot.process.serve


def _database_module() -> Any:
    # Imported on use: rotating the tokens' key brings in the installations' store (slack_sdk).
    import artbot.database

    return artbot.database


def _runner_module() -> Any:
    # Imported on use; runner.command itself is argparse only, and imports the service (uvicorn,
    # FastAPI, the job machinery) only when `artbot runner serve` runs.
    import runner.command

    return runner.command


def build_parser() -> argparse.ArgumentParser:
    """The argument parser for every registered subcommand."""
    parser = argparse.ArgumentParser(
        prog="artbot",
        description="The ART wizards (train-rl, train-sft), script generator and checks.",
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
