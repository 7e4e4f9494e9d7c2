"""The generated script of a finished wizard: render it, check it, upload it to the thread, then
dry-run it and say how it went. Scripts are kept on the bot's host, one folder per thread.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Mapping
from concurrent.futures import Executor
from pathlib import Path
from typing import Any

from slack_sdk import WebClient
from slack_sdk.errors import SlackApiError

from bot.blocks import RESULT_STEP, SlackMessage, result_buttons, sections
from bot.slack_text import clip, escape
from bot.threads import ThreadPoster
from checks.dryrun import DryrunReport, dryrun_script
from checks.script_check import CheckReport, check_script
from flows import TRAIN_RL, RenderError, hyperparameters, render_script
from storage.sessions import SessionKey

log = logging.getLogger(__name__)

Dryrun = Callable[[Path], DryrunReport]
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


def summary(answers: Mapping[str, Any]) -> str:
    """A few lines that say what was generated."""
    hp = hyperparameters(answers)
    turns = "single-turn" if answers.get("turns") == "single" else "multi-turn"
    if answers.get("turns") == "multi":
        turns += " with tools" if answers.get("uses_tools") == "yes" else " game loop"
    reward = {"ruler": "RULER", "programmatic": "programmatic", "custom": "custom (RULER + code)"}[
        answers["reward"]
    ]
    if answers.get("judge_model"):
        reward += f", judge `{escape(str(answers['judge_model']))}`"
    loop = (
        "epochs over the dataset" if answers["iteration"] == "dataset" else "open-ended step loop"
    )
    backend = "LocalBackend" if answers["backend"] == "local" else "ServerlessBackend"
    return "\n".join(
        [
            f"*{escape(answers['run_name'])}* ({escape(answers['project'])}): "
            f"{turns}, reward {reward}",
            f"Base model `{escape(str(answers['base_model']))}` on {backend}; {loop}",
            f"learning rate {hp['learning_rate']:g}, "
            f"{hp['rollouts_per_group']} rollouts per group, "
            f"{hp['groups_per_step']} groups per step",
        ]
    )


def check_line(report: CheckReport) -> str:
    if report.ok:
        return (
            ":white_check_mark: `artbot check`: compiles, ruff-clean, "
            "type-checks against openpipe-art 0.5.18."
        )
    lines = [f":x: `artbot check` found {len(report.problems)} problem(s):"]
    lines += [
        f"• line {p.line}: {p.tool} {p.code}: {escape(clip(p.message, 200))}"
        for p in report.problems[:10]
    ]
    return "\n".join(lines)


class ScriptResults:
    """Turns a complete session into a script in its thread; the dry run goes on in `executor`."""

    def __init__(
        self,
        poster: ThreadPoster,
        scripts_dir: Path,
        executor: Executor,
        *,
        dryrun: Dryrun | None = dryrun_script,
    ) -> None:
        self._poster = poster
        self._scripts_dir = scripts_dir
        self._executor = executor
        self._dryrun = dryrun

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

    def deliver_later(self, client: WebClient, key: SessionKey, answers: Mapping[str, Any]) -> None:
        """`deliver` on the executor, so the caller (a Slack listener) returns at once."""
        self._executor.submit(self._deliver_logged, client, key, dict(answers))

    def _deliver_logged(
        self, client: WebClient, key: SessionKey, answers: Mapping[str, Any]
    ) -> None:
        try:
            self.deliver(client, key, answers)
        except Exception:
            log.exception("delivering the script failed for %s", key)
            self._poster.post_text(
                client,
                key,
                (
                    ":x: Something went wrong while generating the script; your answers are saved. "
                    "Press Regenerate or say `edit <question>`."
                ),
            )

    def deliver(self, client: WebClient, key: SessionKey, answers: Mapping[str, Any]) -> None:
        """Render, check and upload the script with its summary and buttons; dry-run it after."""
        answers = TRAIN_RL.active_answers(answers)
        try:
            script = render_script(answers)
        except (RenderError, SyntaxError, ValueError) as error:
            self._poster.post_text(
                client,
                key,
                (
                    f":x: I could not generate the script: {escape(str(error))}\n"
                    "Say `edit <question>` to fix the answer."
                ),
            )
            return
        path = self.script_path(key, answers)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(script)
        report = check_script(path)
        comment = summary(answers) + "\n" + check_line(report)
        try:
            client.files_upload_v2(
                channel=key.channel,
                thread_ts=key.thread,
                content=script,
                filename=path.name,
                title=path.name,
                initial_comment=comment,
            )
        except SlackApiError as error:
            log.warning("files_upload_v2 failed in %s: %s", key, error.response.get("error"))
            self._poster.post_text(
                client,
                key,
                (
                    f":x: Slack refused the upload ({error.response.get('error')}). "
                    f"The script is saved as `{path.name}` on the bot's host."
                ),
            )
        # Buttons under an older script of this thread would act on this one: they go.
        self._poster.retire(client, key, RESULT_STEP, "Replaced by the newer script below")
        buttons = SlackMessage(
            "What next?", [*sections("*What next?*"), result_buttons(session_ref(key))]
        )
        self._poster.offer(client, key, RESULT_STEP, "What next?", buttons)
        if self._dryrun is not None and report.ok:
            self._poster.post_text(
                client,
                key,
                (":hourglass_flowing_sand: Dry-running the script on a CPU with a stand-in model…"),
            )
            self._executor.submit(self._dryrun_and_report, client, key, path)

    def _dryrun_and_report(self, client: WebClient, key: SessionKey, path: Path) -> None:
        assert self._dryrun is not None
        try:
            report = self._dryrun(path)
        except Exception as error:  # a crash of the dry run itself must still be said
            log.exception("dry run crashed for %s", key)
            self._poster.post_text(
                client, key, (f":x: The dry run itself failed: {escape(str(error))}")
            )
            return
        verdict = ":white_check_mark: Dry run passed" if report.ok else ":x: Dry run failed"
        full = without_host_folders(report.format(), path)
        self._poster.post_text(
            client, key, (f"{verdict}.\n```{escape(clip(full, REPORT_IN_MESSAGE))}```")
        )
        if len(full) > REPORT_IN_MESSAGE:
            # Too long for a message: the whole report goes into the thread as a file.
            try:
                client.files_upload_v2(
                    channel=key.channel,
                    thread_ts=key.thread,
                    content=full,
                    filename=f"{path.stem}.dryrun.txt",
                    title=f"Dry run of {path.name}",
                )
            except SlackApiError as error:
                log.warning(
                    "uploading the dry-run report failed in %s: %s",
                    key,
                    error.response.get("error"),
                )


def without_host_folders(text: str, script: Path) -> str:
    """`text` with the bot host's folders around the script left out: the thread sees
    `math-solver-001.py`, never where the bot keeps its files."""
    for folder in {str(script.parent), str(script.resolve().parent)}:
        text = text.replace(folder + os.sep, "")
    return text


def _safe(part: str) -> str:
    return "".join(c if c.isalnum() or c in "._-" else "_" for c in part)[:100] or "_"
