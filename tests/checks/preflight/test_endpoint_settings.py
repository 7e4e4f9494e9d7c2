"""A malformed ARTBOT_PREFLIGHT_BASE_URL stops `artbot serve` at start, naming the variable and
never echoing the URL (which may carry a password), instead of failing when Preflight is pressed."""

from __future__ import annotations

import pytest

from bot.settings import SettingsError, load_settings
from checks.preflight.endpoint import base_url_problem

BASE = {"SLACK_BOT_TOKEN": "xoxb-1", "SLACK_SIGNING_SECRET": "s"}
PASSWORD = "hunter2-canary"


@pytest.mark.parametrize(
    ("url", "why"),
    [
        (f"ftp://user:{PASSWORD}@models.example/v1", "must be an http(s) URL"),
        (f"models.example/v1?key={PASSWORD}", "must be an http(s) URL"),
        (f"https://user:{PASSWORD}@/v1", "must name a host"),
        (f"https://user:{PASSWORD}@models.example:99999/v1", "its port is not a number"),
        (f"https://models.example/v1?api_key={PASSWORD}", "without ?query or #fragment"),
        (f"https://models.example/v 1/{PASSWORD}", "must not contain spaces"),
    ],
)
def test_a_malformed_base_url_stops_the_bot_saying_which_variable(url: str, why: str) -> None:
    with pytest.raises(SettingsError) as refused:
        load_settings({**BASE, "ARTBOT_PREFLIGHT_BASE_URL": url, "ARTBOT_PREFLIGHT_MODEL": "m"})
    message = str(refused.value)
    assert "ARTBOT_PREFLIGHT_BASE_URL: " in message and why in message
    assert PASSWORD not in message and url not in message


@pytest.mark.parametrize(
    "url",
    [
        "http://127.0.0.1:8000/v1",
        "https://user:pw@api.example.com/v1",
        "https://[::1]:8443/openai/v1",
    ],
)
def test_a_well_formed_base_url_is_kept(url: str) -> None:
    assert base_url_problem(url) is None
    settings = load_settings(
        {**BASE, "ARTBOT_PREFLIGHT_BASE_URL": url, "ARTBOT_PREFLIGHT_MODEL": "m"}
    )
    assert settings.artbot_preflight_base_url == url


def test_an_empty_base_url_is_no_preflight() -> None:
    settings = load_settings({**BASE, "ARTBOT_PREFLIGHT_BASE_URL": ""})
    assert settings.artbot_preflight_base_url is None


@pytest.mark.parametrize(
    "half",
    [
        {"ARTBOT_PREFLIGHT_BASE_URL": "http://127.0.0.1:8000/v1"},
        {"ARTBOT_PREFLIGHT_MODEL": "Qwen/Qwen2.5-7B-Instruct"},
    ],
)
def test_half_a_preflight_endpoint_stops_the_bot_instead_of_offering_no_button(
    half: dict[str, str],
) -> None:
    with pytest.raises(SettingsError, match="ARTBOT_PREFLIGHT_BASE_URL and ARTBOT_PREFLIGHT_MODEL"):
        load_settings({**BASE, **half})
