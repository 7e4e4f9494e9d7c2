"""Block Kit for runs: the status card, the success and failure messages, the run listings. Pure."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime, timedelta
from typing import Any

from bot.runs.display.rollout_samples import samples_line
from bot.runs.store import Run
from bot.slack.blocks import (
    MAX_BLOCKS,
    RUN_CANCEL_ACTION,
    RUN_CHECKPOINTS_ACTION,
    RUN_COMPARE_ACTION,
    RUN_CONTINUE_RL_ACTION,
    RUN_FIX_ACTION,
    RUN_PAUSE_ACTION,
    RUN_RERUN_ACTION,
    RUN_RESUME_ACTION,
    RUN_STALL_RESTART_ACTION,
    RUN_STALL_WAIT_ACTION,
    RUN_TRY_ACTION,
    TEXT_LIMIT,
    Block,
    SlackMessage,
    sections,
    text_message,
)
from bot.slack.text import clip, escape
from checks.preflight.numbers import PreflightNumbers
from runner.schemas import Failure, FixAction

FIX_LABELS = {
    FixAction.retry_lower_gpu_memory: "Retry with lower GPU memory",
    FixAction.resume: "Resume from the last checkpoint",
}
STATE_WORDS = {
    "stalled": "possibly stalled",
    "restarting": "restarting from its last checkpoint",
    "pausing": "pausing (stopping; its checkpoints are kept)",
}
"""What the card says of a state that is not the runner's own (bot.runs.reporter sets them)."""
STATE_EMOJI = {
    "submitting": ":outbox_tray:",
    "waiting_for_runner": ":hourglass:",
    "queued": ":hourglass_flowing_sand:",
    "starting": ":gear:",
    "running": ":runner:",
    "stalled": ":zzz:",
    "restarting": ":arrows_counterclockwise:",
    "pausing": ":double_vertical_bar:",
    "paused": ":double_vertical_bar:",
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
        f"{STATE_WORDS.get(run.state, run.state)}{progress(run)}{elapsed}"
    )
    if run.job_id:
        text += f"\njob `{run.job_id}`"
    if samples := samples_line(run.points):
        text += f"\n{samples}"
    blocks: list[Block] = sections(text)
    if run.active and run.job_id:
        buttons = [_button(RUN_CANCEL_ACTION, "Cancel", run, style="danger")]
        if run.backend != "serverless" and run.state in ("running", "stalled"):
            buttons.insert(0, _button(RUN_PAUSE_ACTION, "Pause", run))
        blocks.append({"type": "actions", "block_id": f"run:{run.public_id}", "elements": buttons})
    return SlackMessage(clip(text, TEXT_LIMIT), blocks)


def paused_message(run: Run) -> SlackMessage:
    """A paused run: its job stopped and its GPU free; *Resume* goes on from its last
    checkpoint in a new job."""
    step = next((p["step"] for p in reversed(run.points) if p.get("train") is not None), None)
    after = f" after step {step}" if step is not None else ""
    text = (
        f"<@{run.owner}> :double_vertical_bar: Job `{run.job_id}` is paused{after}: it stopped "
        "and its GPU is free. Its checkpoints are kept: *Resume* goes on from the last one in a "
        "new job (steps since that checkpoint are trained again)."
    )
    followups = followup_buttons(run, succeeded=False)
    resume = _button(RUN_RESUME_ACTION, "Resume", run, style="primary")
    controls = {**followups, "elements": [resume, *followups["elements"]]}
    return SlackMessage(text, [*sections(text)[: MAX_BLOCKS - 1], controls])


def _button(action_id: str, label: str, run: Run, *, style: str | None = None) -> Block:
    button: Block = {
        "type": "button",
        "action_id": action_id,
        "text": {"type": "plain_text", "text": label},
        "value": run.public_id,
    }
    if style is not None:
        button["style"] = style
    return button


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
        f"{_with_newline(before_after_table(run.points) or similarity_change(run.points))}"
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
    # A serverless model is still served; a local one is served again on the runner for a while.
    hint = "*Try it*, or say `try <your prompt>` in this thread, to try the trained model here."
    after.append({"type": "context", "elements": [{"type": "mrkdwn", "text": hint}]})
    return SlackMessage(message.text, [*message.blocks[: MAX_BLOCKS - len(after)], *after])


