"""The generated script of a finished wizard: render it, check it, upload it, post its result
card in the thread, then dry-run it and show how it went on the card. Scripts are kept on the
bot's host, one folder per thread.
"""

from __future__ import annotations

import dataclasses
import logging
import os
from collections.abc import Mapping, Sequence
from concurrent.futures import Executor
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from slack_sdk import WebClient
from slack_sdk.errors import SlackApiError

from bot.delivery.effects import (
    WORKING_STATUSES,
    Ask,
    Post,
    Retire,
    Status,
    ThreadEffect,
    Update,
    Upload,
)
from bot.delivery.outbox import Outbox
from bot.slack.blocks import (
    MAX_BLOCKS,
    RESULT_STEP,
    TEXT_LIMIT,
    Block,
    SlackMessage,
    result_buttons,
    sections,
    text_message,
)
from bot.slack.records import script_digest
from bot.slack.text import clip, escape
from bot.wizard.script_summaries import SUMMARIES
from checks.dryrun import DryrunReport, dryrun_script
from checks.run_estimate import ESTIMATES
from checks.script_check import CheckReport, Problem, check_script
from checks.script_format import formatted_script
from flows import Flow, RenderError, start_of
from isolation.sandbox import Sandbox
from storage.sessions import SessionKey

log = logging.getLogger(__name__)


class Dryrun(Protocol):
    """checks.dryrun.dryrun_script as the bot calls it: a script, and the SFT model it starts
    from when it continues a fine-tuning run (the dry run forks a stand-in of it)."""

    def __call__(
        self, path: Path, *, forks_from: Mapping[str, str] | None = None
    ) -> DryrunReport: ...


REPORT_IN_MESSAGE = 2_800


def session_ref(key: SessionKey) -> str:
    """How a result button names its session (its message may sit anywhere in the thread)."""
    return f"{key.team}|{key.channel}|{key.thread}"


def parse_session_ref(value: str) -> SessionKey | None:
    parts = value.split("|")
    if len(parts) != 3 or not all(parts):
        return None
    try:
        return SessionKey(*parts)
    except ValueError:
        return None


def check_line(report: CheckReport) -> str:
    """What `artbot check` said: passed, or its problems; then its notes on the user's code."""
    if report.ok and not report.notes:
        return (
            ":white_check_mark: `artbot check`: compiles, ruff-clean, "
            "type-checks against openpipe-art 0.5.18."
        )
    if report.ok:
        lines = [
            ":white_check_mark: `artbot check`: compiles, no errors from ruff, type-checks "
            "against openpipe-art 0.5.18."
        ]
    else:
        lines = [f":x: `artbot check` found {len(report.problems)} problem(s):"]
        lines += [_finding(p) for p in report.problems[:10]]
    if report.notes:
        lines.append(
            f":memo: {len(report.notes)} note(s) on your own code, matters of style that stop "
            "nothing:"
        )
        lines += [_finding(p) for p in report.notes[:5]]
    return "\n".join(lines)


def _finding(problem: Problem) -> str:
    return (
        f"• line {problem.line}: {problem.tool} {problem.code}: "
        f"{escape(clip(problem.message, 200))}"
    )


def _estimate(flow: Flow, answers: Mapping[str, Any]) -> str:
    """What the run will take (checks.run_estimate), escaped; "" when it cannot be said (the
    card goes out all the same)."""
    try:
        return escape(ESTIMATES[flow.id](answers).text())
    except Exception:
        log.exception("the estimate failed for a %s script", flow.id)
        return ""


