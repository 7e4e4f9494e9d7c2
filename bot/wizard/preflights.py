"""*Preflight* on an RL result card: the script's own rollouts and reward for its first step's
groups against the operator's OpenAI-compatible endpoint (checks.preflight), in the dry run's
sandbox, before anyone approves GPU time; the report goes into the thread. One at a time per
thread; the endpoint's key stays with the bot (the sandboxed script never sees it). What it
measured is kept with the script (bot.runs.preflight_records) and prices the run: the report
ends with the estimate from its numbers."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Mapping
from concurrent.futures import Executor
from pathlib import Path
from typing import Any

from bot.delivery.effects import WORKING_STATUSES, Post, Status, ThreadEffect
from bot.delivery.outbox import Outbox
from bot.runs.preflight_records import PreflightRecords
from bot.slack.blocks import text_message
from bot.slack.records import script_digest
from bot.slack.text import clip, escape
from bot.wizard.script_results import report_file, shown_report, without_host_folders
from checks.preflight.endpoint import PreflightEndpoint
from checks.preflight.launch import preflight_script
from checks.preflight.numbers import PreflightNumbers
from checks.preflight.report import PreflightReport
from checks.run_estimate import estimate_rl
from isolation.redaction import redact
from isolation.sandbox import Sandbox
from storage.sessions import SessionKey

log = logging.getLogger(__name__)

VERDICTS = {
    "ok": ":white_check_mark: Preflight ok",
    "problems": ":warning: Preflight found problems",
    "inconclusive": ":grey_question: Preflight inconclusive",
}


Preflight = Callable[..., PreflightReport]


class Preflights:
    """Runs a thread's preflight on `executor` and tells the thread how it went."""

    def __init__(
        self,
        endpoint: PreflightEndpoint,
        outbox: Outbox,
        executor: Executor,
        sandbox: Sandbox,
        records: PreflightRecords,
        *,
        preflight: Preflight = preflight_script,
    ) -> None:
        self.endpoint = endpoint
        self._outbox = outbox
        self._records = records
        self._executor = executor
        self._sandbox = sandbox
        self._preflight = preflight
        self._running: set[SessionKey] = set()
        self._lock = threading.Lock()

    def start(self, key: SessionKey, script: Path, answers: Mapping[str, Any]) -> str | None:
        """Start the preflight of `script` (rendered from the RL wizard's `answers`) for the
        thread `key`; why not (one is running), or None once it is under way (the thread is
        told)."""
        with self._lock:
            if key in self._running:
                return "A preflight of this thread is already running."
            self._running.add(key)
        said = (
            f":stethoscope: Preflight of `{escape(script.name)}`: its rollouts and reward for its "
            f"first step's groups, asking `{escape(self.endpoint.model)}`…"
        )
        self._outbox.enqueue(key, [Post(text_message(said)), Status(WORKING_STATUSES["preflight"])])
        self._executor.submit(self._run, key, script, dict(answers))
        return None

    def _run(self, key: SessionKey, script: Path, answers: Mapping[str, Any]) -> None:
        try:
            digest = script_digest(script.read_text(encoding="utf-8"))
            report = self._preflight(
                script,
                base_url=self.endpoint.base_url,
                model=self.endpoint.model,
                api_key=self.endpoint.api_key,
                sandbox=self._sandbox,
            )
            numbers = PreflightNumbers.of(report)
            if numbers is not None:
                self._records.keep(key, digest, numbers)
            told = self._told(report, script, answers, numbers)
            self._outbox.enqueue(key, [*told, Status("")])
        except Exception as error:  # the preflight itself failing must still be said
            log.exception("preflight crashed for %s", key)
            why = self._without_key(redact(str(error)))
            failed = f":x: The preflight itself failed: {escape(clip(why, 500))}"
            self._outbox.enqueue(key, [Post(text_message(failed)), Status("")])
        finally:
            with self._lock:
                self._running.discard(key)

    def _without_key(self, text: str) -> str:
        """`text` with the endpoint's key taken out, should anything have echoed it."""
        key = self.endpoint.api_key
        return text.replace(key, "[redacted]") if key else text

    def _told(
        self,
        report: PreflightReport,
        script: Path,
        answers: Mapping[str, Any],
        numbers: PreflightNumbers | None,
    ) -> list[ThreadEffect]:
        full = self._without_key(redact(without_host_folders(report.format(), script)))
        shown = shown_report(VERDICTS[report.verdict], full)
        if numbers is not None:
            shown += "\n" + escape(self._without_key(estimate_of(answers, numbers)))
        said: list[ThreadEffect] = [Post(text_message(shown))]
        return said + report_file(
            full, f"{script.stem}.preflight.txt", f"Preflight of {script.name}"
        )


def estimate_of(answers: Mapping[str, Any], numbers: PreflightNumbers) -> str:
    """The run's estimate from the preflight's numbers, or "" should it fail (the report is what
    matters; the card keeps its estimate from the limits)."""
    try:
        return estimate_rl(answers, measured=numbers).text()
    except Exception:
        log.exception("the estimate from a preflight's numbers failed")
        return ""
