"""A generated script run for real at its edges, against the installed `art`: its flags exit
cleanly, and a game's rollout treats an invalid action as the user chose, with the agent played by
a scripted list of replies."""

from __future__ import annotations

import argparse
import asyncio
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from openai.types.chat import ChatCompletion, ChatCompletionMessage
from openai.types.chat.chat_completion import Choice

from checks.script_format import formatted_script
from tests.flows.matrix import answers_for
from tests.flows.test_final_answer import load_script

# ServerlessBackend scripts import without the GPU stack (LocalBackend's imports torch).
SERVERLESS_GAME = answers_for("game", "programmatic", "open_ended", "serverless", False)
# LocalBackend's training stack applies nest_asyncio when it is imported (art/unsloth/train.py),
# after which a SystemExit inside asyncio.run printed "Task exception was never retrieved": the
# script runs here as it would there.
RUN_AFTER_NEST_ASYNCIO = (
    "import runpy, sys\n"
    "import nest_asyncio\n"
    "nest_asyncio.apply()\n"
    "sys.argv = sys.argv[1:]\n"
    "runpy.run_path(sys.argv[0], run_name='__main__')\n"
)


def test_help_and_bad_flags_exit_cleanly_before_anything_starts(tmp_path: Path) -> None:
    script = tmp_path / "guess-001.py"
    script.write_text(formatted_script(SERVERLESS_GAME, script.name))
    runs = {
        flags: subprocess.Popen(
            [sys.executable, "-c", RUN_AFTER_NEST_ASYNCIO, str(script), *flags],
            cwd=tmp_path,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for flags in [("--help",), ("--bogus",), ("--max-turns", "0")]
    }
    done = {flags: (run.wait(120), *run.communicate()) for flags, run in runs.items()}

    code, out, err = done[("--help",)]
    assert code == 0, err
    assert out.startswith("usage: guess-001.py")
    assert "--max-completion-tokens" in out and "--max-turns" in out
    for flags, message in [
        (("--bogus",), "error: unrecognized arguments: --bogus"),
        (("--max-turns", "0"), "error: --max-turns must be at least 1"),
    ]:
        code, out, err = done[flags]
        assert code == 2, err
        assert err.startswith("usage: guess-001.py") and err.rstrip().endswith(message)
    for _, _, err in done.values():
        assert "Traceback" not in err and "Task exception" not in err and "SystemExit" not in err


class ScriptedAgent:
    """Stands in for the served model: answers each chat completion with the next reply."""

    def __init__(self, replies: list[str]) -> None:
        self.replies = iter(replies)
        self.requests: list[dict[str, Any]] = []
        self.client = SimpleNamespace(
            chat=SimpleNamespace(completions=SimpleNamespace(create=self.create))
        )

    def openai_client(self) -> SimpleNamespace:
        return self.client

    def get_inference_name(self) -> str:
        return "guess-001@0"

    async def create(self, **request: Any) -> ChatCompletion:
        self.requests.append(request)
        message = ChatCompletionMessage(role="assistant", content=next(self.replies))
        choice = Choice(index=0, finish_reason="stop", message=message, logprobs=None)
        return ChatCompletion(
            id="1", choices=[choice], created=0, model="guess-001@0", object="chat.completion"
        )


@pytest.mark.parametrize("policy", ["end", "continue"])
def test_an_invalid_action_ends_the_episode_or_is_told_to_the_agent(
    policy: str, tmp_path: Path
) -> None:
    answers = dict(SERVERLESS_GAME, invalid_action=policy)
    answers.update(hyperparameters="customize", hyperparameter_values={"max_completion_tokens": 77})
    script = load_script(formatted_script(answers), tmp_path, f"guess_{policy}")
    agent = ScriptedAgent(["left", "3", "seven", "7"])
    args = argparse.Namespace(max_turns=10, max_completion_tokens=77)

    trajectory = asyncio.run(script.rollout(agent, {"target": 7}, args))

    assert {request["max_completion_tokens"] for request in agent.requests} == {77}
    observations = [m["content"] for m in trajectory.messages() if m["role"] == "user"]
    if policy == "end":
        assert trajectory.metrics["turns"] == 1 and trajectory.metrics["invalid_actions"] == 1
        assert trajectory.reward == script.INVALID_ACTION_REWARD == -1.0
        assert not trajectory.metrics["finished"] and len(observations) == 1
    else:
        assert trajectory.metrics["turns"] == 4 and trajectory.metrics["invalid_actions"] == 2
        assert trajectory.reward == 1.0 and trajectory.metrics["finished"]  # the user's reward
        assert not hasattr(script, "INVALID_ACTION_REWARD")
        assert observations[1].startswith("Your last action was invalid: not a number: 'left'\n\n")
        assert observations[1].endswith("Guesses so far: []")
        assert observations[2] == "Guess my number from 1 to 9. Guesses so far: [3]"
        assert observations[3].startswith("Your last action was invalid: not a number: 'seven'")