def failure_message(run: Run, failure: Failure, note: str = "") -> SlackMessage:
    """What went wrong, what to do, the log's end, and the fix button when there is one; `note`
    (mrkdwn) says why a transient failure was not resumed automatically."""
    lines = [f"<@{run.owner}> :x: Training failed: {escape(failure.summary)}"]
    if note:
        lines.append(note)
    if failure.fix:
        lines.append(f"*What to do:* {escape(failure.fix)}")
    if failure.log_excerpt:
        lines.append(f"```{escape(clip(failure.log_excerpt, 2_000))}```")
    table = before_after_table(run.points, needs_base=True)
    if table:
        lines.append(table)
    text = "\n".join(lines)
    blocks: list[Block] = sections(text)
    if failure.fix_action is not None:
        blocks.append(
            {
                "type": "actions",
                "block_id": f"fix:{run.public_id}",
                "elements": [
                    {
                        "type": "button",
                        "action_id": f"{RUN_FIX_ACTION}:{failure.fix_action.value}",
                        "text": {"type": "plain_text", "text": FIX_LABELS[failure.fix_action]},
                        "value": run.public_id,
                        "style": "primary",
                    }
                ],
            }
        )
    blocks = [*blocks[: MAX_BLOCKS - 1], followup_buttons(run, succeeded=False)]
    return SlackMessage(clip(text, TEXT_LIMIT), blocks)


LOST = "was lost: the runner restarted and its process was gone"
"""How a `lost` job is told (the runner's host rebooted, or the runner stopped with it)."""


def lost_message(run: Run, note: str = "") -> SlackMessage:
    """A job the runner lost; `note` (mrkdwn) says why it was not resumed automatically."""
    text = f"<@{run.owner}> the training job `{run.job_id}` {LOST}."
    return text_message(f"{text} {note}" if note else text)


def auto_resume_message(
    run: Run, cause: str, attempt: int, budget: int, from_checkpoint: bool | None
) -> SlackMessage:
    """A job that died of a transient cause (`cause`: how it ended, mrkdwn), resumed by the bot
    in a new job: from its checkpoint, from the beginning when it saved none (None: unknown)."""
    how = {
        True: "Resuming from its last checkpoint",
        False: "It saved no checkpoint: restarting it from the beginning",
        None: "Resuming from its last checkpoint (from the beginning if it saved none)",
    }[from_checkpoint]
    return text_message(
        f":arrows_counterclockwise: Job `{run.job_id}` {cause}. {how} automatically "
        f"(attempt {attempt} of {budget})."
    )


STALL_LOG_CHARS = 1_500
"""How much of a stalled job's last lines its message shows."""
PHASE_WORDS = {
    "rollouts": "gathering rollouts",
    "training": "training",
    "validation": "validating",
}


def stalled_message(run: Run, data: Mapping[str, Any]) -> SlackMessage:
    """A stalled job (the runner's `stalled` event): how long it has been silent, what it was
    doing, its last lines, and *Restart from the last checkpoint* / *Keep waiting*."""
    idle = data.get("idle_s")
    silent = "a while"
    if isinstance(idle, int | float) and 0 <= idle < 10**8:  # NaN compares false
        silent = _duration(timedelta(seconds=idle))
    doing = PHASE_WORDS.get(str(data.get("phase")))
    step = data.get("last_step")
    after = f" after step {step}" if isinstance(step, int) and not isinstance(step, bool) else ""
    what = f" It was {doing}{after}." if doing else (f" Its last step was {step}." if after else "")
    lines = [
        f"<@{run.owner}> :zzz: Job `{run.job_id}` may be stalled: no output and no progress "
        f"for {silent}.{what}"
    ]
    tail = str(data.get("log_tail") or "")
    if tail.strip():
        lines.append(f"Its last lines:\n```{escape(_last_chars(tail, STALL_LOG_CHARS))}```")
    resumable = data.get("resumable") is not False  # the Ray executor says False
    lines.append(
        "*Restart from the last checkpoint* stops it (all its processes) and resumes it in a new "
        "job; *Keep waiting* leaves it running (I say so again only if it stalls after moving on)."
        if resumable
        else "It runs on the runner's Ray executor, where a job cannot resume from its "
        "checkpoints (they stay on the Ray node): *Cancel* stops it, and approving the script "
        "again runs it from the start; *Keep waiting* leaves it running (I say so again only if "
        "it stalls after moving on)."
    )
    text = "\n".join(lines)
    stop = (
        _button(RUN_STALL_RESTART_ACTION, "Restart from the last checkpoint", run, style="primary")
        if resumable
        else _button(RUN_CANCEL_ACTION, "Cancel", run, style="danger")
    )
    buttons: Block = {
        "type": "actions",
        "block_id": f"stalled:{run.public_id}",
        "elements": [stop, _button(RUN_STALL_WAIT_ACTION, "Keep waiting", run)],
    }
    return SlackMessage(clip(text, TEXT_LIMIT), [*sections(text)[: MAX_BLOCKS - 1], buttons])


