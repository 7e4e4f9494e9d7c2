"""What the model is told: ART knowledge shipped with artbot, the open question as the user sees
it (options, help, example) and the answers so far, each with keys and tokens removed."""

from __future__ import annotations

import functools
import json
from importlib import resources

from flows import Flow, Question, Session, begin, redact_secrets

MAX_ANSWER_CHARS = 300
"""An earlier answer is context, not content: long ones (code, data) are cut."""


KNOWLEDGE_FILES = {"train-rl": "knowledge.md", "train-sft": "knowledge_sft.md"}
"""Each wizard's notes, by flow id: its questions and what ART does there."""


@functools.cache
def art_knowledge(flow_id: str = "train-rl") -> str:
    """The compact notes on a wizard's questions and ART (knowledge.md for the RL wizard,
    knowledge_sft.md for fine-tuning; written from the project's specs and ART's skills)."""
    name = KNOWLEDGE_FILES[flow_id]
    return resources.files("assistant").joinpath(name).read_text(encoding="utf-8")


def open_question(flow: Flow, session: Session) -> Question | None:
    """The question the user sees now, or None when none is open."""
    if session.status != "active":
        return None
    return next((m for m in begin(flow, session).messages if isinstance(m, Question)), None)


def describe_question(flow: Flow, question: Question) -> str:
    """The open question as the user sees it, plus what a good answer looks like."""
    step = flow.step(question.step_id)
    lines = [f"Open question `{question.step_id}` ({question.kind}): {question.text}"]
    for option in question.options:
        about = f": {option.description}" if option.description else ""
        lines.append(f"  option {option.number}. value `{option.value}`: {option.label}{about}")
    if question.hint:
        lines.append(f"Hint: {question.hint}")
    if step.help:
        lines.append(f"Help: {step.help}")
    if step.example:
        lines.append(f"Example answer:\n{step.example}")
    return redact_secrets("\n".join(lines))


def answers_so_far(flow: Flow, session: Session) -> str:
    """The active answers as JSON (long ones cut), for context."""
    shown: dict[str, object] = {}
    for step_id, value in flow.active_answers(session.answers).items():
        text = value if isinstance(value, str) else json.dumps(value)
        shown[step_id] = text if len(text) <= MAX_ANSWER_CHARS else text[:MAX_ANSWER_CHARS] + "…"
    return redact_secrets(json.dumps(shown, indent=1, ensure_ascii=False))
