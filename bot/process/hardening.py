"""What `artbot serve` does at start-up so that its secrets stay its own, and the sandbox it runs
Slack users' code in (docs/security.md, "Isolation")."""

from __future__ import annotations

import logging
from collections.abc import Mapping

from isolation.inspection import forbid_inspection
from isolation.log_filters import filter_log_handlers
from isolation.redaction import configure_secrets, redact, secrets_in_environment
from isolation.sandbox import Sandbox

log = logging.getLogger(__name__)


def seal_secrets(environ: Mapping[str, str]) -> None:
    """This process non-dumpable (no process of its user reads its environment or memory), and
    every secret of `environ` redacted from all it posts, sends to a model or logs."""
    if not forbid_inspection():
        log.warning("this platform cannot make the bot non-dumpable (no prctl)")
    configure_secrets(secrets_in_environment(environ))
    filter_log_handlers(redact)


def users_code_sandbox(*, allow_unconfined: bool) -> Sandbox:
    """The sandbox for users' code on this host, said at start-up: confined, or refused (fail
    closed), or unconfined because the operator allowed it."""
    sandbox = Sandbox.for_host(allow_unconfined=allow_unconfined)
    if sandbox.confined:
        log.info("users' code: %s", sandbox.description)
    elif sandbox.may_run:
        log.warning(
            "users' code runs UNSANDBOXED on this host (ARTBOT_ALLOW_UNSANDBOXED_CODE): %s; any "
            "user of any installed workspace can read this bot's secrets",
            sandbox.reason,
        )
    else:
        log.warning(
            "users' code is not run (no dry runs, no draft trials): %s. Scripts are still "
            "generated and checked statically.",
            sandbox.reason,
        )
    return sandbox
