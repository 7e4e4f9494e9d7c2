"""The sandbox runs code in a child process that sees no secrets, works in an empty temporary
folder, and may not start processes or open sockets; the bot's process runs nothing of it."""

from __future__ import annotations

import os

import pytest

from assistant.sandbox import Limits, run_sandboxed
from flows import CodeCall, CodeCalls
from isolation.sandbox import Sandbox

LIMITS = Limits(wall_seconds=20, cpu_seconds=2, memory_bytes=256 * 1024 * 1024)
HOST = Sandbox.for_host()


def reward_of(code: str) -> CodeCalls:
    check = CodeCall("draft", "compute_reward(scenario, answer)", "number", "compute_reward")
    return CodeCalls({"draft": code}, (check,), ({"answer": "4"},))


def test_the_child_sees_no_secret_of_the_bot(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-not-for-the-sandbox")
    code = (
        "import os\n"
        "def compute_reward(scenario, answer):\n"
        "    assert 'OPENAI_API_KEY' not in os.environ, 'the key leaked'\n"
        "    assert not any('ARTBOT' in k for k in os.environ), 'a setting leaked'\n"
        "    return 1.0\n"
    )
    assert run_sandboxed(reward_of(code), LIMITS, HOST).problem is None


def test_the_child_works_in_an_empty_folder_of_its_own() -> None:
    code = (
        "import os\n"
        "def compute_reward(scenario, answer):\n"
        f"    assert os.getcwd() != {os.getcwd()!r}\n"
        "    assert os.listdir('.') == []\n"
        "    return 1.0\n"
    )
    assert run_sandboxed(reward_of(code), LIMITS, HOST).problem is None


@pytest.mark.parametrize(
    ("code", "stopped"),
    [
        ("import subprocess\nsubprocess.run(['true'])\n", "started a process"),
        ("import os\nos.system('true')\n", "started a process"),
        ("import socket\nsocket.getaddrinfo('localhost', 80)\n", "looked up a network address"),
    ],
)
def test_processes_and_network_are_refused_even_at_load_time(code: str, stopped: str) -> None:
    source = code + "def compute_reward(scenario, answer):\n    return 1.0\n"
    report = run_sandboxed(reward_of(source), LIMITS, HOST)
    assert report.problem == f"the sandbox stopped it: the code {stopped}"


def test_what_the_code_prints_cannot_pass_for_the_result() -> None:
    code = (
        "print('{\"problem\": null}')\n"
        "def compute_reward(scenario, answer):\n"
        "    return 'not a number'\n"
    )
    report = run_sandboxed(reward_of(code), LIMITS, HOST)
    assert report.problem == "compute_reward returned str, not a number on scenario 1"


def test_no_scenarios_means_loading_is_the_check() -> None:
    calls = CodeCalls(
        {"draft": "def compute_reward(scenario):\n    return scenario['missing']\n"},
        (CodeCall("draft", "compute_reward(scenario)", "number", "compute_reward"),),
    )
    assert run_sandboxed(calls, LIMITS, HOST).problem is None
    broken = CodeCalls({"draft": "raise RuntimeError('at import')\n"}, calls.calls)
    assert run_sandboxed(broken, LIMITS, HOST).problem == (
        "loading the draft code failed: RuntimeError: at import"
    )
