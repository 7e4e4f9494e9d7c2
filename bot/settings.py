"""The bot's settings, from the environment. Missing or invalid ones stop startup, saying why.

`artbot serve` reads one tree, `ServeSettings`: the bot's own (`BotSettings`, the token keys
among them) and the assistant's (`ARTBOT_LLM_*`, None when no model is set), with every problem
of both in one message."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

from pydantic import Field, SecretStr, field_validator, model_validator
from pydantic_settings import SettingsConfigDict

from assistant import AssistantSettings, load_assistant_settings
from bot.workspaces.token_keys import TokenKeySettings
from checks.preflight.endpoint import base_url_problem
from config.from_environment import SettingsError, load_from_environment

MAX_WORKERS = 16

__all__ = [
    "BotSettings",
    "ServeSettings",
    "SettingsError",
    "load_serve_settings",
    "load_settings",
]


class BotSettings(TokenKeySettings):
    """`artbot serve`'s configuration. Secrets are SecretStr: they never print. The token keys
    (ARTBOT_TOKEN_KEYS) come from TokenKeySettings, which `artbot db` reads alone."""

    model_config = SettingsConfigDict(env_prefix="", case_sensitive=False, extra="ignore")

    slack_bot_token: SecretStr | None = Field(
        default=None, description="the bot token, xoxb-...: one workspace (else OAuth)"
    )
    slack_client_id: str | None = Field(
        default=None, description="the app's client id: any workspace installs it (OAuth)"
    )
    slack_client_secret: SecretStr | None = Field(
        default=None, description="the app's client secret (OAuth)"
    )
    slack_redirect_uri: str | None = Field(
        default=None,
        description="https://YOUR-HOST/slack/oauth_redirect, if the app lists several (OAuth)",
    )
    slack_signing_secret: SecretStr | None = Field(
        default=None, description="verifies Slack's HTTP requests (HTTP mode)"
    )
    slack_app_token: SecretStr | None = Field(
        default=None, description="xapp-...: Socket Mode instead of HTTP"
    )
    slack_api_url: str | None = Field(
        default=None, description="another base URL for Slack's Web API (tests, proxies)"
    )
    artbot_database_url: str | None = Field(
        default=None, description="SQLAlchemy URL of the session store"
    )
    artbot_session_idle_hours: float = Field(
        default=72.0, gt=0, description="idle sessions expire after this"
    )
    artbot_max_upload_bytes: int = Field(
        default=1_000_000,
        gt=0,
        le=20_000_000,
        description="the largest file the bot downloads from a thread",
    )
    artbot_dryrun: bool = Field(
        default=True, description="dry-run generated scripts before posting them"
    )
    artbot_allow_unsandboxed_code: bool = Field(
        default=False,
        description="run Slack users' code (dry runs, drafts) even where this host cannot "
        "sandbox it (no bubblewrap or user namespaces): only for a single trusted team",
    )
    artbot_scripts_dir: str | None = Field(
        default=None, description="where generated scripts are kept"
    )
    port: int = Field(
        default=3000,
        ge=1,
        le=65535,
        description="the HTTP port of `artbot serve` (`--port` overrides it)",
    )
    artbot_workers: int = Field(
        default=1,
        ge=1,
        le=MAX_WORKERS,
        description="bot processes in HTTP mode, each owning some channels' conversations",
    )
    artbot_preflight_base_url: str | None = Field(
        default=None,
        description="an OpenAI-compatible endpoint for the result card's *Preflight* button "
        "(ideally serving the base model; another model stands in, and the report says so); "
        "none: no button",
    )
    artbot_preflight_model: str | None = Field(
        default=None, description="the model the preflight endpoint is asked for"
    )
    artbot_preflight_api_key: SecretStr | None = Field(
        default=None,
        description="the preflight endpoint's API key (sent by the bot alone, never to the "
        "sandboxed script)",
    )
    artbot_runner_url: str | None = Field(default=None, description="the GPU runner's base URL")
    artbot_runner_token: SecretStr | None = Field(
        default=None, description="the runner's bearer token"
    )
    artbot_approvers: str = Field(
        default="",
        description="comma-separated user ids allowed to approve (empty: any session owner "
        "with one workspace; with OAuth, see ARTBOT_APPROVAL)",
    )
    artbot_approval: Literal["approvers", "admins", "anyone"] | None = Field(
        default=None,
        description="who may approve a run: approvers (ARTBOT_APPROVERS), admins (each "
        "workspace's admins and owners, and ARTBOT_APPROVERS) or anyone; unset: approvers when "
        "listed, else anyone with one workspace and nobody with OAuth",
    )
    artbot_runner_channels: str = Field(
        default="",
        description="comma-separated channel ids where runs may be approved (empty: any)",
    )
    wandb_api_key: SecretStr | None = Field(
        default=None,
        description="W&B key: `try <prompt>` calls a trained ServerlessBackend model with it",
    )
    artbot_try_timeout_s: float = Field(
        default=60.0, gt=0, le=600, description="how long `try <prompt>` waits for the model"
    )
    artbot_try_start_timeout_s: float = Field(
        default=1800.0,
        gt=0,
        le=3 * 3600,
        description="how long `try` on a LocalBackend run waits for the runner to start serving "
        "its model (vLLM loads the base model first)",
    )
    artbot_try_per_user: int = Field(
        default=5,
        ge=1,
        le=10_000,
        description="`try` prompts one person may send per ARTBOT_TRY_WINDOW_S",
    )
    artbot_try_per_workspace: int = Field(
        default=20,
        ge=1,
        le=100_000,
        description="`try` prompts one workspace may send per ARTBOT_TRY_WINDOW_S",
    )
    artbot_try_window_s: float = Field(
        default=60.0, gt=0, le=24 * 3600, description="the window of the `try` rate limits"
    )
    artbot_try_threads: int = Field(
        default=8,
        ge=1,
        le=256,
        description="threads of a bot process that call trained models for `try` (a pool of "
        "their own: never the listeners')",
    )
    artbot_try_in_flight_per_workspace: int = Field(
        default=4,
        ge=1,
        le=10_000,
        description="`try` prompts of one workspace waiting for or on a model at once; more "
        "are refused",
    )
    artbot_auto_resume_max: int = Field(
        default=2,
        ge=0,
        le=20,
        description="how many times in a row a job that died of a transient cause (vLLM's engine "
        "died, a CUDA or NCCL error that is not an OOM, the runner lost it) is resumed from its "
        "last checkpoint by itself; 0: never",
    )
    artbot_runner_poll_s: float = Field(
        default=2.0,
        gt=0,
        le=60,
        description="how often the run follower retries submissions and looks for new runs "
        "(events themselves come through the runner's long-poll at once)",
    )

    @field_validator("slack_bot_token")
    @classmethod
    def _bot_token_shape(cls, value: SecretStr | None) -> SecretStr | None:
        if value is not None and not value.get_secret_value().startswith("xoxb-"):
            raise ValueError("must be a bot token starting with xoxb-")
        return value

    @field_validator("slack_app_token")
    @classmethod
    def _app_token_shape(cls, value: SecretStr | None) -> SecretStr | None:
        if value is not None and not value.get_secret_value().startswith("xapp-"):
            raise ValueError("must be an app-level token starting with xapp-")
        return value

    @field_validator("slack_api_url")
    @classmethod
    def _api_url_shape(cls, value: str | None) -> str | None:
        url = _http_url(value, "https://slack.com/api/")
        # slack_sdk joins method names onto the base URL: it must end with a slash.
        return url if url is None or url.endswith("/") else url + "/"

    @field_validator("slack_redirect_uri")
    @classmethod
    def _redirect_shape(cls, value: str | None) -> str | None:
        return _http_url(value, "https://YOUR-HOST/slack/oauth_redirect")

    @model_validator(mode="after")
    def _transport(self) -> BotSettings:
        oauth = self.slack_client_id is not None or self.slack_client_secret is not None
        if self.slack_bot_token is not None and oauth:
            raise ValueError(
                "set SLACK_BOT_TOKEN (one workspace) or SLACK_CLIENT_ID and SLACK_CLIENT_SECRET "
                "(any workspace installs the app), not both"
            )
        if self.slack_bot_token is None and not oauth:
            raise ValueError(
                "set SLACK_BOT_TOKEN (one workspace) or SLACK_CLIENT_ID and SLACK_CLIENT_SECRET "
                "(any workspace installs the app)"
            )
        if oauth and (self.slack_client_id is None or self.slack_client_secret is None):
            raise ValueError("OAuth needs both SLACK_CLIENT_ID and SLACK_CLIENT_SECRET")
        if self.slack_app_token is None and self.slack_signing_secret is None:
            raise ValueError(
                "set SLACK_SIGNING_SECRET (HTTP mode) or SLACK_APP_TOKEN (Socket Mode)"
            )
        if self.artbot_runner_url is not None and self.artbot_runner_token is None:
            raise ValueError("ARTBOT_RUNNER_URL is set: set ARTBOT_RUNNER_TOKEN too")
        if self.artbot_approval == "approvers" and not self.approvers:
            raise ValueError("ARTBOT_APPROVAL=approvers needs ARTBOT_APPROVERS (user ids)")
        if self.artbot_approval == "anyone" and self.approvers:
            raise ValueError(
                "ARTBOT_APPROVAL=anyone and ARTBOT_APPROVERS say different things: set one"
            )
        if bool(self.artbot_preflight_base_url) != bool(self.artbot_preflight_model):
            raise ValueError(
                "the preflight needs both ARTBOT_PREFLIGHT_BASE_URL and ARTBOT_PREFLIGHT_MODEL "
                "(the endpoint and the model it is asked for): set both, or neither"
            )
        return self

    @field_validator("artbot_approval", mode="before")
    @classmethod
    def _approval_unset(cls, value: object) -> object:
        return None if isinstance(value, str) and not value.strip() else value

    @field_validator("artbot_preflight_base_url")
    @classmethod
    def _preflight_url_shape(cls, value: str | None) -> str | None:
        # Refused at start, not when someone presses Preflight; the URL itself is never echoed.
        if value is None or value == "":
            return None
        problem = base_url_problem(value)
        if problem is not None:
            raise ValueError(problem)
        return value

    @field_validator("artbot_runner_url")
    @classmethod
    def _runner_url_shape(cls, value: str | None) -> str | None:
        url = _http_url(value, "https://gpu-host:8080")
        return None if url is None else url.rstrip("/")

    @property
    def socket_mode(self) -> bool:
        return self.slack_app_token is not None

    @property
    def multi_workspace(self) -> bool:
        """Any workspace installs the app (OAuth); else the one of SLACK_BOT_TOKEN."""
        return self.slack_bot_token is None

    @property
    def runner_configured(self) -> bool:
        return self.artbot_runner_url is not None

    @property
    def approvers(self) -> frozenset[str]:
        return _comma_separated(self.artbot_approvers)

    @property
    def runner_channels(self) -> frozenset[str]:
        return _comma_separated(self.artbot_runner_channels)

    @property
    def approval_mode(self) -> Literal["approvers", "admins", "anyone"] | None:
        """Who may approve (bot.runs.approval): ARTBOT_APPROVAL, else the approvers when listed,
        else anyone with one workspace; None with OAuth and neither (nobody may: no policy)."""
        if self.artbot_approval is not None:
            return self.artbot_approval
        if self.approvers:
            return "approvers"
        return None if self.multi_workspace else "anyone"


def _http_url(value: str | None, example: str) -> str | None:
    """An http(s) URL, or None when unset or empty; anything else is refused."""
    if value is None or value == "":
        return None
    if not value.startswith(("http://", "https://")):
        raise ValueError(f"must be an http(s) URL such as {example}")
    return value


def _comma_separated(text: str) -> frozenset[str]:
    return frozenset(part.strip() for part in text.split(",") if part.strip())


def load_settings(env: Mapping[str, str] | None = None) -> BotSettings:
    """Settings from `env` (default: the process environment); SettingsError lists what is wrong."""
    return load_from_environment(BotSettings, env, prefix="", program="artbot")


@dataclass(frozen=True)
class ServeSettings:
    """Everything `artbot serve` reads from the environment."""

    bot: BotSettings
    assistant: AssistantSettings | None
    """None: no ARTBOT_LLM_MODEL, no assistant (the plain wizard)."""


def load_serve_settings(env: Mapping[str, str] | None = None) -> ServeSettings:
    """`artbot serve`'s settings from `env` (default: the process environment); SettingsError
    lists every problem of the bot's and the assistant's settings together."""
    problems: list[str] = []
    bot: BotSettings | None = None
    assistant: AssistantSettings | None = None
    try:
        bot = load_settings(env)
    except SettingsError as error:
        problems.append(str(error))
    try:
        assistant = load_assistant_settings(os.environ if env is None else env)
    except SettingsError as error:
        problems.append(f"Cannot start artbot: the assistant's settings: {error}")
    if bot is None or problems:
        raise SettingsError("\n".join(problems))
    return ServeSettings(bot=bot, assistant=assistant)
