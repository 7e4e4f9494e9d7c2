"""RULER's judge: the models the wizard offers, and the OpenAI models that OpenAI has shut down or
announced it will shut down, with their dates.

Checked against OpenAI's deprecations page (https://developers.openai.com/api/docs/deprecations)
and its model list on 2026-11-27. A shut-down judge is refused (every RULER call would fail); a
deprecated one is taken with a warning, since a run may outlive it. Keep both lists current.
"""

from __future__ import annotations

from datetime import date

from flows.conversation.validators import litellm_model_id
from flows.definition.steps import Answers, InvalidAnswer

JUDGE_MODELS = ("openai/gpt-5.4", "openai/gpt-5.5", "openai/gpt-5.4-mini")
"""Offered in this order, the first recommended: all current on OpenAI's model list."""

DEPRECATIONS_CHECKED = date(2026, 11, 27)

_OCT_23_2026 = date(2026, 10, 23)
_DEC_11_2026 = date(2026, 12, 11)
_JAN_14_2027 = date(2027, 1, 14)

OPENAI_SHUTDOWNS: dict[str, date] = {
    # Shut down on 2026-10-23.
    **dict.fromkeys(
        (
            "o4-mini",
            "o4-mini-2025-04-16",
            "o3-mini",
            "o3-mini-2025-01-31",
            "o1",
            "o1-2024-12-17",
            "o1-pro",
            "o1-pro-2025-03-19",
            "gpt-3.5-turbo",
            "gpt-3.5-turbo-0125",
            "gpt-4",
            "gpt-4-0613",
            "gpt-4-1106-preview",
            "gpt-4-turbo",
            "gpt-4-turbo-2024-04-09",
            "gpt-4o-2024-05-13",
            "gpt-4.1-nano",
            "gpt-4.1-nano-2025-04-14",
        ),
        _OCT_23_2026,
    ),
    "gpt-5.2-chat-latest": date(2026, 8, 10),
    "gpt-5.3-chat-latest": date(2026, 8, 10),
    # Deprecated on 2026-06-11, shutting down on 2026-12-11.
    **dict.fromkeys(
        (
            "o3",
            "o3-2025-04-16",
            "o3-pro",
            "gpt-5",
            "gpt-5-2025-08-07",
            "gpt-5-mini",
            "gpt-5-mini-2025-08-07",
            "gpt-5-nano",
            "gpt-5-nano-2025-08-07",
            "gpt-5-pro",
        ),
        _DEC_11_2026,
    ),
    # Deprecated on 2026-10-14, shutting down on 2027-01-14.
    **dict.fromkeys(
        (
            "gpt-4o",
            "gpt-4o-2024-08-06",
            "gpt-4o-2024-11-20",
            "gpt-4o-mini",
            "gpt-4o-mini-2024-07-18",
            "gpt-4.1",
            "gpt-4.1-2025-04-14",
            "gpt-4.1-mini",
            "gpt-4.1-mini-2025-04-14",
        ),
        _JAN_14_2027,
    ),
}


def shutdown_date(model_id: str) -> date | None:
    """When OpenAI shuts this LiteLLM id's model down (`openai/<model>`), if it has said so."""
    provider, _, name = model_id.partition("/")
    return OPENAI_SHUTDOWNS.get(name.lower()) if provider.lower() == "openai" else None


def today() -> date:
    """The date a judge's shutdown is compared with (tests set it)."""
    return date.today()


def judge_model_id(value: str, answers: Answers) -> str:
    """Another model (RULER's judge, a simulated user) as a LiteLLM id; refused when OpenAI has
    shut that model down."""
    model = litellm_model_id(value, answers)
    shutdown = shutdown_date(model)
    if shutdown is not None and shutdown <= today():
        raise InvalidAnswer(
            f"OpenAI shut `{model}` down on {shutdown.isoformat()} (its deprecations page), "
            f"so every call to it would fail. Choose a current model, e.g. "
            f"{' or '.join(f'`{m}`' for m in JUDGE_MODELS[:2])}."
        )
    return model


def judge_caution(answers: Answers) -> str | None:
    """A warning for a judge that OpenAI has deprecated but not yet shut down."""
    model = answers.get("judge_model")
    shutdown = shutdown_date(model) if isinstance(model, str) else None
    if shutdown is None or shutdown <= today():
        return None
    return (
        f"Note: OpenAI has deprecated `{model}` and shuts it down on {shutdown.isoformat()}; "
        "a run still going then loses its judge. Say `edit judge model` to pick a current "
        f"one, e.g. `{JUDGE_MODELS[0]}`."
    )
