"""What a preflight costs: wall time, completions and tokens of `artbot preflight` on each
realistic agent of the test corpus, against a loopback fake model that takes 300 ms per
completion. Prints numbers; run by hand.

    uv run python benchmarks/preflight.py [--groups 2] [--latency 0.3] [--only NAME ...]

The agents are those tests/checks/test_realistic_agents.py dry-runs (tests/flows/realistic_agents.py
and realistic_tasks.py: ART-E, a support agent with HTTP tools and a simulated customer, codenames,
temporal clue with RULER, tic-tac-toe, 2048 in free text, a game whose moves no prompt names),
rendered as the wizard would. The fake (tests/fakes/openai_server.py) answers every request,
the agent's, the simulated user's and RULER's judge's, as the dry run's stand-in policy would
(checks.dryrun.standins.policy_replies: tool calls for offered tools, JSON for a schema, one
score per trajectory for the judge, a short answer otherwise), after `--latency` seconds. Each
preflight runs as `artbot preflight SCRIPT` does, its first step's `--groups` groups with the
script's own rollouts per group and concurrency, in the dry run's sandbox.
"""

from __future__ import annotations

import argparse
import itertools
import os
import random
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

from checks.dryrun.standins.policy_replies import synthesize_completion
from checks.preflight.launch import preflight_script
from checks.preflight.report import PreflightReport
from checks.script_format import formatted_script
from isolation.sandbox import Sandbox
from tests.fakes.openai_server import FakeOpenAI, Scripted, ToolCall
from tests.flows.realistic_agents import (
    game_2048_free_text,
    invalid_moves_game,
    tic_tac_toe_letters_on_top,
)
from tests.flows.realistic_tasks import (
    art_e,
    codenames,
    support_agent_with_a_customer,
    temporal_clue,
)

AGENTS: dict[str, Callable[[], dict[str, Any]]] = {
    "art-e": art_e,
    "support-agent": lambda: support_agent_with_a_customer("https://crm.internal"),
    "codenames": codenames,
    "temporal-clue": temporal_clue,
    "tic-tac-toe": tic_tac_toe_letters_on_top,
    "2048-free-text": game_2048_free_text,
    "invalid-moves": invalid_moves_game,
}


def standin_replies() -> Callable[[dict[str, Any]], Scripted]:
    """Replies as the dry run's stand-in policy would give them, each seeded by its order."""
    numbers = itertools.count()

    def reply(request: dict[str, Any]) -> Scripted:
        completion = synthesize_completion(request, random.Random(next(numbers)), created=0)
        message = completion["choices"][0]["message"]
        calls = tuple(
            ToolCall(call["function"]["name"], call["function"]["arguments"])
            for call in message.get("tool_calls") or []
        )
        return Scripted(
            content=message.get("content"),
            tool_calls=calls,
            completion_tokens=completion["usage"]["completion_tokens"],
        )

    return reply


def preflight(
    name: str, folder: Path, *, groups: int, latency_s: float
) -> tuple[PreflightReport, float]:
    script = folder / f"{name}.py"
    script.write_text(formatted_script(AGENTS[name]()))
    with FakeOpenAI(latency_s=latency_s, reply_for=standin_replies()) as fake:
        started = time.monotonic()
        report = preflight_script(
            script,
            base_url=fake.base_url,
            model="fake-model",
            api_key=fake.key,
            groups=groups,
            timeout_s=600,
            sandbox=Sandbox.for_host(allow_unconfined=True),
        )
        return report, time.monotonic() - started


def main() -> None:
    parser = argparse.ArgumentParser(
        description="Wall time and tokens of a preflight of each realistic agent."
    )
    parser.add_argument("--groups", type=int, default=2, help="scenarios per preflight [2]")
    parser.add_argument("--latency", type=float, default=0.3, help="seconds per completion")
    parser.add_argument("--only", nargs="*", choices=sorted(AGENTS), default=None)
    args = parser.parse_args()
    names = args.only or list(AGENTS)
    print(
        f"preflight of {args.groups} groups (each agent's own rollouts per group and "
        f"concurrency) at {args.latency * 1000:.0f} ms per completion"
    )
    print(
        f"{'agent':<16} {'verdict':<13} {'wall s':>7} {'completions':>11} {'judge':>5} "
        f"{'rollouts':>8} {'tokens':>8} {'prompt':>8} {'completion':>10}"
    )
    totals = [0.0, 0, 0, 0, 0, 0, 0]
    with tempfile.TemporaryDirectory(prefix="artbot-bench-preflight-") as folder:
        for name in names:
            report, wall = preflight(name, Path(folder), groups=args.groups, latency_s=args.latency)
            row = [
                wall,
                report.requests,
                report.judge_requests,
                report.rollouts,
                report.tokens,
                report.prompt_tokens,
                report.completion_tokens,
            ]
            totals = [t + r for t, r in zip(totals, row, strict=True)]
            print(
                f"{name:<16} {report.verdict:<13} {wall:>7.1f} {report.requests:>11} "
                f"{report.judge_requests:>5} {report.rollouts:>8} {report.tokens:>8} "
                f"{report.prompt_tokens:>8} {report.completion_tokens:>10}"
            )
    print(
        f"{'total':<16} {'':<13} {totals[0]:>7.1f} {totals[1]:>11} {totals[2]:>5} "
        f"{totals[3]:>8} {totals[4]:>8} {totals[5]:>8} {totals[6]:>10}"
    )


if __name__ == "__main__":
    main()
