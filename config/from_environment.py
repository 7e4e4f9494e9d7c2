"""Settings from environment variables, with one message listing every problem.

settings = load_from_environment(
    RunnerSettings, env, prefix="ARTBOT_RUNNER_", program="the runner"
)
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TypeVar

from pydantic import ValidationError
from pydantic_core import ErrorDetails
from pydantic_settings import BaseSettings

Settings = TypeVar("Settings", bound=BaseSettings)


class SettingsError(Exception):
    """Settings that cannot work; the message lists every problem, one per line."""


def load_from_environment(
    model: type[Settings], env: Mapping[str, str] | None, *, prefix: str, program: str
) -> Settings:
    """`model` read from `env` (default: the process environment), each field from the variable
    `prefix` + its name in capitals; SettingsError says what is missing or wrong, and why."""
    try:
        if env is None:
            return model()  # pyright: ignore[reportCallIssue]
        values = {
            key[len(prefix) :].lower(): value
            for key, value in env.items()
            if key.upper().startswith(prefix.upper())
        }
        return model.model_validate(values)
    except ValidationError as error:
        lines = [_explain(model, prefix, problem) for problem in error.errors()]
        raise SettingsError(
            f"Cannot start {program}:\n" + "\n".join(f"  {line}" for line in lines)
        ) from None


def _explain(model: type[BaseSettings], prefix: str, problem: ErrorDetails) -> str:
    name = ".".join(str(part) for part in problem["loc"])
    message = problem["msg"].removeprefix("Value error, ")
    if problem["type"] == "missing":
        field = model.model_fields.get(name)
        message = f"missing ({field.description})" if field and field.description else "missing"
    # A check across fields (a model validator) has no field to name.
    return f"{prefix}{name.upper()}: {message}" if name else f"settings: {message}"