def _last_chars(text: str, limit: int) -> str:
    # The end is what matters: where it stopped.
    return text if len(text) <= limit else "…" + text[-(limit - 1) :]


def followup_buttons(run: Run, *, succeeded: bool) -> Block:
    """Under a finished (or failed) run: *Run again with changes* (bot.runs.rerun) and, once it
    succeeded, *Try it* (bot.runs.trained_model.tryit) and *Compare with the previous run of this
    project* (bot.runs.compare), or, under a fine-tuning run, *Continue with RL from this model*
    (bot.runs.rerun); *Checkpoints and export* (bot.runs.trained_model.model_export) under a
    succeeded run and a stopped LocalBackend run that trained a step."""
    labels = [(RUN_RERUN_ACTION, "Run again with changes")]
    if succeeded or (run.backend != "serverless" and run.points):  # it may have checkpoints
        labels.append((RUN_CHECKPOINTS_ACTION, "Checkpoints and export"))
    if succeeded:
        labels.insert(0, (RUN_TRY_ACTION, "Try it"))
        if is_fine_tuning(run.points):  # a loss curve has no reward to compare
            labels.append((RUN_CONTINUE_RL_ACTION, "Continue with RL from this model"))
        else:
            labels.append((RUN_COMPARE_ACTION, "Compare with the previous run of this project"))
    return {
        "type": "actions",
        "block_id": f"followups:{run.public_id}",
        "elements": [_button(action, label, run) for action, label in labels],
    }


