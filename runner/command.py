"""`artbot runner ACTION`: the command line's part of the runner, standard library only.

The service (uvicorn, FastAPI, the job machinery) is imported when an action runs, so that
building artbot's parser stays cheap for every other command.
"""

from __future__ import annotations

import argparse

EXIT_USAGE = 2


def add_runner_arguments(parser: argparse.ArgumentParser) -> None:
    """`artbot runner serve [--host H] [--port N]`."""
    actions = parser.add_subparsers(dest="action", required=True, metavar="ACTION")
    serve = actions.add_parser(
        "serve",
        help="serve the runner's HTTP API (settings: ARTBOT_RUNNER_*, see docs/runner.md)",
        description="Serve the runner's HTTP API. Settings come from ARTBOT_RUNNER_* variables.",
    )
    serve.add_argument(
        "--host",
        default=None,
        help="address to listen on (default: $ARTBOT_RUNNER_HOST or 127.0.0.1)",
    )
    serve.add_argument(
        "--port", type=int, default=None, help="port (default: $ARTBOT_RUNNER_PORT or 8700)"
    )


def run_runner_command(args: argparse.Namespace) -> int:
    """Run `artbot runner <action>`; returns the exit status."""
    if args.action == "serve":
        from runner.api.server import serve

        return serve(host=args.host, port=args.port)
    return EXIT_USAGE  # pragma: no cover - argparse allows only known actions
