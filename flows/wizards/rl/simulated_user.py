"""A simulated user for conversation tasks: a model that plays the customer (or any other person
the agent talks with), from instructions the user writes, each `{field}` in them filled from the
episode's scenario. The agent's text replies go to it, and its replies come back as the user's
turns, until the agent calls its final-answer tool, the simulated user says it is done, or the
turn limit comes."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from flows.conversation.validators import load_json
from flows.definition.steps import Answers, InvalidAnswer
from flows.wizards.rl.agent_prompt import known_fields

PLACEHOLDER = re.compile(r"\{([A-Za-z_][A-Za-z0-9_]{0,63})\}")
MIN_CHARS = 20
MAX_CHARS = 8000


def simulated_user(value: str, answers: Answers) -> dict[str, str]:
    """The simulated user's instructions; each `{field}` must be a field of the scenarios (when
    they are known here). The stored answer (a JSON object) reads back as itself."""
    text = value.strip()
    stored = _stored_answer(text)
    if stored is not None:
        if not stored:
            return {}
        text = stored
    if len(text) < MIN_CHARS:
        raise InvalidAnswer(
            "Describe who the simulated user is and what they want, in a sentence or more "
            "(e.g. `You are a customer whose order {order_id} arrived broken.`)."
        )
    if len(text) > MAX_CHARS:
        raise InvalidAnswer(f"That is {len(text):,} characters; keep it under {MAX_CHARS:,}.")
    fields = known_fields(answers)
    for name in PLACEHOLDER.findall(text):
        if fields is not None and name not in fields:
            raise InvalidAnswer(
                f"`{{{name}}}` is not a field of your scenarios; the fields: "
                f"{', '.join(f'`{f}`' for f in fields) or 'none'}."
            )
    return {"instructions": text}


def _stored_answer(text: str) -> str | None:
    """The instructions of a stored answer (`{}` for none: ""), or None for typed text (which
    may well begin with a `{field}`)."""
    if not text.startswith("{"):
        return None
    try:
        loaded = load_json(text, "JSON")
    except InvalidAnswer:
        return None
    if loaded == {}:
        return ""
    if isinstance(loaded, dict) and set(loaded) == {"instructions"}:
        return str(loaded["instructions"]).strip() or None
    raise InvalidAnswer('Expected {"instructions": "..."}, or {} for none.')


def simulated_user_display(value: Any) -> str:
    if isinstance(value, Mapping) and value.get("instructions"):
        first = str(value["instructions"]).splitlines()[0]
        return first if len(first) <= 120 else first[:119] + "…"
    return "none: the agent's answer ends the episode"


def has_simulated_user(answers: Answers) -> bool:
    """A simulated user was given (instructions, not `none`)."""
    value = answers.get("simulated_user")
    return isinstance(value, Mapping) and bool(value.get("instructions"))
