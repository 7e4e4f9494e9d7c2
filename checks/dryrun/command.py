"""`artbot dryrun SCRIPT [ARGS...]`: the command-line face of `dryrun_script`."""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import asdict
from pathlib import Path

from checks.dryrun.launch import ENVIRONMENT_CHOICES, dryrun_script
from checks.dryrun.report import DryrunReport
from isolation.sandbox import Sandbox

DESCRIPTION = (
    "Run an ART training script end to end on this CPU in seconds: a stand-in policy "
    "(and RULER judge) on 127.0.0.1, a stand-in trainer in place of LocalBackend / "
    "ServerlessBackend, no external call. The script's file is not edited (its "
    "functions are counted as they run); its size flags (--num-steps, --num-epochs, "
    "--dataset-size, --max-turns, ...) are capped for the run. Exits 0 when the script ran to "
    "the end, trained something learnable, and your reward, environment and tool code ran; 1 "
    "when it failed; 4 when it proves nothing because the stand-in player could not play the "
    "game."
)
EXIT_INCONCLUSIVE = 4
"""The dry run proves nothing, through no fault found in the script (see artbot/exit_status.py)."""


def add_dryrun_arguments(parser: argparse.ArgumentParser) -> None:
    """Add the `dryrun` options and positionals to `parser` (a subcommand's parser)."""
    parser.description = parser.description or DESCRIPTION
    parser.add_argument(
        "--max-steps",
        dest="dryrun_max_steps",
        type=int,
        default=3,
        metavar="N",
        help="cap the script's --num-steps at N (the stand-in trainer stops at 2*N) [3]",
    )
    parser.add_argument(
        "--timeout",
        dest="dryrun_timeout",
        type=float,
        default=300.0,
        metavar="SECONDS",
        help="kill the run (and everything it started) after this long [300]",
    )
    parser.add_argument(
        "--workdir",
        dest="dryrun_workdir",
        type=Path,
        default=None,
        metavar="DIR",
        help="run in DIR and keep what the run wrote there (default: a temporary folder)",
    )
    parser.add_argument(
        "--env",
        dest="dryrun_environment",
        choices=ENVIRONMENT_CHOICES,
        default="auto",
        help="where the script runs: its own environment, built from its `# /// script` "
        "block with uv and cached (script), artbot's (project), or its own unless it asks "
        "for openpipe-art[backend], the GPU stack (auto) [auto]",
    )
    parser.add_argument(
        "--data",
        dest="dryrun_data",
        type=Path,
        action="append",
        default=[],
        metavar="FILE",
        help="a file the script reads by absolute path (its scenarios): the sandbox lets it "
        "read FILE (repeat for more)",
    )
    parser.add_argument(
        "--json",
        dest="dryrun_json",
        action="store_true",
        help="print the report as JSON",
    )
    parser.add_argument("dryrun_script", type=Path, metavar="SCRIPT", help="the training script")
    parser.add_argument(
        "dryrun_args",
        nargs=argparse.REMAINDER,
        metavar="ARGS",
        help="arguments for the script (after SCRIPT; dryrun's own options go before it)",
    )


def report_json(report: DryrunReport) -> str:
    """The report as JSON, with `ok` and the verdict."""
    return json.dumps(
        {
            **asdict(report),
            "script": str(report.script),
            "ok": report.ok,
            "verdict": report.verdict,
        },
        indent=2,
    )


def run_dryrun_command(args: argparse.Namespace) -> int:
    """Dry-run the script named in `args`, print the report; 0 if ok, 1 if it failed, 4 if it
    was inconclusive, 2 on misuse."""
    script_args = list(args.dryrun_args)
    if script_args[:1] == ["--"]:
        script_args = script_args[1:]
    try:
        report = dryrun_script(
            args.dryrun_script,
            script_args=script_args,
            max_steps=args.dryrun_max_steps,
            timeout_s=args.dryrun_timeout,
            workdir=args.dryrun_workdir,
            environment=args.dryrun_environment,
            # The user's own code on the user's own machine: sandboxed where the host can,
            # else under rlimits only, and the report says so.
            sandbox=Sandbox.for_host(allow_unconfined=True),
            data_files=args.dryrun_data,
        )
    except (FileNotFoundError, ValueError) as error:
        print(f"artbot dryrun: {error}", file=sys.stderr)
        return 2
    print(report_json(report) if args.dryrun_json else report.format())
    return verdict_exit_status(report)


def verdict_exit_status(report: DryrunReport) -> int:
    """The exit status of a dry run's verdict: 0 ok, 1 failed, 4 inconclusive (`artbot dryrun`'s,
    and `artbot chat`'s when it dry-runs the script it wrote)."""
    return {"ok": 0, "failed": 1, "inconclusive": EXIT_INCONCLUSIVE}[report.verdict]
