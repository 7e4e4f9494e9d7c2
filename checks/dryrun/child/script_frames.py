"""The script's own frames in a traceback or a stack: what the dry run reports of where it was.

The bootstrap's frames and the libraries' are noise to someone fixing the script.
"""

from __future__ import annotations

import asyncio
import traceback
from pathlib import Path
from types import FrameType, TracebackType


def script_traceback(error: BaseException, script: Path) -> str:
    """The traceback from the script's first frame on: the bootstrap's frames are noise."""
    tb: TracebackType | None = error.__traceback__
    while tb is not None and Path(tb.tb_frame.f_code.co_filename) != script:
        tb = tb.tb_next
    return "".join(traceback.format_exception(type(error), error, tb or error.__traceback__))


def _script_lines(frames: list[FrameType], script: Path) -> str:
    """The script's own frames of a stack, innermost last, plus the innermost frame at all."""
    summary = traceback.StackSummary.extract(
        ((f, f.f_lineno) for f in frames), limit=None, lookup_lines=True
    )
    kept = [entry for entry in summary if Path(entry.filename) == script]
    if summary and (not kept or kept[-1] is not summary[-1]):
        kept.append(summary[-1])
    return "".join(traceback.format_list(kept))


def where_it_is(frame: FrameType | None, script: Path) -> str:
    """Where the script's code is: its main thread, and every pending asyncio task."""
    parts: list[str] = []
    stack: list[FrameType] = []
    while frame is not None:
        stack.insert(0, frame)
        frame = frame.f_back
    if any(Path(f.f_code.co_filename) == script for f in stack):
        parts.append("main thread:\n" + _script_lines(stack, script))
    loop = asyncio.events._get_running_loop()
    waiting: dict[str, int] = {}
    for task in asyncio.all_tasks(loop) if loop is not None else ():
        # Task stacks run outermost first for a suspended coroutine chain.
        text = _script_lines(task.get_stack(limit=None), script)
        if str(script) in text:
            waiting[text] = waiting.get(text, 0) + 1
    if waiting:
        # The tasks say more than the event loop's own frames on the main thread.
        parts = [f"{count} asyncio task(s) at:\n{text}" for text, count in waiting.items()][:5]
    return "\n".join(parts) or "(not inside the script's code)"
