"""Settings stop startup with a clear message; Block Kit payloads stay inside Slack's limits."""

from __future__ import annotations

import subprocess
import sys

import pytest

from bot.settings import SettingsError, load_serve_settings, load_settings
from bot.slack.blocks import (
    BUTTON_TEXT_LIMIT,
    SECTION_LIMIT,
    TEXT_LIMIT,
    answered_message,
    edit_menu_message,
    parse_answer_value,
    problem_message,
    question_message,
)
from bot.slack.listeners.actions import picked_value
from bot.slack.text import escape
from flows import EDIT_MENU, EditMenu, OptionView, Problem, Progress, Question
from tests.fakes.slack_api import block_errors

GOOD = {"SLACK_BOT_TOKEN": "xoxb-1-2", "SLACK_SIGNING_SECRET": "s3cret"}


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ({}, "set SLACK_BOT_TOKEN (one workspace) or SLACK_CLIENT_ID and SLACK_CLIENT_SECRET"),
        (
            {**GOOD, "SLACK_BOT_TOKEN": "xoxp-user-token"},
            "SLACK_BOT_TOKEN: must be a bot token starting with xoxb-",
        ),
        (
            {"SLACK_BOT_TOKEN": "xoxb-1"},
            "set SLACK_SIGNING_SECRET (HTTP mode) or SLACK_APP_TOKEN (Socket Mode)",
        ),
        (
            {**GOOD, "SLACK_APP_TOKEN": "xoxb-wrong"},
            "SLACK_APP_TOKEN: must be an app-level token starting with xapp-",
        ),
        ({**GOOD, "SLACK_API_URL": "slack.com/api"}, "SLACK_API_URL: must be an http(s) URL"),
        ({**GOOD, "PORT": "99999"}, "PORT:"),
        ({**GOOD, "ARTBOT_SESSION_IDLE_HOURS": "0"}, "ARTBOT_SESSION_IDLE_HOURS:"),
    ],
)
def test_bad_settings_say_what_is_wrong(env: dict[str, str], message: str) -> None:
    with pytest.raises(SettingsError) as error:
        load_settings(env)
    assert message in str(error.value)
    assert "s3cret" not in str(error.value)


def test_good_settings_keep_secrets_out_of_their_repr() -> None:
    settings = load_settings(
        {**GOOD, "SLACK_API_URL": "http://127.0.0.1:9/api", "SLACK_APP_TOKEN": "xapp-1-A-b"}
    )
    assert settings.slack_api_url == "http://127.0.0.1:9/api/"
    assert settings.socket_mode
    assert "s3cret" not in repr(settings) and "xoxb-1-2" not in repr(settings)


def test_serve_settings_are_one_tree_whose_error_names_every_problem_of_both() -> None:
    with pytest.raises(SettingsError) as error:
        load_serve_settings(
            {
                "SLACK_BOT_TOKEN": "xoxb-1",
                "ARTBOT_LLM_MODEL": "gpt-test",
                "ARTBOT_LLM_TIMEOUT_S": "0",
            }
        )
    said = str(error.value)
    assert "set SLACK_SIGNING_SECRET (HTTP mode) or SLACK_APP_TOKEN (Socket Mode)" in said
    assert "Cannot start artbot: the assistant's settings:" in said
    assert "ARTBOT_LLM_TIMEOUT_S" in said


def test_serve_settings_hold_the_assistants_when_a_model_is_set_and_none_otherwise() -> None:
    assert load_serve_settings(GOOD).assistant is None
    tree = load_serve_settings(
        {**GOOD, "ARTBOT_LLM_MODEL": "gpt-test", "OPENAI_API_KEY": "sk-test-key"}
    )
    assert tree.bot.slack_signing_secret is not None
    assert tree.assistant is not None and tree.assistant.model == "gpt-test"
    assert tree.assistant.key() == "sk-test-key"
    assert "sk-test-key" not in repr(tree)


