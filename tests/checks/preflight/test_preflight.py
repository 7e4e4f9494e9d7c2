"""`artbot preflight`: a generated single-turn script against a loopback OpenAI-compatible fake
that scripts the model's replies, in the dry run's sandbox."""

from __future__ import annotations

import itertools
import os
import re
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from artbot.cli import main
from checks.preflight.forwarder import EndpointForwarder
from checks.preflight.wire import COMPLETIONS_PATH, post_json
from checks.script_format import formatted_script
from isolation.sandbox import Sandbox, SandboxLimits, sandbox_environment
from tests.fakes.openai_server import FakeOpenAI, Scripted
from tests.flows.matrix import answers_for

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

KEY = "sk-preflight-canary-8d1f3a"
KEY_ENV = "ARTBOT_TEST_PREFLIGHT_KEY"


@pytest.fixture(scope="module")
def script(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Single turn, programmatic reward: correctness minus 0.01 per word of the answer; 2 groups
    of the script's 4 rollouts."""
    folder = tmp_path_factory.mktemp("preflight")
    path = folder / "single.py"
    path.write_text(
        formatted_script(answers_for("single", "programmatic", "dataset", "local", False))
    )
    return path


def preflight(
    script: Path,
    fake: FakeOpenAI,
    capsys: pytest.CaptureFixture[str],
    *options: str,
    script_args: tuple[str, ...] = (),
) -> tuple[int, str]:
    status = main(
        [
            "preflight",
            "--base-url",
            fake.base_url,
            "--model",
            "stand-in-model",
            "--api-key-env",
            KEY_ENV,
            "--timeout",
            "120",
            *options,
            str(script),
            *script_args,
        ]
    )
    captured = capsys.readouterr()
    return status, captured.out + captured.err


def test_replies_that_vary_give_rewards_with_variance_and_never_show_the_key(
    script: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(KEY_ENV, KEY)
    with FakeOpenAI(key=KEY) as fake:
        # Answers of 1..8 words: every group of 4 gets rewards that differ.
        fake.script(*(Scripted.text(" ".join(["4"] * n)) for n in range(1, 9)))
        status, output = preflight(script, fake, capsys)
        assert fake.refused == []
    assert status == 0, output
    assert "preflight ok" in output
    assert "groups with zero reward variance: 0 of 2 (0%)" in output
    assert "rollouts that raised: 0 of 8" in output
    assert "turns per episode: median 1, max 1" in output
    assert "completion tokens per episode: median 20, max 20" in output
    assert "in 8 requests" in output
    assert "a stand-in: not the script's base model (OpenPipe/Qwen3-14B-Instruct)" in output
    assert {r["model"] for r in fake.requests} == {"stand-in-model"}
    assert KEY not in output


def test_a_constant_reply_is_zero_variance_in_every_group(
    script: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(KEY_ENV, KEY)
    with FakeOpenAI(key=KEY, otherwise=Scripted.text("42")) as fake:
        status, output = preflight(script, fake, capsys)
    assert status == 1, output
    assert "zero variance in every group" in output
    assert "a graded reward instead of a binary one" in output
    assert KEY not in output


def test_the_spend_cap_stops_the_requests(
    script: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(KEY_ENV, KEY)
    with FakeOpenAI(key=KEY, otherwise=Scripted.text("4")) as fake:
        # One rollout at a time: each reply (~36 tokens) is counted before the next is asked.
        status, output = preflight(
            script,
            fake,
            capsys,
            "--max-tokens-total",
            "100",
            script_args=("--max-concurrent", "1"),
        )
        asked = len(fake.requests)
    assert status == 4, output
    assert "spend cap reached: 5 request(s) refused" in output
    assert asked == 3
    assert KEY not in output


def test_an_endpoint_that_is_down_is_inconclusive(
    script: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))
        port = closed.getsockname()[1]
    status = main(
        [
            "preflight",
            "--base-url",
            f"http://user:pw@127.0.0.1:{port}/v1",
            "--model",
            "m",
            str(script),
        ]
    )
    output = capsys.readouterr().out
    assert status == 4
    assert f"endpoint down: http://127.0.0.1:{port}/v1 refused or did not answer" in output
    assert "pw" not in output


def test_a_missing_key_variable_is_a_usage_error(
    script: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(KEY_ENV, raising=False)
    status = main(
        [
            "preflight",
            "--base-url",
            "http://127.0.0.1:9/v1",
            "--model",
            "m",
            "--api-key-env",
            KEY_ENV,
            str(script),
        ]
    )
    assert status == 2
    assert f"{KEY_ENV} is not set" in capsys.readouterr().err


def test_only_the_configured_endpoint_is_reached(tmp_path: Path) -> None:
    """The forwarder sends every request to its endpoint, whatever the request names, and the
    sandbox itself reaches no host at all (not even the endpoint on the host's loopback)."""
    with (
        FakeOpenAI(key=KEY, otherwise=Scripted.text("ok")) as endpoint,
        FakeOpenAI(key=KEY, otherwise=Scripted.text("other")) as other,
    ):
        with EndpointForwarder(
            tmp_path / "endpoint.sock",
            base_url=endpoint.base_url,
            model="m",
            api_key=KEY,
            max_tokens_total=10_000,
        ) as forwarder:
            request = {
                "model": "x",
                "messages": [{"role": "user", "content": "hi"}],
                "base_url": other.base_url,
            }
            status, body = post_json(str(forwarder.socket_path), COMPLETIONS_PATH, request, 10)
            assert status == 200 and body["choices"][0]["message"]["content"] == "ok"
            elsewhere = f"{other.base_url}/chat/completions"
            status, body = post_json(str(forwarder.socket_path), elsewhere, request, 10)
            assert status == 404
        assert other.requests == []
        sandbox = Sandbox.for_host()
        if not sandbox.confined:
            pytest.skip(f"no sandbox on this host: {sandbox.reason}")
        port = int(other.base_url.rsplit(":", 1)[1].split("/")[0])
        probe = (
            "import socket\n"
            "try:\n"
            f"    socket.create_connection(('127.0.0.1', {port}), timeout=2)\n"
            "    print('reached')\n"
            "except OSError as error:\n"
            "    print('refused', type(error).__name__)\n"
        )
        from isolation.sandbox import python_paths

        with sandbox.confine(
            [sys.executable, "-c", probe],
            cwd=tmp_path,
            limits=SandboxLimits(cpu_seconds=10, memory_bytes=1024**3),
            read_only=python_paths(sys.executable),
            writable=[tmp_path],
        ) as argv:
            done = subprocess.run(
                argv, env=sandbox_environment(tmp_path), capture_output=True, text=True, timeout=30
            )
        assert done.stdout.startswith("refused"), done.stdout + done.stderr
        assert other.requests == []


def test_replies_cut_at_the_token_limit_are_counted_as_the_rollouts_saw_them(
    script: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Replies of 1..8 words under a limit of 5 tokens: the fake cuts the three longest of each
    group at 5 words with finish_reason "length", and the reward reads the cut answer."""
    monkeypatch.setenv(KEY_ENV, KEY)
    with FakeOpenAI(key=KEY) as fake:
        fake.script(*(Scripted.words("ok", n) for n in (1, 2, 6, 8, 1, 2, 7, 8)))
        status, output = preflight(
            script,
            fake,
            capsys,
            script_args=("--max-completion-tokens", "5", "--max-concurrent", "1"),
        )
        assert fake.refused == []
        assert {r["max_completion_tokens"] for r in fake.requests} == {5}
    assert status == 0, output
    assert (
        "truncated at the token limit (finish_reason length): 4 of 8 episodes (4 completions)"
        in output
    )
    assert "what to do: A reply cut at the token limit" in output
    assert "--max-completion-tokens" in output
    # The rewards are those of the cut replies (5 words: -0.05), not of the scripted ones.
    rewards = " ".join(line for line in output.splitlines() if line.startswith("  group "))
    assert rewards.count("-0.05") == 4 and rewards.count("-0.01") == rewards.count("-0.02") == 2
    assert not any(f"-0.0{n}" in rewards for n in (6, 7, 8))
    assert "completion tokens per episode: median 3.5, max 5" in output
    assert KEY not in output


@pytest.fixture(scope="module")
def tools_script(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The wizard's tools agent (one local tool, `add`), whose tool raises on every call."""
    folder = tmp_path_factory.mktemp("preflight-tools")
    path = folder / "tools.py"
    broken = (
        "def add(a: int, b: int) -> str:\n"
        "    raise ConnectionError('the calculator service refused the connection')\n"
    )
    answers = answers_for("tools", "programmatic", "dataset", "local", False, tool_code=broken)
    path.write_text(formatted_script(answers))
    return path


def tool_call_then_answer(request: dict[str, Any]) -> Scripted:
    """The agent calls `add` first, then answers in text once it has the tool's result."""
    if request["messages"][-1]["role"] == "tool":
        return Scripted.text("4")
    return Scripted.calls(("add", {"a": 2, "b": 2}))


def test_a_tool_failing_on_every_call_is_reported_with_its_first_traceback(
    tools_script: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(KEY_ENV, KEY)
    with FakeOpenAI(key=KEY, reply_for=tool_call_then_answer) as fake:
        status, output = preflight(tools_script, fake, capsys)
        assert fake.refused == []
        # Every tool result the agent was shown is the tool's error.
        results = [m for r in fake.requests for m in r["messages"] if m["role"] == "tool"]
    assert results and all("ConnectionError" in m["content"] for m in results)
    assert status == 1, output
    # The script caught every error (no rollout raised), yet the report shows them.
    assert "rollouts that raised: 0 of 8" in output
    raised = "exceptions raised in the script's own functions (caught or not): add 8 of 8 call(s)"
    assert f"{raised} (every call)" in output
    assert "first traceback in add:" in output
    assert "ConnectionError: the calculator service refused the connection" in output
    assert "add raised on every call. What to do:" in output
    assert (
        "tool calls: 8 in 8 episode(s); tool errors the script counted (its tool_errors "
        "metric): 8 of 8 calls" in output
    )
    assert KEY not in output


@pytest.fixture(scope="module")
def ruler_script(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Single turn, RULER's reward (judge openai/gpt-5.4)."""
    folder = tmp_path_factory.mktemp("preflight-ruler")
    path = folder / "ruler.py"
    path.write_text(formatted_script(answers_for("single", "ruler", "dataset", "local", False)))
    return path


def test_a_judge_replying_malformed_scores_is_reported_and_its_groups_left_out(
    ruler_script: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """RULER's judge calls go through the forwarder to the same endpoint, as --judge-model;
    one reply is not JSON, the other has no scores: RULER reads neither."""
    monkeypatch.setenv(KEY_ENV, KEY)
    judge_replies = iter(
        [Scripted.text('{"scores": [{"trajectory_id": "1", "sco'), Scripted.json({"ranking": [1]})]
    )

    def reply(request: dict[str, Any]) -> Scripted:
        if "<trajectory id=" in str(request["messages"][-1]["content"]):
            return next(judge_replies)
        return Scripted.text("4")

    with FakeOpenAI(key=KEY, reply_for=reply) as fake:
        status, output = preflight(ruler_script, fake, capsys, "--judge-model", "judge-model")
        assert fake.refused == []
        asked = [r["model"] for r in fake.requests]
    assert asked.count("judge-model") == 2 and asked.count("stand-in-model") == 8
    assert status == 1, output
    assert (
        "RULER judge: 2 calls to judge-model at "
        f"{fake.base_url}, standing in for the script's judge openai/gpt-5.4; 2 malformed "
        "replies RULER could not read" in output
    )
    # Either reply may come back first: both are said as RULER's parser found them.
    [first] = [line for line in output.splitlines() if "first malformed judge reply" in line]
    assert first.split(": ", 1)[1] in (
        "the reply: Invalid JSON: EOF while parsing a string at line 1 column 39; the reply "
        'began: {"scores": [{"trajectory_id": "1", "sco',
        'scores: Field required; the reply began: {"ranking": [1]}',
    )
    assert "groups the script left out after gathering: 2 of 2" in output
    assert "no group reached training: the script left every group out" in output
    assert "what to do: RULER reads the judge's reply as JSON" in output
    assert KEY not in output


def test_a_judge_that_fails_once_costs_that_group_and_the_other_is_scored(
    ruler_script: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The first judge reply gives too few scores, the second one per trajectory."""
    monkeypatch.setenv(KEY_ENV, KEY)
    answers = (Scripted.words("ok", n) for n in itertools.count(1))
    judged = itertools.count()

    def reply(request: dict[str, Any]) -> Scripted:
        ids = re.findall(r'<trajectory id="(\d+)">', str(request["messages"][-1]["content"]))
        if not ids:
            return next(answers)
        given = ids[:1] if next(judged) == 0 else ids
        scores = [{"trajectory_id": i, "explanation": "e", "score": int(i) / 10} for i in given]
        return Scripted.json({"scores": scores})

    with FakeOpenAI(key=KEY, reply_for=reply) as fake:
        status, output = preflight(ruler_script, fake, capsys)
        assert fake.refused == []
        assert {r["model"] for r in fake.requests} == {"stand-in-model"}
    assert status == 1, output
    assert (
        f"RULER judge: 2 calls to stand-in-model at {fake.base_url}, standing in for the "
        "script's judge openai/gpt-5.4; 1 malformed reply RULER could not read" in output
    )
    assert "first malformed judge reply: 1 scores for 4 trajectories; the reply began:" in output
    assert "judge scores: 4, min 0.1, median 0.25, max 0.4" in output
    assert "groups the script left out after gathering: 1 of 2" in output
    # The judged group's rewards are the judge's scores, its rollouts timed from their start.
    assert "group 1: mean 0.250, std 0.112 [0.1, 0.2, 0.3, 0.4]" in output
    [wall] = [line for line in output.splitlines() if "wall time per rollout" in line]
    assert "-" not in wall
