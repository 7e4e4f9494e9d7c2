"""`artbot preflight`: a generated single-turn script against a loopback OpenAI-compatible fake
that scripts the model's replies, in the dry run's sandbox."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

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