class ScriptResults:
    """Turns a complete session into a script in its thread; the dry run goes on in `executor`.

    The result is one message, the result card: a link to the script, the summary, the check,
    the dry run's state, and the buttons. It is posted once the script is uploaded and updated
    in place when the dry run ends, both through the outbox (durable, in order with the turns).

    The script is uploaded without a channel and linked from the card rather than shared into
    the thread: sharing makes Slack post a message of its own (asynchronously, with no ts to
    update: python-slack-sdk#1545), which would be a second message. A private file becomes
    visible to the channel when the bot posts a message that links it (the Slack maintainers'
    own account of files, bolt-python#1018), so the link is in the card's first post, never
    only in a later update.
    """

    def __init__(
        self,
        outbox: Outbox,
        scripts_dir: Path,
        executor: Executor,
        *,
        dryrun: Dryrun | None = dryrun_script,
        sandbox: Sandbox | None = None,
        preflight_offered: bool = False,
    ) -> None:
        self._outbox = outbox
        self._scripts_dir = scripts_dir
        self._executor = executor
        self._dryrun = dryrun
        self.sandbox = sandbox or Sandbox.for_host()
        """Where users' code runs on this host (the dry run's, the drafts'), or why nowhere."""
        self.preflight_offered = preflight_offered
        """RL cards offer *Preflight* (bot.wizard.preflights): an endpoint is configured."""

    def script_path(self, key: SessionKey, answers: Mapping[str, Any]) -> Path:
        return self.script_file(key, f"{answers['run_name']}.py")

    def script_file(self, key: SessionKey, script_name: str) -> Path:
        folder = self._scripts_dir / _safe(key.team) / _safe(key.channel) / _safe(key.thread)
        return folder / _safe(script_name)

    def load_script(self, key: SessionKey, script_name: str) -> str | None:
        path = self.script_file(key, script_name)
        return path.read_text() if path.is_file() else None

    def latest_script(self, key: SessionKey, answers: Mapping[str, Any]) -> tuple[Path, str] | None:
        path = self.script_path(key, answers)
        return (path, path.read_text()) if path.is_file() else None

    def deliver_later(
        self, client: WebClient, key: SessionKey, flow: Flow, answers: Mapping[str, Any]
    ) -> None:
        """`deliver` on the executor, so the caller (a Slack listener) returns at once."""
        self._executor.submit(self._deliver_logged, client, key, flow, dict(answers))

    def _say(self, key: SessionKey, text: str) -> None:
        self._outbox.enqueue(key, [Post(text_message(text))])

    def _deliver_logged(
        self, client: WebClient, key: SessionKey, flow: Flow, answers: Mapping[str, Any]
    ) -> None:
        try:
            self.deliver(client, key, flow, answers)
        except Exception:
            log.exception("delivering the script failed for %s", key)
            self._say(
                key,
                ":x: Something went wrong while generating the script; your answers are saved. "
                "Press Regenerate or say `edit <question>`.",
            )

    def deliver(
        self, client: WebClient, key: SessionKey, flow: Flow, answers: Mapping[str, Any]
    ) -> None:
        """Render, check and upload `flow`'s script, then post its card (the older card of the
        thread loses its buttons); dry-run it after, the verdict updating the card."""
        answers = flow.active_answers(answers)
        path = self.script_path(key, answers)
        try:
            script = formatted_script(answers, path.name, flow)
        except (RenderError, SyntaxError, ValueError) as error:
            self._say(
                key,
                f":x: I could not generate the script: {escape(str(error))}\n"
                "Say `edit <question>` to fix the answer.",
            )
            return
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(script)
        report = check_script(path)
        card = ResultCard(
            key=key,
            script_name=path.name,
            link=self._upload(client, key, path.name, script),
            summary="\n".join(
                part for part in (SUMMARIES[flow.id](answers), _estimate(flow, answers)) if part
            ),
            check=check_line(report),
            digest=script_digest(script),
            dryrun=self._dryrun_line(report, flow.runner_paths(answers)),
            preflight=self.preflight_offered and flow.id == "train-rl",
        )
        # Buttons under an older script of this thread would act on this one: they go.
        dry_running = card.dryrun == DRYRUN_RUNNING
        self._outbox.enqueue(
            key,
            [
                Retire(RESULT_STEP, "Replaced by the newer script below"),
                Ask(RESULT_STEP, card.remembered(), card.message()),
                *([Status(WORKING_STATUSES["dry_run"])] if dry_running else []),
            ],
        )
        if dry_running:
            start = start_of(answers)
            forks_from = dict(start) if start is not None else None
            self._executor.submit(self._dryrun_and_report, key, path, card, forks_from)

    def _dryrun_line(self, report: CheckReport, runner_paths: Sequence[str]) -> str:
        """The card's dry-run line before the dry run: under way, or why there is none. Only
        errors skip it (style never says whether a script runs), and files that are only on the
        runner host: without them the script would stop at its first line of data."""
        if report.errors:
            return (
                ":x: Not dry-run, because of the errors above (style alone would not have stopped "
                "it). Say `edit <question>` to change an answer."
            )
        if runner_paths:
            named = ", ".join(f"`{escape(clip(path, 200))}`" for path in runner_paths[:3])
            return (
                f":information_source: Not dry-run here: the script reads {named} on the runner "
                "host, which this host does not have. It checks every line of it when it starts "
                "there."
            )
        if self._dryrun is not None:
            return DRYRUN_RUNNING
        if not self.sandbox.may_run:
            return f":lock: Not dry-run: {self.sandbox.refusal}."
        return ""

    def _upload(self, client: WebClient, key: SessionKey, name: str, script: str) -> str | None:
        """The uploaded script's permalink (None: Slack refused it; the card says so)."""
        try:
            uploaded = client.files_upload_v2(content=script, filename=name, title=name)
        except SlackApiError as error:
            log.warning("files_upload_v2 failed in %s: %s", key, error.response.get("error"))
            return None
        file = uploaded.get("file") or {}
        if not file.get("permalink") and file.get("id"):
            # Slack documents only ids and titles in completeUploadExternal's answer.
            try:
                file = client.files_info(file=str(file["id"])).get("file") or {}
            except SlackApiError as error:
                log.warning("files.info failed in %s: %s", key, error.response.get("error"))
        return str(file.get("permalink") or "") or None

    def _dryrun_and_report(
        self,
        key: SessionKey,
        path: Path,
        card: ResultCard,
        forks_from: Mapping[str, str] | None = None,
    ) -> None:
        assert self._dryrun is not None
        try:
            report = (
                self._dryrun(path, forks_from=forks_from)
                if forks_from is not None
                else self._dryrun(path)
            )
        except Exception as error:  # a crash of the dry run itself must still be said
            log.exception("dry run crashed for %s", key)
            verdict = f":x: The dry run itself failed: {escape(clip(str(error), 500))}"
            self._outbox.enqueue(key, [card.with_dryrun(verdict).update(), Status("")])
            return
        verdict = {
            "ok": ":white_check_mark: Dry run passed",
            "failed": ":x: Dry run failed",
            # The stand-in could not play the game: nothing found wrong, nothing proven.
            "inconclusive": ":grey_question: Dry run inconclusive",
        }[report.verdict]
        full = without_host_folders(report.format(), path)
        said: list[ThreadEffect] = [card.with_dryrun(shown_report(verdict, full)).update()]
        said += report_file(full, f"{path.stem}.dryrun.txt", f"Dry run of {path.name}")
        self._outbox.enqueue(key, [*said, Status("")])


