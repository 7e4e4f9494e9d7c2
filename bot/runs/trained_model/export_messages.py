"""What *Checkpoints and export* shows (bot.runs.trained_model.model_export): the list of a run's
checkpoints with its controls, the export modal and its repository check, and what the thread is
told when an export is done or failed, or where a ServerlessBackend run's checkpoints are."""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from bot.runs.store import Run
from bot.slack.blocks import (
    MAX_BLOCKS,
    RUN_CHOOSE_CHECKPOINT_ACTION,
    RUN_DOWNLOAD_ACTION,
    RUN_EXPORT_ACTION,
    RUN_EXPORT_MODAL,
    SlackMessage,
    sections,
    text_message,
)
from bot.slack.text import clip, escape
from runner.schemas import CheckpointInfo, Checkpoints, Export, ExportState

REPO_BLOCK, REPO_INPUT = "repo", "repo_id"
PUBLIC_BLOCK, PUBLIC_INPUT = "visibility", "public"
PUBLIC_OPTION = "public"
REPO_PART = r"(?!.*(?:--|\.\.))[A-Za-z0-9](?:[A-Za-z0-9._-]{0,94}[A-Za-z0-9])?"
REPO_ID = re.compile(rf"{REPO_PART}/{REPO_PART}")
"""A Hub repository id as the Hub takes it: `namespace/name`, each part 1-96 characters of
letters, digits, `.`, `_` and `-`, not starting or ending with `.` or `-`, no `--` or `..`."""
MAX_REPO_ID_CHARS = 96 * 2 + 1
LISTED_CHECKPOINTS = 30
"""How many checkpoints the thread lists (the best and the latest ones); the choice offers up
to Slack's 100 options."""
MAX_OPTIONS = 100


def repo_id_problem(repo_id: str) -> str | None:
    """Why `repo_id` is not a Hub repository id the runner can create; None when it is."""
    if not repo_id:
        return "Name the repository, as `your-name/your-model` or `your-org/your-model`."
    if len(repo_id) > MAX_REPO_ID_CHARS or not REPO_ID.fullmatch(repo_id):
        return (
            "A repository is `namespace/name`: letters, digits, `.`, `_` and `-`, up to 96 "
            "each, not starting or ending with `.` or `-`, and no `--` or `..`."
        )
    return None


def checkpoints_message(run: Run, listed: Checkpoints) -> SlackMessage:
    """The checkpoints (the best and latest ones when there are many), the model marked, and the
    controls: the choice of another step, export, download."""
    shown = _shown(listed.checkpoints, listed.best_step, LISTED_CHECKPOINTS)
    about = [f"`{escape(listed.model)}`"] if listed.model else []
    if listed.base_model:
        about.append(f"on `{escape(listed.base_model)}`")
    head = f"*Checkpoints of run #{run.public_id}*" + (f" ({' '.join(about)})" if about else "")
    lines = [f"{head}:"]
    for checkpoint in shown:
        marks = []
        if checkpoint.step == listed.best_step:
            marks.append(":star: best")
        if checkpoint.step == listed.model_step:
            marks.append("*the model*")
        lines.append(
            f"\u2022 step {checkpoint.step}: val/reward {reward_text(checkpoint.val_reward)}, "
            f"train/reward {reward_text(checkpoint.train_reward)}, {_size(checkpoint.size_bytes)}"
            + (f"  \u2190 {', '.join(marks)}" if marks else "")
        )
    if len(shown) < len(listed.checkpoints):
        lines.append(f"_{len(listed.checkpoints) - len(shown)} more not listed._")
    how = "chosen by you" if listed.chosen_step is not None else "the best val/reward"
    if listed.chosen_step is None and all(c.val_reward is None for c in listed.checkpoints):
        how = "the last one: no checkpoint has a val/reward"
    lines.append(
        f"The model is step {listed.model_step} ({how}): `try`, export and download use it."
    )
    text = "\n".join(lines)
    options = [
        {
            "text": {
                "type": "plain_text",
                "text": f"step {c.step} · val {reward_text(c.val_reward)}",
            },
            "value": f"{run.public_id}:{c.step}",
        }
        for c in _shown(listed.checkpoints, listed.best_step, MAX_OPTIONS)
    ]
    controls: dict[str, Any] = {
        "type": "actions",
        "block_id": f"checkpoints:{run.public_id}",
        "elements": [
            {
                "type": "static_select",
                "action_id": RUN_CHOOSE_CHECKPOINT_ACTION,
                "placeholder": {"type": "plain_text", "text": "Make another step the model"},
                "options": options,
            },
            _button(RUN_EXPORT_ACTION, "Export to Hugging Face", run),
            _button(RUN_DOWNLOAD_ACTION, "Download the adapter", run),
        ],
    }
    return SlackMessage(text, [*sections(text)[: MAX_BLOCKS - 1], controls])


