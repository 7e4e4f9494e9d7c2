"""Where a preflight asks its model: an OpenAI-compatible endpoint, the model it is asked for,
and the key only the asking process holds (never the sandboxed script)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

BASE_URL_VARIABLE = "ARTBOT_PREFLIGHT_BASE_URL"
MODEL_VARIABLE = "ARTBOT_PREFLIGHT_MODEL"
KEY_VARIABLE = "ARTBOT_PREFLIGHT_API_KEY"


@dataclass(frozen=True)
class PreflightEndpoint:
    """The endpoint's base URL, the model asked for, and its API key (not shown in repr)."""

    base_url: str
    model: str
    api_key: str | None = field(default=None, repr=False)

    @classmethod
    def from_environment(cls, environ: Mapping[str, str]) -> PreflightEndpoint | None:
        """The endpoint ARTBOT_PREFLIGHT_BASE_URL and ARTBOT_PREFLIGHT_MODEL name (with
        ARTBOT_PREFLIGHT_API_KEY), None unless both are set."""
        base_url, model = environ.get(BASE_URL_VARIABLE), environ.get(MODEL_VARIABLE)
        if not base_url or not model:
            return None
        return cls(base_url, model, environ.get(KEY_VARIABLE) or None)
