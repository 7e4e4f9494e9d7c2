"""Block Kit for runs: the status card, the success and failure messages, the run listings. Pure."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime, timedelta
from typing import Any

from bot.blocks import (
    MAX_BLOCKS,
    RUN_CANCEL_ACTION,
    RUN_COMPARE_ACTION,
    RUN_FIX_ACTION,
    RUN_RERUN_ACTION,
    TEXT_LIMIT,
    Block,
    SlackMessage,
    sections,
    text_message,
)
from bot.runs.store import Run
from bot.slack_text import clip, escape
from runner.schemas import Failure, FixAction

FIX_LABELS = {
    FixAction.retry_lower_gpu_memory: "Retry with lower GPU memory",
    FixAction.resume: "Resume from the last checkpoint",
}
STATE_EMOJI = {
    "submitting": ":outbox_tray:",
    "waiting_for_runner": ":hourglass:",
    "queued": ":hourglass_flowing_sand:",
    "starting": ":gear:",
    "running": ":runner:",
    "succeeded": ":white_check_mark:",
    "failed": ":x:",
    "cancelled": ":no_entry_sign:",
    "lost": ":grey_question:",
    "rejected": ":x:",
}


def status_card(run: Run, *, now: datetime | None = None) -> SlackMessage:
    """One card per run, updated in place: state, step, rewards, elapsed time, Cancel."""
    elapsed = ""
    if run.started_at is not None:
        end = run.finished_at or now or run.started_at
        elapsed = f" · {_duration(end - run.started_at)}"
    text = (
        f"{STATE_EMOJI.get(run.state, '')} *{escape(run.script_name)}*: "
        f"{run.state}{progress(run)}{elapsed}"
    )
    if run.job_id:
        text += f"\njob `{run.job_id}`"
    blocks: list[Block] = sections(text)
    if run.active and run.job_id:
        blocks.append(
            {
                "type": "actions",
                "block_id": f"run:{run.id}",
                "elements": [
                    {
                        "type": "button",
                        "action_id": RUN_CANCEL_ACTION,
                        "text": {"type": "plain_text", "text": "Cancel"},
                        "value": str(run.id),
                        "style": "danger",
                    }
                ],
            }
        )
    return SlackMessage(clip(text, TEXT_LIMIT), blocks)


def success_message(run: Run, data: Mapping[str, Any]) -> SlackMessage:
    """The trained model's name, and how to call it from Python and curl."""
    model = str(data.get("model") or run.script_name.removesuffix(".py"))
    url = str(data.get("inference_url") or "http://<runner-host>:<port>/v1/")
    step = data.get("step")
    # A run that ends before its first step logged has no step to name.
    finished = "Training finished" if step is None else f"Training finished at step {step}"
    text = (
        f"<@{run.owner}> :white_check_mark: {finished}. "
        f"Your model: `{escape(model)}`\n"
        f"*Python*\n```from openai import OpenAI\n\n"
        f'client = OpenAI(base_url="{escape(url)}", api_key="not-needed")\n'
        f'response = client.chat.completions.create(\n    model="{escape(model)}",\n'
        f'    messages=[{{"role": "user", "content": "Your prompt here"}}],\n)\n'
        f"print(response.choices[0].message.content)```\n"
        f"*curl*\n```curl {escape(url.rstrip('/'))}/chat/completions "
        f'-H "Content-Type: application/json" \\\n'
        f'  -d \'{{"model": "{escape(model)}", '
        f'"messages": [{{"role": "user", "content": "Your prompt here"}}]}}\'```'
    )
    message = text_message(text)
    after = [followup_buttons(run, succeeded=True)]
    if run.backend == "serverless":  # still served: it can be tried from the thread
        hint = "Say `try <your prompt>` in this thread to try the trained model here."
        after.append({"type": "context", "elements": [{"type": "mrkdwn", "text": hint}]})
    return SlackMessage(message.text, [*message.blocks[: MAX_BLOCKS - len(after)], *after])


def failure_message(run: Run, failure: Failure) -> SlackMessage:
    """What went wrong, what to do, the log's end, and the fix button when there is one."""
    lines = [f"<@{run.owner}> :x: Training failed: {escape(failure.summary)}"]
    if failure.fix:
        lines.append(f"*What to do:* {escape(failure.fix)}")
    if failure.log_excerpt:
        lines.append(f"```{escape(clip(failure.log_excerpt, 2_000))}```")
    text = "\n".join(lines)
    blocks: list[Block] = sections(text)
    if failure.fix_action is not None:
        blocks.append(
            {
                "type": "actions",
                "block_id": f"fix:{run.id}",
                "elements": [
                    {
                        "type": "button",
                        "action_id": f"{RUN_FIX_ACTION}:{failure.fix_action.value}",
                        "text": {"type": "plain_text", "text": FIX_LABELS[failure.fix_action]},
                        "value": str(run.id),
                        "style": "primary",
                    }
                ],
            }
        )
    blocks = [*blocks[: MAX_BLOCKS - 1], followup_buttons(run, succeeded=False)]
    return SlackMessage(clip(text, TEXT_LIMIT), blocks)


def followup_buttons(run: Run, *, succeeded: bool) -> Block:
    """Under a finished (or failed) run: *Run again with changes* (bot.runs.rerun) and, once
    it succeeded, *Compare with the previous run of this project* (bot.runs.compare)."""
    labels = [(RUN_RERUN_ACTION, "Run again with changes")]
    if succeeded:
        labels.append((RUN_COMPARE_ACTION, "Compare with the previous run of this project"))
    return {
        "type": "actions",
        "block_id": f"followups:{run.id}",
        "elements": [
            {
                "type": "button",
                "action_id": action,
                "text": {"type": "plain_text", "text": label},
                "value": str(run.id),
            }
            for action, label in labels
        ],
    }


def runs_list_text(runs: Sequence[Run]) -> str:
    """`/train-rl runs`: a user's runs, one line each."""
    if not runs:
        return "You have no training runs yet."
    lines = [f"Your training runs ({len(runs)}):"]
    for run in runs:
        lines.append(
            f"• #{run.id} {STATE_EMOJI.get(run.state, '')} `{escape(run.script_name)}` "
            f"in <#{run.key.channel}>: "
            f"{run.state}{progress(run)}"
        )
    return "\n".join(lines)


def thread_status_text(runs: Sequence[Run]) -> str | None:
    """`status` in a wizard's thread: its runs, one line each (None without runs)."""
    if not runs:
        return None
    return "\n".join(
        f"Run {i}: {STATE_EMOJI.get(r.state, '')} {r.state}{progress(r)}"
        for i, r in enumerate(runs, 1)
    )


def progress(run: Run) -> str:
    """` · step n, train/reward r, val/reward r` from the latest points ("" before any)."""
    latest = run.points[-1] if run.points else None
    if latest is None:
        return ""
    parts = [f"step {latest['step']}"]
    train = next((p["train"] for p in reversed(run.points) if p.get("train") is not None), None)
    val = next((p["val"] for p in reversed(run.points) if p.get("val") is not None), None)
    if train is not None:
        parts.append(f"train/reward {train:.3f}")
    if val is not None:
        parts.append(f"val/reward {val:.3f}")
    return " · " + ", ".join(parts)


def _duration(delta: timedelta) -> str:
    seconds = int(delta.total_seconds())
    hours, rest = divmod(seconds, 3600)
    minutes, seconds = divmod(rest, 60)
    return f"{hours}h{minutes:02d}m" if hours else f"{minutes}m{seconds:02d}s"
