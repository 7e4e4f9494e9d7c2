"""HTTP tools as support agents call them: a method per tool, path parameters from the call or the
episode's scenario, an auth header whose key comes from the environment; tried against a real
HTTP server on loopback through the generated script's own `execute_tool`."""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from checks.script_format import formatted_script
from flows.conversation.replay import AnswersError, replay
from flows.definition.steps import InvalidAnswer
from flows.wizards.rl.http_tools import tool_auth, tool_endpoints
from flows.wizards.rl.train_rl import TRAIN_RL
from tests.flows.realistic_tasks import SUPPORT_SCENARIOS, support_agent
from tests.flows.test_final_answer import load_script


@dataclass
class ToolServer:
    """A CRM on loopback: records every request, answers 500 on /broken."""

    url: str
    requests: list[dict[str, Any]] = field(default_factory=list)


@pytest.fixture
def crm() -> Iterator[ToolServer]:
    server_box: dict[str, ToolServer] = {}

    class Handler(BaseHTTPRequestHandler):
        def handle_one(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(length).decode() if length else ""
            server_box["crm"].requests.append(
                {
                    "method": self.command,
                    "path": self.path,
                    "body": json.loads(body) if body else None,
                    "authorization": self.headers.get("Authorization"),
                    "scenario": self.headers.get("X-Scenario-Id"),
                }
            )
            status = 500 if self.path.startswith("/broken") else 200
            payload = json.dumps({"ok": status == 200, "path": self.path}).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)

        do_GET = do_POST = do_DELETE = handle_one

        def log_message(self, format: str, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server_box["crm"] = ToolServer(f"http://127.0.0.1:{server.server_address[1]}")
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server_box["crm"]
    finally:
        server.shutdown()
        server.server_close()


def test_calls_reach_the_crm_with_their_method_path_query_body_auth_and_scenario(
    crm: ToolServer,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    answers = replay(TRAIN_RL, support_agent(crm.url)).answers
    script = load_script(formatted_script(answers), tmp_path, "support_http_tools")
    monkeypatch.setenv("CRM_API_KEY", "crm-test-key")
    broken_ticket = SUPPORT_SCENARIOS[0]

    listed, ok = asyncio.run(
        script.execute_tool("list_orders", json.dumps({"status": "open"}), broken_ticket)
    )
    assert ok and json.loads(listed)["ok"] is True
    _, ok = asyncio.run(
        script.execute_tool(
            "refund", json.dumps({"order_id": "o 9", "reason": "broken"}), broken_ticket
        )
    )
    assert ok

    assert crm.requests == [
        {
            "method": "GET",
            # The customer id comes from the scenario, quoted: its slash stays in the segment.
            "path": "/customers/c%2F42/orders?status=open",
            "body": None,
            "authorization": "Bearer crm-test-key",
            "scenario": "t1",
        },
        {
            "method": "POST",
            "path": "/orders/o%209/refund",  # from the call's argument, which leaves the body
            "body": {"reason": "broken"},
            "authorization": "Bearer crm-test-key",
            "scenario": "t1",
        },
    ]
    # A missing path argument is the agent's error, said to it.
    error, ok = asyncio.run(
        script.execute_tool("refund", json.dumps({"reason": "x"}), broken_ticket)
    )
    assert not ok and error == "Error: ValueError: the argument 'order_id' is missing"
    assert "Tool 'refund' failed (shown once per tool)" in capsys.readouterr().err


def test_a_failing_tool_is_printed_once_and_told_to_the_agent_every_time(
    crm: ToolServer,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    answers = support_agent(
        crm.url,
        tool_urls={
            "list_orders": f"GET {crm.url}/broken/{{customer_id}}",
            "refund": f"{crm.url}/orders/{{order_id}}/refund",  # no method: POST
        },
    )
    script = load_script(
        formatted_script(replay(TRAIN_RL, answers).answers), tmp_path, "support_broken"
    )
    monkeypatch.setenv("CRM_API_KEY", "crm-test-key")
    for _ in range(3):
        error, ok = asyncio.run(script.execute_tool("list_orders", "{}", SUPPORT_SCENARIOS[1]))
        assert not ok and error.startswith("Error: HTTPStatusError: Server error '500")
    assert capsys.readouterr().err.count("Tool 'list_orders' failed") == 1
    assert script.TOOL_METHODS == {"list_orders": "GET", "refund": "POST"}


def test_the_script_stops_at_start_when_the_key_variable_is_missing(
    crm: ToolServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    script = load_script(
        formatted_script(replay(TRAIN_RL, support_agent(crm.url)).answers), tmp_path, "support_env"
    )
    monkeypatch.delenv("CRM_API_KEY", raising=False)
    monkeypatch.setenv("OPENAI_API_KEY", "placeholder")
    monkeypatch.setenv("WANDB_API_KEY", "placeholder")
    with pytest.raises(SystemExit, match="CRM_API_KEY: the tools' Authorization header needs it"):
        script.check_environment(script.parse_args([]))
    assert "crm-test-key" not in formatted_script(replay(TRAIN_RL, support_agent(crm.url)).answers)


def test_endpoints_are_read_with_their_methods_and_checked_against_the_tools() -> None:
    answers = {**support_agent("https://crm.internal"), "final_answer_tool": "final_reply"}
    typed = (
        "list_orders: get https://crm.internal/customers/{customer_id}/orders\n"
        "refund: https://crm.internal/orders/{order_id}/refund"
    )
    assert tool_endpoints(typed, answers) == {
        "list_orders": "GET https://crm.internal/customers/{customer_id}/orders",
        "refund": "POST https://crm.internal/orders/{order_id}/refund",
    }
    with pytest.raises(InvalidAnswer, match=r"`\{account\}` in list_orders's URL is neither"):
        tool_endpoints(typed.replace("{customer_id}", "{account}"), answers)
    with pytest.raises(InvalidAnswer, match="is not a path parameter"):
        tool_endpoints(typed.replace("{customer_id}", "{customer-id}"), answers)
    with pytest.raises(InvalidAnswer, match="missing: refund"):
        tool_endpoints(typed.splitlines()[0], answers)


@pytest.mark.parametrize(
    ("typed", "why"),
    [
        ("Bearer $CRM_API_KEY", "Write the header as `Name: value`"),
        ("Authorization: Bearer sk-live", "exactly one environment variable"),
        ("Authorization: $A $B", "exactly one environment variable"),
        ("Host: $CRM_API_KEY", "set by the HTTP client"),
    ],
)
def test_a_wrong_auth_header_says_what_is_wrong(typed: str, why: str) -> None:
    with pytest.raises(InvalidAnswer, match=why):
        tool_auth(typed, {})


def test_an_auth_header_keeps_its_text_around_the_variable() -> None:
    assert tool_auth("X-Api-Key: key=${CRM_KEY};v2", {}) == {
        "header": "X-Api-Key",
        "prefix": "key=",
        "variable": "CRM_KEY",
        "suffix": ";v2",
    }


def test_a_pasted_key_is_never_stored() -> None:
    answers = support_agent("https://crm.internal")
    answers["tool_auth"] = "Authorization: Bearer sk-proj-" + "a" * 40
    with pytest.raises(AnswersError, match="looks like"):
        replay(TRAIN_RL, answers)
