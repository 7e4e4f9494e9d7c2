"""A simulated user for conversation tasks: a model plays the customer from the user's
instructions (each `{field}` the scenario's), sees the agent's words as the other side of the
conversation, and ends it with `<done>`; tried through the generated script's own functions
against an OpenAI-compatible server on loopback, reached through LiteLLM as in training."""

from __future__ import annotations

import asyncio
from pathlib import Path

import art
import pytest

from checks.script_format import formatted_script
from flows.conversation.replay import replay
from flows.definition.steps import InvalidAnswer
from flows.wizards.rl.simulated_user import simulated_user
from flows.wizards.rl.train_rl import TRAIN_RL
from tests.fakes.openai_server import API_KEY, FakeOpenAI, Scripted
from tests.flows.realistic_tasks import (
    SUPPORT_SCENARIOS,
    support_agent,
    support_agent_with_a_customer,
)
from tests.flows.test_final_answer import load_script


def test_the_customer_answers_the_agent_and_ends_the_conversation_when_done(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    answers = replay(TRAIN_RL, support_agent_with_a_customer("https://crm.internal")).answers
    script = load_script(formatted_script(answers), tmp_path, "support_customer")
    ticket = SUPPORT_SCENARIOS[0]
    conversation = art.Trajectory(
        messages_and_choices=[
            *script.first_messages(ticket),
            {"role": "assistant", "content": "Sorry to hear that! Which order was it?"},
        ],
        reward=0.0,
    )
    args = script.parse_args(["--simulated-user-model", "openai/gpt-test"])

    with FakeOpenAI() as model:
        monkeypatch.setenv("OPENAI_API_KEY", API_KEY)
        monkeypatch.setenv("OPENAI_BASE_URL", model.base_url)
        model.script(Scripted.text("The blender, order o-9."), Scripted.text("Thanks! <done>"))
        said = asyncio.run(script.simulated_user_reply(conversation, ticket, args))
        done = asyncio.run(script.simulated_user_reply(conversation, ticket, args))

    assert said == "The blender, order o-9." and done is None
    first = model.requests[0]
    assert first["model"] == "gpt-test"
    system, *turns = first["messages"]
    # The customer's own instructions, filled from the ticket; the agent's words are its "user".
    assert system["role"] == "system"
    assert system["content"].startswith(
        "You are a customer writing to support: My blender arrived broken. Answer the agent's"
    )
    assert "Your customer id is c/42." in system["content"] and "<done>" in system["content"]
    assert turns == [
        {"role": "assistant", "content": "My blender arrived broken."},
        {"role": "user", "content": "Sorry to hear that! Which order was it?"},
    ]
    assert model.refused == []


def test_its_key_is_required_at_start_and_its_model_is_a_flag(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    answers = replay(
        TRAIN_RL,
        support_agent_with_a_customer(
            "https://crm.internal", simulated_user_model="anthropic/claude-sonnet-4-5"
        ),
    ).answers
    script = load_script(formatted_script(answers), tmp_path, "support_customer_key")
    for name in ("CRM_API_KEY", "OPENAI_API_KEY", "WANDB_API_KEY"):
        monkeypatch.setenv(name, "placeholder")
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    with pytest.raises(SystemExit, match="ANTHROPIC_API_KEY: the simulated user"):
        script.check_environment(script.parse_args([]))


def test_without_a_simulated_user_the_script_has_none_of_it() -> None:
    script = formatted_script(replay(TRAIN_RL, support_agent("https://crm.internal")).answers)
    assert "SIMULATED_USER" not in script and "simulated_user_reply" not in script
    assert "import litellm" not in script and "--simulated-user-model" not in script


@pytest.mark.parametrize(
    ("typed", "why"),
    [
        ("Be a user.", "Describe who the simulated user is"),
        ("You are a customer whose order {order_id} arrived broken.", "`{order_id}` is not a"),
    ],
)
def test_wrong_instructions_say_what_is_wrong(typed: str, why: str) -> None:
    with pytest.raises(InvalidAnswer, match=why.replace("{", r"\{").replace("}", r"\}")):
        simulated_user(typed, support_agent("https://crm.internal"))
