"""ARTBOT_LLM_*: off unless a model is named; the key falls back to OPENAI_API_KEY and never
prints."""

from __future__ import annotations

import pytest

from assistant import SettingsError, assistant_from_environment, load_assistant_settings


def test_no_model_no_assistant() -> None:
    assert load_assistant_settings({}) is None
    assert load_assistant_settings({"OPENAI_API_KEY": "sk-x", "ARTBOT_LLM_MODEL": " "}) is None
    assert assistant_from_environment({"ARTBOT_LLM_BASE_URL": "http://127.0.0.1:1/v1"}) is None


def test_the_key_falls_back_to_openai_api_key_and_never_prints() -> None:
    settings = load_assistant_settings(
        {"ARTBOT_LLM_MODEL": "gpt-5.4-mini", "OPENAI_API_KEY": "sk-from-openai-variable"}
    )
    assert settings is not None
    assert settings.key() == "sk-from-openai-variable"
    assert "sk-from-openai-variable" not in repr(settings)
    assert "sk-from-openai-variable" not in str(settings.model_dump())

    own = load_assistant_settings(
        {
            "ARTBOT_LLM_MODEL": "gpt-5.4-mini",
            "ARTBOT_LLM_API_KEY": "own-key",
            "OPENAI_API_KEY": "sk-other",
        }
    )
    assert own is not None and own.key() == "own-key"


def test_a_local_server_needs_no_key() -> None:
    settings = load_assistant_settings(
        {"ARTBOT_LLM_MODEL": "Qwen/Qwen3-14B", "ARTBOT_LLM_BASE_URL": "http://127.0.0.1:8000/v1"}
    )
    assert settings is not None
    assert settings.base_url == "http://127.0.0.1:8000/v1"
    assert settings.key() == "unused"


def test_openai_without_a_key_stops_with_a_clear_message() -> None:
    with pytest.raises(SettingsError, match="ARTBOT_LLM_API_KEY: missing"):
        load_assistant_settings({"ARTBOT_LLM_MODEL": "gpt-5.4-mini"})


def test_every_bad_setting_is_named_at_once() -> None:
    with pytest.raises(SettingsError) as raised:
        load_assistant_settings(
            {
                "ARTBOT_LLM_MODEL": "m",
                "ARTBOT_LLM_API_KEY": "k",
                "ARTBOT_LLM_BASE_URL": "localhost:8000",
                "ARTBOT_LLM_TIMEOUT_S": "0",
                "ARTBOT_LLM_REQUESTS_PER_MINUTE": "many",
            }
        )
    message = str(raised.value)
    assert "ARTBOT_LLM_BASE_URL: must be an http:// or https:// URL" in message
    assert "ARTBOT_LLM_TIMEOUT_S" in message
    assert "ARTBOT_LLM_REQUESTS_PER_MINUTE" in message