def runs_list_text(runs: Sequence[Run]) -> str:
    """`/train-rl runs`: a user's runs, one line each."""
    if not runs:
        return "You have no training runs yet."
    lines = [f"Your training runs ({len(runs)}):"]
    for run in runs:
        lines.append(
            f"• #{run.public_id} {STATE_EMOJI.get(run.state, '')} `{escape(run.script_name)}` "
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


SIMILARITY_METRIC = "val/reference_similarity"
"""What a fine-tuning script's validation logs: how close the model's replies to held-out rows
come to their reference replies (ART 0.5.18 computes no evaluation loss for SFT)."""


def is_fine_tuning(points: Sequence[Mapping[str, Any]]) -> bool:
    """Whether these are a fine-tuning (SFT) run's points: a loss, and no reward anywhere."""
    return any(p.get("loss") is not None for p in points) and not any(
        p.get("train") is not None or p.get("val") is not None for p in points
    )


def progress(run: Run) -> str:
    """` · step n, train/reward r, val/reward r` from the latest points ("" before any); for a
    fine-tuning run ` · step n, batch b of t, loss l, reference similarity s`."""
    latest = run.points[-1] if run.points else None
    if latest is None:
        return ""
    parts = [f"step {latest['step']}"]
    if is_fine_tuning(run.points):
        done, total = _latest(run.points, "batches_done"), _latest(run.points, "batches_total")
        if done is not None and total is not None:
            parts.append(f"batch {done:.0f} of {total:.0f}")
        names = (("loss", "loss {:.4f}"), ("similarity", "reference similarity {:.2f}"))
    else:
        names = (("train", "train/reward {:.3f}"), ("val", "val/reward {:.3f}"))
    for name, shown in names:
        value = _latest(run.points, name)
        if value is not None:
            parts.append(shown.format(value))
    return " · " + ", ".join(parts)


def _latest(points: Sequence[Mapping[str, Any]], name: str) -> float | None:
    return next((p[name] for p in reversed(points) if p.get(name) is not None), None)


def similarity_change(points: Sequence[Mapping[str, Any]]) -> str:
    """A fine-tuning run's before and after on its held-out rows: the base model's reference
    similarity (step 0) and the last checkpoint's ("" without both)."""
    scored = [p for p in points if isinstance(p.get("similarity"), int | float)]
    base = next((p for p in scored if p["step"] == 0), None)
    trained = [p for p in scored if p["step"] > 0]
    if base is None or not trained:
        return ""
    last = trained[-1]
    return (
        "*Before and after* (held-out rows: how close the replies come to the reference ones, "
        f"0 to 1): base model {base['similarity']:.2f}, step {last['step']} "
        f"{last['similarity']:.2f} ({last['similarity'] - base['similarity']:+.2f})"
    )


def _duration(delta: timedelta) -> str:
    seconds = int(delta.total_seconds())
    hours, rest = divmod(seconds, 3600)
    minutes, seconds = divmod(rest, 60)
    return f"{hours}h{minutes:02d}m" if hours else f"{minutes}m{seconds:02d}s"


# ---- before and after ----------------------------------------------------------------------

MAX_TABLE_METRICS = 8
"""Rows of the before-and-after table: val/reward, then the rollouts' own metrics by name."""
ART_VAL_BOOKKEEPING = frozenset({"trajectories", "reward_std_dev", "exception_rate"})
"""val/ numbers ART (or the progress line) adds by itself: not the script's metrics."""
METRIC_NAME_WIDTH = 14
VALUE_WIDTH = 8


def before_after_table(points: Sequence[Mapping[str, Any]], *, needs_base: bool = False) -> str:
    """The base model (step 0), the best checkpoint (highest val/reward) and the last one on the
    validation split, with each one's change from the base: a monospace block ("" without a
    trained checkpoint's validation, or without the base's when `needs_base`).

    Slack's mrkdwn has no tables, so the columns are aligned in a code block, narrow enough
    (about 40 characters) for a phone."""
    validated = [p for p in points if isinstance(p.get("val"), int | float)]
    base = next((p for p in validated if p["step"] == 0), None)
    trained = [p for p in validated if p["step"] > 0]
    if not trained or (needs_base and base is None):
        return ""
    best = max(trained, key=lambda p: (p["val"], p["step"]))
    last = max(trained, key=lambda p: p["step"])
    columns = [("base", base), (f"best@{best['step']}", best), (f"last@{last['step']}", last)]
    lines = ["val".ljust(METRIC_NAME_WIDTH) + "".join(n.rjust(VALUE_WIDTH) for n, _ in columns)]
    for name in _table_metrics([base, best, last]):
        values = [None if p is None else _val_metric(p, name) for _, p in columns]
        lines.append(_row(escape(clip(name, METRIC_NAME_WIDTH)), [_number(v) for v in values]))
        if values[0] is not None:
            changes = [None, *(None if v is None else v - values[0] for v in values[1:])]
            lines.append(_row("  vs base", [_change(c) for c in changes]))
    return (
        "*Before and after* (validation: base model, best checkpoint by val/reward, last)\n"
        "```" + "\n".join(lines) + "```"
    )


def _table_metrics(points: Sequence[Mapping[str, Any] | None]) -> list[str]:
    names: set[str] = set()
    for point in points:
        for key in (point or {}).get("val_metrics", {}):
            name = key.removeprefix("val/")
            if key.startswith("val/") and "/" not in name and name not in ART_VAL_BOOKKEEPING:
                names.add(name)
    names.discard("reward")
    return ["reward", *sorted(names)][:MAX_TABLE_METRICS]


def _val_metric(point: Mapping[str, Any], name: str) -> float | None:
    if name == "reward":
        return float(point["val"])
    value = point.get("val_metrics", {}).get(f"val/{name}")
    return float(value) if isinstance(value, int | float) else None


def _row(name: str, cells: Sequence[str]) -> str:
    return name.ljust(METRIC_NAME_WIDTH) + "".join(c.rjust(VALUE_WIDTH) for c in cells)


def _number(value: float | None) -> str:
    if value is None:
        return "-"
    return f"{value:.3f}" if abs(value) < 1_000 else f"{value:.3g}"


def _change(value: float | None) -> str:
    if value is None:
        return ""
    return f"{value:+.3f}" if abs(value) < 1_000 else f"{value:+.3g}"


def preflight_then(numbers: PreflightNumbers, points: Sequence[Mapping[str, Any]]) -> str:
    """What the preflight measured before training, beside what training reached: the last
    validation's mean reward, else the last step's training reward ("" with neither)."""
    validated = [p for p in points if isinstance(p.get("val"), int | float)]
    trained = [p for p in points if isinstance(p.get("train"), int | float)]
    if validated:
        now = (
            f"the last validation (step {validated[-1]['step']}) reached {validated[-1]['val']:.3f}"
        )
    elif trained:
        now = f"the last step ({trained[-1]['step']}) trained at {trained[-1]['train']:.3f}"
    else:
        return ""
    model = f"`{escape(numbers.model)}`" + ("" if numbers.base_model else " (a stand-in model)")
    return (
        f":stethoscope: Before training, the preflight on {model} measured a mean reward of "
        f"{numbers.mean_reward:.3f} over {numbers.rollouts} rollouts "
        f"({numbers.zero_variance_share:.0%} of its groups with zero variance); {now}."
    )


def _with_newline(text: str) -> str:
    return f"{text}\n" if text else ""