def exported_message(run: Run, export: Export, base_model: str | None) -> SlackMessage:
    """Where the adapter went and how to load it, or why it did not go."""
    repo = escape(export.repo_id)
    if export.state is not ExportState.done:
        reason = escape(clip(export.error or "no reason given", 1_500))
        return text_message(f":x: The export to `{repo}` failed: {reason}")
    where = f"<{escape(export.url)}|{repo}>" if export.url else f"`{repo}`"
    visibility = "private" if export.private else "public"
    base = escape(base_model or "<the base model>")
    name = escape(run.script_name.removesuffix(".py").replace("_", "-")) or "agent"
    text = (
        f"<@{run.owner}> :white_check_mark: Step {export.step}'s LoRA adapter of run "
        f"#{run.public_id} is on the Hugging Face Hub: {where} ({visibility}).\n"
        f"*PEFT*\n```from peft import PeftModel\nfrom transformers import AutoModelForCausalLM\n\n"
        f'base = AutoModelForCausalLM.from_pretrained("{base}")\n'
        f'model = PeftModel.from_pretrained(base, "{repo}")```\n'
        f"*vLLM*\n```vllm serve {base} --enable-lora --lora-modules {name}={repo}```"
    )
    return text_message(text)


def serverless_checkpoints(run: Run) -> str:
    """Where a ServerlessBackend run's checkpoints live: W&B artifacts of type `lora`."""
    model = str((run.result or {}).get("model") or "")
    found = re.fullmatch(r"wandb-artifact:///([^/\s]+)/([^/\s]+)/([^/:\s]+)(?::(\S+))?", model)
    if found is None:
        return (
            f"Run #{run.public_id} trained with ServerlessBackend: its checkpoints are W&B "
            "artifacts of its project (type `lora`), not on a runner."
        )
    entity, project, name, version = found.groups()
    alias = version or "latest"
    url = f"https://wandb.ai/{entity}/{project}/artifacts/lora/{name}/{alias}"
    return (
        f"Run #{run.public_id} trained with ServerlessBackend: each checkpoint is already a W&B "
        f"artifact, served as `{escape(model)}`. The model: <{escape(url)}|{escape(name)}:"
        f"{escape(alias)}>. Download it with "
        f"`wandb artifact get {escape(entity)}/{escape(project)}/{escape(name)}:{escape(alias)}`."
    )


def export_modal(run: Run) -> dict[str, Any]:
    """The export modal: the repository, and whether it is public (private by default). Its
    private_metadata is the run's public id and its channel (bot.process.routing)."""
    return {
        "type": "modal",
        "callback_id": RUN_EXPORT_MODAL,
        "private_metadata": f"{run.public_id} {run.key.channel}",
        "title": {"type": "plain_text", "text": "Export to Hugging Face"},
        "submit": {"type": "plain_text", "text": "Export"},
        "close": {"type": "plain_text", "text": "Close"},
        "blocks": [
            {
                "type": "input",
                "block_id": REPO_BLOCK,
                "label": {"type": "plain_text", "text": "Repository (created if missing)"},
                "hint": {
                    "type": "plain_text",
                    "text": "The runner's Hugging Face token must be able to write there.",
                },
                "element": {
                    "type": "plain_text_input",
                    "action_id": REPO_INPUT,
                    "placeholder": {"type": "plain_text", "text": "your-org/your-agent"},
                    "max_length": MAX_REPO_ID_CHARS,
                },
            },
            {
                "type": "input",
                "block_id": PUBLIC_BLOCK,
                "optional": True,
                "label": {"type": "plain_text", "text": "Visibility"},
                "element": {
                    "type": "checkboxes",
                    "action_id": PUBLIC_INPUT,
                    "options": [
                        {
                            "text": {"type": "plain_text", "text": "Make the repository public"},
                            "value": PUBLIC_OPTION,
                        }
                    ],
                },
            },
        ],
    }


def chosen_checkpoint(value: str) -> tuple[str, int] | None:
    """A choice's option value `<run's public id>:<step>`; None when it is not one."""
    public_id, _, step = value.partition(":")
    if not public_id or not step.isdigit() or len(step) > 9:
        return None
    return public_id, int(step)


def _shown(
    checkpoints: Sequence[CheckpointInfo], best: int | None, limit: int
) -> list[CheckpointInfo]:
    """The best and the latest checkpoints, at most `limit`, in step order."""
    if len(checkpoints) <= limit:
        return list(checkpoints)
    latest = list(checkpoints[-limit:])
    if best is not None and all(c.step != best for c in latest):
        latest = [c for c in checkpoints if c.step == best] + latest[1:]
    return sorted(latest, key=lambda c: c.step)


def at_step(checkpoints: Sequence[CheckpointInfo], step: int) -> CheckpointInfo | None:
    return next((c for c in checkpoints if c.step == step), None)


def served_name(listed: Checkpoints, step: int) -> str:
    return f"{listed.model}@{step}" if listed.model else f"step {step}"


def reward_text(value: float | None) -> str:
    return "\u2014" if value is None else f"{value:.3f}"


def _size(size: int) -> str:
    if size < 1024:
        return f"{size:,} bytes"
    kib = size / 1024
    return f"{kib:,.1f} KB" if kib < 1024 else f"{kib / 1024:,.1f} MB"


def _button(action_id: str, label: str, run: Run) -> dict[str, Any]:
    return {
        "type": "button",
        "action_id": action_id,
        "text": {"type": "plain_text", "text": label},
        "value": run.public_id,
    }
