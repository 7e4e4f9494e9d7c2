"""Run a preflight: the dry run's sandbox and bootstrap, the real endpoint behind a forwarder."""

from __future__ import annotations

import ast
import dataclasses
import shutil
import socket
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from urllib.parse import urlsplit

from checks.dryrun.launch import dryrun_script
from checks.preflight.endpoint import base_url_problem
from checks.preflight.forwarder import EndpointForwarder
from checks.preflight.report import FunctionErrors, GroupResult, PreflightReport
from checks.preflight.wire import GROUPS_ENV, SOCKET_ENV
from isolation.sandbox import Sandbox

CONNECT_TIMEOUT_S = 5.0


def display_url(url: str) -> str:
    """`url` without user, password, query or fragment: what a report may show."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    if ":" in host:
        host = f"[{host}]"
    port = f":{parts.port}" if parts.port else ""
    return f"{parts.scheme}://{host}{port}{parts.path}"


def endpoint_address(url: str) -> tuple[str, int]:
    """The host and port of an http(s) base URL (ValueError when it is not one, as the bot's
    settings check ARTBOT_PREFLIGHT_BASE_URL: checks.preflight.endpoint.base_url_problem)."""
    problem = base_url_problem(url)
    if problem is not None:
        raise ValueError(f"--base-url {problem}")
    parts = urlsplit(url)
    assert parts.hostname is not None
    return parts.hostname, parts.port or (443 if parts.scheme == "https" else 80)


def unreachable(url: str) -> str | None:
    """Why the endpoint cannot be connected to, or None when it accepts a connection."""
    host, port = endpoint_address(url)
    try:
        with socket.create_connection((host, port), timeout=CONNECT_TIMEOUT_S):
            return None
    except OSError as error:
        return f"{display_url(url)} refused or did not answer a connection ({type(error).__name__})"


def script_base_model(script: Path) -> str | None:
    """The script's BASE_MODEL constant, if it has one."""
    return script_constant(script, "BASE_MODEL")


def script_constant(script: Path, name: str) -> str | None:
    """The string the script assigns to `name` at module level, if it does."""
    try:
        module = ast.parse(script.read_text(encoding="utf-8"))
    except (OSError, SyntaxError, ValueError, RecursionError):
        return None
    for node in module.body:
        if (
            isinstance(node, ast.Assign)
            and any(isinstance(t, ast.Name) and t.id == name for t in node.targets)
            and isinstance(node.value, ast.Constant)
            and isinstance(node.value.value, str)
        ):
            return node.value.value
    return None


def preflight_script(
    path: Path,
    *,
    base_url: str,
    model: str,
    api_key: str | None = None,
    groups: int = 2,
    max_tokens_total: int = 200_000,
    timeout_s: float = 300.0,
    script_args: Sequence[str] = (),
    sandbox: Sandbox | None = None,
    judge_model: str | None = None,
) -> PreflightReport:
    """Run the script's rollouts and reward for `groups` scenarios of its first step against the
    model `model` at `base_url` (sent `api_key`, which never enters the sandbox), in the dry run's
    sandbox with the stand-in trainer; stop after that step's groups are gathered. RULER's judge
    calls go to the same endpoint, asking for `judge_model` (default: `model`)."""
    script = path.resolve()
    if not script.is_file():
        raise FileNotFoundError(f"no such script: {path}")
    if groups < 1 or max_tokens_total < 1 or timeout_s <= 0:
        raise ValueError("--groups, --max-tokens-total and --timeout must be positive")
    endpoint_address(base_url)
    report = PreflightReport(
        script=script,
        model=model,
        endpoint=display_url(base_url),
        base_model=script_base_model(script),
        max_tokens_total=max_tokens_total,
        judge_model=judge_model or model,
        script_judge_model=script_constant(script, "JUDGE_MODEL"),
    )
    started = time.monotonic()
    down = unreachable(base_url)
    if down is not None:
        return dataclasses.replace(report, unreachable=down)
    socket_dir = Path(tempfile.mkdtemp(prefix="artbot-preflight-"))
    socket_dir.chmod(0o755)
    try:
        with EndpointForwarder(
            socket_dir / "endpoint.sock",
            base_url=base_url,
            model=model,
            api_key=api_key,
            max_tokens_total=max_tokens_total,
            request_timeout_s=timeout_s,
            judge_model=judge_model,
        ) as forwarder:
            run = dryrun_script(
                script,
                script_args=script_args,
                max_steps=1,
                timeout_s=timeout_s,
                sandbox=sandbox,
                child_env={SOCKET_ENV: str(forwarder.socket_path), GROUPS_ENV: str(groups)},
                shared_dirs=[socket_dir],
            )
            spend = forwarder.spend
            return dataclasses.replace(
                report,
                groups=tuple(GroupResult.from_json(g) for g in spend.groups or []),
                groups_asked=_count(spend.gather.get("asked")),
                functions=tuple(
                    FunctionErrors.from_json(f)
                    for f in spend.gather.get("functions") or []
                    if isinstance(f, dict)
                ),
                judge_requests=spend.judge_requests,
                judge_scores=tuple(spend.judge_scores),
                judge_malformed=tuple(spend.judge_malformed),
                prompt_tokens=spend.prompt_tokens,
                completion_tokens=spend.completion_tokens,
                requests=spend.requests,
                refused_by_cap=spend.refused_by_cap,
                truncations=spend.truncations,
                endpoint_errors=tuple(spend.endpoint_errors),
                timed_out=run.exit_code is None,
                script_error=forwarder.redact(run.first_error) if run.first_error else None,
                duration_s=time.monotonic() - started,
                notes=tuple(
                    forwarder.redact(note)
                    for note in run.notes
                    # The dry run's own caps and its stop, which the preflight asked for.
                    if "capped" not in note and "stand-in trainer stopped" not in note
                ),
            )
    finally:
        shutil.rmtree(socket_dir, ignore_errors=True)


def _count(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None
