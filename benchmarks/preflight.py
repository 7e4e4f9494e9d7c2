"""What a preflight costs: wall time and tokens of `artbot preflight` on one generated script
against a loopback fake model that takes 300 ms per completion. Prints numbers; run by hand.

    uv run python benchmarks/preflight.py [--groups 4] [--latency 0.3] [--concurrency 32]

The script is the RL wizard's single-turn programmatic-reward script (tests/flows/matrix.py:
eight addition scenarios, 4 rollouts per group, its reward minus 0.01 per word), rendered as the
wizard would; the fake (tests/fakes/openai_server.py) answers with one to eight words in turn, so
rewards vary. The preflight runs in the dry run's sandbox as `artbot preflight` does.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

from checks.preflight.launch import preflight_script
from checks.script_format import formatted_script
from isolation.sandbox import Sandbox
from tests.fakes.openai_server import FakeOpenAI, Scripted
from tests.flows.matrix import answers_for


def main() -> None:
    parser = argparse.ArgumentParser(
        description="Wall time and tokens of a preflight against a slow fake model."
    )
    parser.add_argument("--groups", type=int, default=4)
    parser.add_argument("--latency", type=float, default=0.3, help="seconds per completion")
    parser.add_argument("--concurrency", type=int, default=32, help="the script's --max-concurrent")
    args = parser.parse_args()
    answers = answers_for("single", "programmatic", "dataset", "local", False)
    with tempfile.TemporaryDirectory(prefix="artbot-bench-preflight-") as folder:
        script = Path(folder) / "single.py"
        script.write_text(formatted_script(answers))
        with FakeOpenAI(latency_s=args.latency) as fake:
            replies = [Scripted.text(" ".join(["4"] * (1 + i % 8))) for i in range(400)]
            fake.script(*replies)
            started = time.monotonic()
            report = preflight_script(
                script,
                base_url=fake.base_url,
                model="fake-model",
                api_key=fake.key,
                groups=args.groups,
                timeout_s=300,
                script_args=("--max-concurrent", str(args.concurrency)),
                sandbox=Sandbox.for_host(allow_unconfined=True),
            )
            wall = time.monotonic() - started
    print(
        f"preflight of {args.groups} groups x 4 rollouts at {args.latency * 1000:.0f} ms/completion"
    )
    print(f"  verdict: {report.verdict} (exit {report.exit_status})")
    print(f"  wall time: {wall:.2f} s ({report.requests} completions)")
    print(
        f"  tokens: {report.tokens} ({report.prompt_tokens} prompt + "
        f"{report.completion_tokens} completion)"
    )


if __name__ == "__main__":
    main()