def test_artbot_serve_refuses_to_start_without_settings() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "artbot.cli", "serve"],
        capture_output=True,
        text=True,
        timeout=60,
        env={"PATH": ""},
    )
    assert result.returncode == 2
    assert "set SLACK_BOT_TOKEN (one workspace) or SLACK_CLIENT_ID" in result.stderr


@pytest.mark.parametrize(
    ("flag", "env", "said"),
    [
        (["--workers", "0"], {}, "--workers must be 1 to 16"),
        (["--workers", "17"], {}, "--workers must be 1 to 16"),
        ([], {"ARTBOT_WORKERS": "0"}, "ARTBOT_WORKERS: Input should be greater than or equal to 1"),
        (["--workers", "2"], {"SLACK_APP_TOKEN": "xapp-1"}, "Socket Mode runs one process"),
    ],
)
def test_artbot_serve_refuses_a_number_of_workers_it_cannot_run(
    flag: list[str], env: dict[str, str], said: str
) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "artbot.cli", "serve", *flag],
        capture_output=True,
        text=True,
        timeout=60,
        env={"PATH": "", "SLACK_BOT_TOKEN": "xoxb-1-2", "SLACK_SIGNING_SECRET": "s3cret", **env},
    )
    assert result.returncode == 2
    assert said in result.stderr


def test_a_question_with_huge_text_and_long_labels_stays_within_limits() -> None:
    options = tuple(OptionView(f"v{i}", "x" * 200, "", i, i == 1) for i in range(1, 31))
    question = Question(
        "step",
        "q" * 10_000 + "\n" + "line\n" * 2000,
        "choice",
        options,
        "hint",
        Progress("Reward", 4, 7, 2),
    )
    message = question_message(question)
    assert block_errors(message.blocks) == []
    assert len(message.text) <= TEXT_LIMIT
    buttons = [e for b in message.blocks if b["type"] == "actions" for e in b["elements"]]
    assert len(buttons) == 30 and all(len(b["text"]["text"]) <= BUTTON_TEXT_LIMIT for b in buttons)
    assert all(
        len(b["text"]["text"]) <= SECTION_LIMIT for b in message.blocks if b["type"] == "section"
    )
    assert parse_answer_value(buttons[0]["value"]) == ("step", "v1")


def test_the_edit_menu_is_buttons_up_to_five_answers_then_a_select_within_limits() -> None:
    def menu(count: int) -> EditMenu:
        options = tuple(
            OptionView(f"step_{i}", f"Question {i} " + "x" * 100, "y" * 300, i, False)
            for i in range(1, count + 1)
        )
        return EditMenu("Which answer do you want to change?", options, "Or type `edit 2`.")

    few = edit_menu_message(menu(5))
    buttons = [e for b in few.blocks if b["type"] == "actions" for e in b["elements"]]
    assert [b["type"] for b in buttons] == ["button"] * 5
    assert parse_answer_value(buttons[1]["value"]) == (EDIT_MENU, "step_2")
    assert all(len(b["text"]["text"]) <= BUTTON_TEXT_LIMIT for b in buttons)

    many = edit_menu_message(menu(30))
    assert block_errors(many.blocks) == []
    (select,) = [e for b in many.blocks if b["type"] == "actions" for e in b["elements"]]
    assert select["type"] == "static_select" and len(select["options"]) == 30
    assert all(
        len(o["text"]["text"]) <= 75 and len(o["description"]["text"]) <= 75
        for o in select["options"]
    )
    assert parse_answer_value(picked_value({"selected_option": select["options"][2]})) == (
        EDIT_MENU,
        "step_3",
    )


def test_user_text_cannot_mention_or_link() -> None:
    problem = problem_message(
        Problem("“<!channel> <https://evil|click>” is not one of the options.")
    )
    assert "<!channel>" not in problem.text and "&lt;!channel&gt;" in problem.text
    answered = answered_message("Task?", "<@U123> & <!here>")
    assert "<@U123>" not in answered.text and escape("<@U123>") in answered.text
