"""The best and the worst validation rollout of a step, from ART's own trajectory records.

ART 0.5.18's `Model.log(groups, split=..., step=...)` (art/model.py) writes every trajectory of
the call to `<art_path>/<project>/models/<name>/trajectories/<split>/<step:04d>.parquet`
(art/utils/trajectory_logging.py `write_trajectory_groups_parquet`, ZSTD): one row per
trajectory with `reward` (float64), `metrics` (a JSON object as text, or null) and `messages`, a
list of structs `{role, content, tool_calls (JSON text or null), tool_call_id, trainable}`;
`trainable` is true for the model's own turns. LocalBackend and ServerlessBackend both log
through `Model.log`, so both leave these files in the job's run folder.

The file is written in one `pq.write_table` call, not atomically: a reader can meet it half
written. Such a file does not parse (no footer yet) and is read again once its size changes.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

from runner.schemas import Rollout, RolloutMessage, ValidationRollouts

VAL_SPLIT = "val"
MAX_FILE_BYTES = 256 * 1024 * 1024
"""A trajectories file larger than this is not read (the runner's memory is shared)."""
MAX_MESSAGES = 40
"""Messages kept per rollout: the first MAX_MESSAGES // 4 (the task) and the last ones."""
MAX_CONTENT_CHARS = 6_000
"""Characters kept of one message's content (the start and the end, the middle cut)."""
MAX_TOOL_CALL_CHARS = 2_000
"""Characters kept of one message's tool calls, as JSON."""
MAX_METRICS = 30


def val_trajectory_files(model_folder: Path) -> dict[int, Path]:
    """The validation steps with a trajectories file: step -> path."""
    folder = model_folder / "trajectories" / VAL_SPLIT
    try:
        names = [path for path in folder.iterdir() if path.suffix == ".parquet"]
    except OSError:
        return {}
    return {int(path.stem): path for path in names if path.stem.isdigit()}


def read_rollouts(path: Path, step: int) -> ValidationRollouts | None:
    """The best and worst rollout of one trajectories file; None when it has none or does not
    parse (half written, or not ART's)."""
    import pyarrow.parquet as pq  # only where a validation was logged: the import is slow

    try:
        if path.stat().st_size > MAX_FILE_BYTES:
            return None
        table = pq.read_table(path, columns=["reward"])
        rewards = table.column("reward").to_pylist()
    except (OSError, ValueError, KeyError):  # pyarrow's errors derive from these
        return None
    scored = [
        (float(reward), row)
        for row, reward in enumerate(rewards)
        if isinstance(reward, int | float) and math.isfinite(reward)
    ]
    if not scored:
        return None
    best = max(scored, key=lambda item: item[0])[1]  # the first of equals: stable
    worst = min(scored, key=lambda item: item[0])[1]
    try:
        rows = pq.read_table(path, columns=["reward", "metrics", "messages"])
        best_row = rows.slice(best, 1).to_pylist()[0]
        worst_row = rows.slice(worst, 1).to_pylist()[0]
    except (OSError, ValueError, KeyError):
        return None
    return ValidationRollouts(
        step=step, count=len(scored), best=_rollout(best_row), worst=_rollout(worst_row)
    )


def _rollout(row: dict[str, Any]) -> Rollout:
    messages: list[dict[str, Any]] = [m for m in row.get("messages") or [] if isinstance(m, dict)]
    cut = len(messages) > MAX_MESSAGES
    if cut:
        head = MAX_MESSAGES // 4
        messages = messages[:head] + messages[-(MAX_MESSAGES - head) :]
    kept: list[RolloutMessage] = []
    for message in messages:
        content, content_cut = _middle_cut(str(message.get("content") or ""), MAX_CONTENT_CHARS)
        calls, calls_cut = _tool_calls(message.get("tool_calls"))
        cut = cut or content_cut or calls_cut
        kept.append(
            RolloutMessage(
                role=str(message.get("role") or "?")[:40],
                content=content,
                tool_calls=calls,
                tool_call_id=_short(message.get("tool_call_id")),
                trainable=bool(message.get("trainable")),
            )
        )
    return Rollout(
        reward=float(row["reward"]), metrics=_metrics(row.get("metrics")), messages=kept, cut=cut
    )


def _middle_cut(text: str, limit: int) -> tuple[str, bool]:
    if len(text) <= limit:
        return text, False
    half = limit // 2
    return f"{text[:half]}\n[... {len(text) - 2 * half} characters cut ...]\n{text[-half:]}", True


def _tool_calls(raw: Any) -> tuple[list[dict[str, Any]], bool]:
    """ART keeps the OpenAI tool calls as JSON text: `[{id, type, function: {name, arguments}}]`."""
    if not raw:
        return [], False
    try:
        calls = json.loads(raw) if isinstance(raw, str) else raw
    except ValueError:
        return [{"function": {"name": "?", "arguments": str(raw)[:MAX_TOOL_CALL_CHARS]}}], True
    kept: list[dict[str, Any]] = []
    cut = False
    for call in calls if isinstance(calls, list) else []:
        function = call.get("function") if isinstance(call, dict) else None
        if not isinstance(function, dict):
            continue
        arguments, was_cut = _middle_cut(str(function.get("arguments") or ""), MAX_TOOL_CALL_CHARS)
        cut = cut or was_cut
        kept.append(
            {"function": {"name": str(function.get("name") or "?")[:200], "arguments": arguments}}
        )
    return kept, cut


def _short(value: Any) -> str | None:
    return str(value)[:200] if value else None


def _metrics(raw: Any) -> dict[str, float | int | bool | None]:
    try:
        value = json.loads(raw) if isinstance(raw, str) else {}
    except ValueError:
        return {}
    metrics: dict[str, float | int | bool | None] = {}
    for name, number in (value if isinstance(value, dict) else {}).items():
        if len(metrics) >= MAX_METRICS:
            break
        if isinstance(number, bool | int) or (isinstance(number, float) and math.isfinite(number)):
            metrics[str(name)[:100]] = number
    return metrics
