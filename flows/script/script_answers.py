"""The answers a script is rendered from: the active ones, with the default of each optional
question left unanswered; a RenderError names the questions still open."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from flows.definition.flow import Flow
from flows.definition.steps import InvalidAnswer, Text


class RenderError(ValueError):
    """The answers cannot make a script (missing or inconsistent); says which answer."""


def script_answers(flow: Flow, answers: Mapping[str, Any]) -> dict[str, Any]:
    """`flow`'s active answers, with defaults where an optional question has none (a session
    finished before that question existed renders as if its default had been taken)."""
    complete = flow.active_answers(answers)
    for step in flow.active_steps(complete):
        if step.id not in complete and isinstance(step, Text) and step.default is not None:
            try:
                complete[step.id] = step.default(complete)
            except InvalidAnswer:
                continue  # no default for these answers: it stays missing, and says so
    missing = [s.id for s in flow.active_steps(complete) if s.id not in complete]
    if missing:
        raise RenderError(f"these questions are not answered yet: {', '.join(missing)}")
    return complete