RESULT_CARD_HEAD = ":page_facing_up: Your training script"
"""How every result card begins, live or retired."""
DRYRUN_RUNNING = ":hourglass_flowing_sand: Dry-running it on a CPU with a stand-in model…"


@dataclass(frozen=True)
class ResultCard:
    """The one message a generated script gets: what it is, how it checked, how its dry run
    went (or that it is under way), and the buttons."""

    key: SessionKey
    script_name: str
    link: str | None
    """The uploaded script's permalink; None when Slack refused the upload."""
    summary: str
    check: str
    digest: str
    """The script's sha256."""
    dryrun: str = ""
    preflight: bool = False
    """Whether the card offers *Preflight* (an endpoint is configured)."""

    def with_dryrun(self, dryrun: str) -> ResultCard:
        return dataclasses.replace(self, dryrun=dryrun)

    def remembered(self) -> str:
        """What the card shows once its buttons are gone (plain: escaped when shown). The
        script's digest tells cards apart: a dry run updates its own script's card, never a
        newer script's (the same script regenerated may take either: its verdict is theirs)."""
        return f"{RESULT_CARD_HEAD}: {self.script_name} (sha256 {self.digest[:12]})"

    def update(self) -> Update:
        """This card, as it is now, in place of the one posted."""
        return Update(RESULT_STEP, self.message(), self.remembered())

    def message(self) -> SlackMessage:
        name = escape(self.script_name)
        if self.link:
            head = f"{RESULT_CARD_HEAD}: *<{self.link}|{name}>*"
        else:
            head = (
                f"{RESULT_CARD_HEAD}: *{name}*\n"
                ":x: Slack refused the upload; the script is saved on the bot's host."
            )
        text = "\n".join(part for part in (head, self.summary, self.check, self.dryrun) if part)
        blocks: list[Block] = [
            *sections(text)[: MAX_BLOCKS - 1],
            result_buttons(session_ref(self.key), preflight=self.preflight),
        ]
        return SlackMessage(clip(text, TEXT_LIMIT), blocks, RESULT_STEP)


def shown_report(verdict: str, full: str) -> str:
    """A verdict, and the report under it clipped to fit a message (mrkdwn)."""
    return f"{verdict}.\n```{escape(clip(full, REPORT_IN_MESSAGE))}```"


def report_file(full: str, name: str, title: str) -> list[ThreadEffect]:
    """The whole report as a file for the thread, when it is too long for a message (rare)."""
    return [Upload(name, title, full)] if len(full) > REPORT_IN_MESSAGE else []


def without_host_folders(text: str, script: Path) -> str:
    """`text` with the bot host's folders around the script left out: the thread sees
    `math-solver-001.py`, never where the bot keeps its files."""
    for folder in {str(script.parent), str(script.resolve().parent)}:
        text = text.replace(folder + os.sep, "")
    return text


def _safe(part: str) -> str:
    return "".join(c if c.isalnum() or c in "._-" else "_" for c in part)[:100] or "_"
