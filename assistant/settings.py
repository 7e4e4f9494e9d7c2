"""The assistant's settings (`ARTBOT_LLM_*`), the same for `artbot chat` and `artbot serve`.
No `ARTBOT_LLM_MODEL`: no assistant, and the wizard is the plain form it always was."""

from __future__ import annotations

from collections.abc import Mapping

from pydantic import Field, SecretStr, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from config.from_environment import SettingsError, load_from_environment

PREFIX = "ARTBOT_LLM_"
NO_KEY = "unused"
"""What the client sends when an OpenAI-compatible server (vLLM) needs no key."""


class AssistantSettings(BaseSettings):
    """Which model answers, where, and how much of it each user may use. The key is a
    SecretStr: it never prints."""

    model_config = SettingsConfigDict(env_prefix=PREFIX, case_sensitive=False, extra="ignore")

    model: str = Field(
        min_length=1,
        description="the model id, e.g. gpt-5.4-mini; unset: no assistant, and no other "
        "ARTBOT_LLM_* setting is read",
    )
    base_url: str | None = Field(
        default=None, description="an OpenAI-compatible server's /v1 URL (default: OpenAI's)"
    )
    api_key: SecretStr | None = Field(
        default=None, description="the server's API key (default: OPENAI_API_KEY)"
    )
    timeout_s: float = Field(
        default=20.0,
        gt=0,
        le=300,
        description="how long one model call may take before the plain question is asked",
    )
    requests_per_minute: int = Field(
        default=10, ge=1, le=10_000, description="model calls one user may make per minute"
    )
    tokens_per_day: int = Field(
        default=200_000, ge=1, description="tokens one user's model calls may use per day"
    )

    @field_validator("base_url")
    @classmethod
    def _http_url(cls, value: str | None) -> str | None:
        if value is not None and not value.startswith(("http://", "https://")):
            raise ValueError("must be an http:// or https:// URL")
        return value

    def key(self) -> str:
        return self.api_key.get_secret_value() if self.api_key is not None else NO_KEY


def load_assistant_settings(env: Mapping[str, str]) -> AssistantSettings | None:
    """The settings in `env`, or None when no model is configured (the assistant is off).
    `ARTBOT_LLM_API_KEY` falls back to `OPENAI_API_KEY`; OpenAI itself needs one of them.
    Raises SettingsError listing every problem."""
    values = {key.upper(): value for key, value in env.items()}
    if not values.get(PREFIX + "MODEL", "").strip():
        return None
    if not values.get(PREFIX + "API_KEY") and values.get("OPENAI_API_KEY"):
        values[PREFIX + "API_KEY"] = values["OPENAI_API_KEY"]
    settings = load_from_environment(
        AssistantSettings, values, prefix=PREFIX, program="the assistant"
    )
    if settings.api_key is None and settings.base_url is None:
        raise SettingsError(
            "Cannot start the assistant:\n  ARTBOT_LLM_API_KEY: missing (or OPENAI_API_KEY): "
            "OpenAI needs a key; set ARTBOT_LLM_BASE_URL for a server that needs none"
        )
    return settings
