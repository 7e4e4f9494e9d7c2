"""Where an RL run starts when it continues a finished SFT run: the `start_from` answer, which no
question asks (flows.definition.flow.Given). It names the SFT model that the script forks (ART
0.5.18's experimental `_experimental_fork_checkpoint`) and settles the base model and the
backend, which must be the SFT run's."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from flows.conversation import validators as v
from flows.definition.flow import Given
from flows.definition.steps import Answers, InvalidAnswer, Parse
from flows.wizards.shared_steps import BASE_MODELS

START_FROM = "start_from"
FIELDS = ("model", "project", "base_model", "backend")
"""The SFT run's model name and project (what the fork copies from), base model and backend."""
OPTIONAL_FIELDS = ("run",)
"""How the adapter that started the SFT run knows it (the bot's run id): where a runner finds the
SFT model's files. Never in the script."""
BACKENDS = {"local": "LocalBackend", "serverless": "ServerlessBackend"}
SETTLED = ("base_model", "backend")
"""The questions a start settles: the RL model forks a LoRA checkpoint of the SFT model, so it
has the same base model, and the same backend holds that checkpoint (the art path or W&B)."""


def parse_start_from(value: Any) -> dict[str, str]:
    """`value` checked as a start: exactly FIELDS, the names safe as a run's own (letters, digits,
    `.`, `_`, `-`), a base model ART recommends and a backend; raises InvalidAnswer."""
    if not isinstance(value, Mapping) or not set(FIELDS) <= set(value) <= {
        *FIELDS,
        *OPTIONAL_FIELDS,
    }:
        raise InvalidAnswer(f"A start names exactly {', '.join(FIELDS)} (and maybe its run).")
    start = {key: value[key] for key in (*FIELDS, *OPTIONAL_FIELDS) if key in value}
    if not all(isinstance(item, str) for item in start.values()):
        raise InvalidAnswer("A start's values are names.")
    for key in ("model", "project", *OPTIONAL_FIELDS):
        if key in start and v.slug()(start[key], {}) != start[key]:
            raise InvalidAnswer(f"The SFT run's {key} name {start[key]!r} is not a safe name.")
    if start["base_model"] not in BASE_MODELS:
        raise InvalidAnswer(f"{start['base_model']!r} is not a base model the wizard offers.")
    if start["backend"] not in BACKENDS:
        raise InvalidAnswer(f"{start['backend']!r} is not a backend.")
    return start


def settled_answers(start: Mapping[str, str]) -> dict[str, str]:
    """The answers a start gives the questions it settles."""
    return {step_id: start[step_id] for step_id in SETTLED}


def shown_start(start: Any) -> str:
    if not isinstance(start, Mapping):
        return str(start)
    return f"the SFT model `{start.get('model')}` of project `{start.get('project')}`"


START_FROM_SFT = Given(
    START_FROM,
    "Starts from",
    parse=parse_start_from,
    fills=settled_answers,
    display=shown_start,
)


def start_of(answers: Answers) -> Mapping[str, str] | None:
    """The start these answers carry, or None (an ordinary RL run, from the base model)."""
    start = answers.get(START_FROM)
    return start if isinstance(start, Mapping) else None


def recommend_start(step_id: str) -> Callable[[Answers], str | None]:
    """The SFT run's answer to `step_id` as the recommendation, when the run continues one."""
    return lambda answers: (start or {}).get(step_id) if (start := start_of(answers)) else None


def same_as_start(step_id: str) -> Callable[[str, Answers], None]:
    """A check of a settled question reopened by `edit`: only the SFT run's answer is right."""

    def check(value: str, answers: Answers) -> None:
        start = start_of(answers)
        if start is None or value == start.get(step_id):
            return
        what = "base model" if step_id == "base_model" else "backend"
        wanted = BACKENDS.get(start[step_id], start[step_id])
        raise InvalidAnswer(
            f"This run continues {shown_start(start)}: RL forks its checkpoint, so the {what} "
            f"must be the SFT run's, {wanted}."
        )

    return check


def not_the_sft_model(parse: Parse) -> Parse:
    """`parse` for the run's name, refusing the SFT model's own name in its project: the fork
    makes a new model, and a model with checkpoints of its own is never forked."""

    def checked(value: str, answers: Answers) -> str:
        name = parse(value, answers)
        start = start_of(answers)
        if start is not None and (name, answers.get("project")) == (
            start["model"],
            start["project"],
        ):
            raise InvalidAnswer(
                f"`{name}` is the SFT model's name in this project: the RL run forks it into a "
                "model of its own, so give it another name."
            )
        return name

    return checked
