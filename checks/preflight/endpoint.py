"""Where a preflight asks its model: an OpenAI-compatible endpoint, the model it is asked for,
and the key only the asking process holds (never the sandboxed script)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from urllib.parse import urlsplit

BASE_URL_VARIABLE = "ARTBOT_PREFLIGHT_BASE_URL"
MODEL_VARIABLE = "ARTBOT_PREFLIGHT_MODEL"
KEY_VARIABLE = "ARTBOT_PREFLIGHT_API_KEY"


def base_url_problem(url: str) -> str | None:
    """Why `url` cannot be a preflight endpoint's base URL, or None. Never quotes the URL, which
    may carry a password."""
    try:
        parts = urlsplit(url)
        port = parts.port  # raises on a port that is not a number in range
    except ValueError:
        return "must be an http(s) URL such as https://HOST/v1 (its port is not a number)"
    if parts.scheme not in ("http", "https"):
        return "must be an http(s) URL such as https://HOST/v1"
    if not parts.hostname:
        return "must name a host, as in https://HOST/v1"
    if port == 0:
        return "its port must be between 1 and 65535"
    if parts.query or parts.fragment:
        return "must be a base URL, without ?query or #fragment (the API paths follow it)"
    if any(c.isspace() for c in url):
        return "must not contain spaces"
    return None


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
