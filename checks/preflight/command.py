"""`artbot preflight SCRIPT --base-url URL --model NAME`: the command-line face of
`preflight_script`."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from checks.preflight.launch import preflight_script
from isolation.sandbox import Sandbox

DESCRIPTION = (
    "Before GPU time: run the script's own rollouts and reward for a few scenarios (its first "
    "step's groups, with its own rollouts per group) against a real OpenAI-compatible model, in "
    "the dry run's sandbox with its stand-in trainer (nothing is trained). The sandbox reaches "
    "nothing but that endpoint, through a forwarder that holds the key; tokens are capped. "
    "RULER's judge is asked at the same endpoint (as --judge-model). Exits 0 when the reward "
    "varies within groups, 1 on problems (zero variance in every group, every rollout raised, a "
    "function of the script raised on every call, a judge reply RULER could not read, the "
    "script failed), 4 when it proves nothing (endpoint down, spend cap or timeout before any "
    "group finished), 2 on misuse."
)


def add_preflight_arguments(parser: argparse.ArgumentParser) -> None:
    """Add the `preflight` options and positionals to `parser` (a subcommand's parser)."""
    parser.description = DESCRIPTION
    parser.add_argument("--base-url", required=True, help="the endpoint's OpenAI base URL")
    parser.add_argument("--model", required=True, help="the model name the endpoint serves")
    parser.add_argument(
        "--api-key-env",
        default=None,
        metavar="VAR",
        help="the environment variable holding the endpoint's API key (none sent without it)",
    )
    parser.add_argument(
        "--judge-model",
        default=None,
        metavar="NAME",
        help="the model the same endpoint is asked for RULER's judge calls [--model]",
    )
    parser.add_argument(
        "--groups", type=int, default=2, metavar="N", help="scenarios (groups) to run [2]"
    )
    parser.add_argument(
        "--max-tokens-total",
        type=int,
        default=200_000,
        metavar="N",
        help="spend cap in prompt + completion tokens, from the endpoint's usage [200000]",
    )
    parser.add_argument(
        "--timeout", type=float, default=300.0, metavar="SECONDS", help="stop after this long [300]"
    )
    parser.add_argument("preflight_script", type=Path, metavar="SCRIPT", help="the training script")
    parser.add_argument(
        "preflight_args",
        nargs=argparse.REMAINDER,
        metavar="ARGS",
        help="arguments for the script (after SCRIPT)",
    )


def run_preflight_command(args: argparse.Namespace) -> int:
    """Preflight the script named in `args` and print the report; its exit status, or 2."""
    api_key: str | None = None
    if args.api_key_env:
        api_key = os.environ.get(args.api_key_env)
        if not api_key:
            print(f"artbot preflight: {args.api_key_env} is not set", file=sys.stderr)
            return 2
    script_args = list(args.preflight_args)
    if script_args[:1] == ["--"]:
        script_args = script_args[1:]
    try:
        report = preflight_script(
            args.preflight_script,
            base_url=args.base_url,
            model=args.model,
            judge_model=args.judge_model,
            api_key=api_key,
            groups=args.groups,
            max_tokens_total=args.max_tokens_total,
            timeout_s=args.timeout,
            script_args=script_args,
            # As `artbot dryrun`: the user's own code on the user's own machine.
            sandbox=Sandbox.for_host(allow_unconfined=True),
        )
    except (FileNotFoundError, ValueError) as error:
        print(f"artbot preflight: {error}", file=sys.stderr)
        return 2
    print(report.format())
    return report.exit_status
