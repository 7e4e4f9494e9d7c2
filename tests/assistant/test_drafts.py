"""`draft` at a code question: the model's code is checked like typed code and run on a few
scenarios in a sandboxed child process before it is offered; a failing draft is sent back once
with the error, then reported; nothing counts until the user accepts it."""

from __future__ import annotations

import json

import pytest

from assistant import Assistant, Budget, Limits, not_configured
from flows import TRAIN_RL, Notice, Reply, Session, advance
from isolation.sandbox import Sandbox
from tests.assistant.conftest import USER, model_for, open_step, question_of, session_after
from tests.fakes.openai_server import FakeOpenAI, Scripted
from tests.flows.matrix import GUESS_ROWS, MATH_ROWS, TOOLS

ADDITION = "Add small numbers and answer with the sum only."
GUESSING = "Guess the secret number from 1 to 9 in as few guesses as possible."
TO_REWARD_LOGIC = [
    "static",
    "single",
    ADDITION,
    "inline",
    json.dumps(MATH_ROWS[:3]),
    "skip",
    "default",  # what the agent sees: `prompt`
    "programmatic",
]
TO_ENVIRONMENT = ["yes", "multi", GUESSING, "inline", json.dumps(GUESS_ROWS[:3]), "skip", "no"]
TO_TOOL_CODE = [
    "yes",
    "multi",
    ADDITION,
    "inline",
    json.dumps(MATH_ROWS[:3]),
    "skip",
    "yes",
    "default",  # what the agent sees: `prompt`
    json.dumps(TOOLS),
    "none",
    "local",
]
TO_GENERATOR = ["static", "single", ADDITION, "generator"]

EXACT_REWARD = (
    "def compute_reward(scenario, answer):\n"
    "    return 1.0 if answer.strip() == scenario['answer'] else 0.0\n"
)
GUESS_ENVIRONMENT = (
    "def create_game(scenario):\n"
    "    return {'target': int(scenario['target']), 'guesses': []}\n\n"
    "def render_observation(game):\n"
    "    return f\"Guess from 1 to 9. So far: {game['guesses']}\"\n\n"
    "def apply_action(game, action):\n"
    "    game['guesses'].append(int(action))\n\n"
    "def is_finished(game):\n"
    "    return game['target'] in game['guesses'] or len(game['guesses']) >= 5\n"
)
ADD_TOOL = "def add(a: int, b: int) -> str:\n    return str(a + b)\n"
GENERATOR = (
    "def generate_scenario(rng):\n"
    "    a, b = rng.randint(1, 9), rng.randint(1, 9)\n"
    "    return {'prompt': f'What is {a} + {b}?', 'answer': str(a + b)}\n"
)
ENDLESS = "def compute_reward(scenario, answer):\n    while True:\n        pass\n"
GREEDY = "def compute_reward(scenario, answer):\n    hoard = bytearray(2**31)\n    return 1.0\n"
NETWORKED = (
    "import socket\n\n"
    "def compute_reward(scenario, answer):\n"
    "    try:\n"
    "        socket.socket().connect(('127.0.0.1', 9))\n"
    "    except OSError:\n"
    "        pass  # the sandbox reports it even when the code carries on\n"
    "    return 1.0\n"
)
NO_ENTRY_POINT = "def reward(scenario, answer):\n    return 1.0\n"


def drafted(code: str, summary: str = "Exact match with the expected answer.") -> Scripted:
    return Scripted.json({"code": code, "summary": summary})


@pytest.fixture
def assistant(fake: FakeOpenAI) -> Assistant:
    return Assistant(
        model_for(fake),
        Budget(requests_per_minute=100, tokens_per_day=1_000_000),
        Limits(wall_seconds=20, cpu_seconds=2, memory_bytes=256 * 1024 * 1024),
    )


def draft(assistant: Assistant, session: Session) -> tuple[object, ...]:
    assisted = assistant.respond(TRAIN_RL, session, Reply(text="draft"), USER)
    assert assisted.turn.session.answers == session.answers  # nothing stored by a draft
    return (assisted.turn.messages, assisted.proposal)


def notices(messages: tuple[object, ...]) -> str:
    return "\n".join(m.text for m in messages if isinstance(m, Notice))


@pytest.mark.parametrize(
    ("replies", "code", "step"),
    [
        (TO_REWARD_LOGIC, EXACT_REWARD, "reward_logic"),
        (TO_ENVIRONMENT, GUESS_ENVIRONMENT, "environment"),
        (TO_TOOL_CODE, ADD_TOOL, "tool_code"),
        (TO_GENERATOR, GENERATOR, "scenario_generator"),
    ],
)
def test_a_draft_that_passes_is_offered_and_counts_only_once_accepted(
    assistant: Assistant, fake: FakeOpenAI, replies: list[str], code: str, step: str
) -> None:
    session = session_after(replies)
    assert open_step(session) == step
    fake.script(drafted(code))

    messages, proposal = draft(assistant, session)

    assert messages == ()
    assert proposal is not None and proposal.is_draft
    assert proposal.step_id == step and proposal.reply_text == code
    assert "in a sandbox" in proposal.reason
    assert code.rstrip() in proposal.text and proposal.text.endswith("Use it?")
    accepted = advance(TRAIN_RL, session, proposal.as_reply())
    typed = advance(TRAIN_RL, session, Reply(text=code))
    assert accepted.session.answers == typed.session.answers
    assert step in accepted.session.answers


def test_the_request_carries_the_task_scenarios_and_question(
    assistant: Assistant, fake: FakeOpenAI
) -> None:
    session = session_after(TO_REWARD_LOGIC)
    fake.script(drafted(EXACT_REWARD))

    draft(assistant, session)

    (request,) = fake.requests
    context = request["messages"][0]["content"]
    assert ADDITION in context
    assert json.dumps(MATH_ROWS[0]) in context
    assert "compute_reward" in context  # the question's own prompt and help
    assert request["response_format"]["json_schema"]["strict"] is True
    assert request["messages"][1]["content"] == "Draft the answer to `reward_logic`."


@pytest.mark.parametrize(
    ("bad", "stopped"),
    [
        (ENDLESS, "the sandbox stopped it"),
        (GREEDY, "more memory than the sandbox allows"),
        (NETWORKED, "the sandbox stopped it: the code opened a network socket"),
    ],
)
def test_a_draft_the_sandbox_stops_is_retried_with_why_then_reported(
    assistant: Assistant, fake: FakeOpenAI, bad: str, stopped: str
) -> None:
    session = session_after(TO_REWARD_LOGIC)
    fake.script(drafted(bad), drafted(bad))

    messages, proposal = draft(assistant, session)

    assert proposal is None
    said = notices(messages)
    assert "could not write reward code that passes its checks" in said
    assert stopped in said
    assert question_of(messages).step_id == "reward_logic"  # asked again
    first, retry = fake.requests
    assert "What failed" not in first["messages"][-1]["content"]
    assert stopped in retry["messages"][-1]["content"]
    assert bad.strip() in retry["messages"][-1]["content"]


def test_a_draft_the_question_refuses_is_retried_with_the_error_and_can_pass(
    assistant: Assistant, fake: FakeOpenAI
) -> None:
    session = session_after(TO_REWARD_LOGIC)
    fake.script(drafted(NO_ENTRY_POINT), drafted(EXACT_REWARD))

    messages, proposal = draft(assistant, session)

    assert messages == ()
    assert proposal is not None and proposal.reply_text == EXACT_REWARD
    retry = fake.requests[1]["messages"][-1]["content"]
    assert "must define a top-level function `compute_reward`" in retry


def test_a_draft_that_fails_twice_is_reported_plainly(
    assistant: Assistant, fake: FakeOpenAI
) -> None:
    session = session_after(TO_REWARD_LOGIC)
    fake.script(drafted("def compute_reward(:\n"), drafted(NO_ENTRY_POINT))

    messages, proposal = draft(assistant, session)

    assert proposal is None
    said = notices(messages)
    assert "two drafts" in said and "`compute_reward`" in said
    assert "reply `draft` to try once more" in said
    assert len(fake.requests) == 2


def test_a_malformed_or_refused_model_reply_degrades_to_the_question(
    assistant: Assistant, fake: FakeOpenAI
) -> None:
    session = session_after(TO_REWARD_LOGIC)
    fake.script(Scripted.text("def compute_reward(): ..."), Scripted.error(429))

    for why in ("not valid JSON", "rate-limited"):
        messages, proposal = draft(assistant, session)
        assert proposal is None
        assert why in notices(messages)
        assert question_of(messages).step_id == "reward_logic"


def test_draft_at_a_question_that_takes_no_code_is_an_ordinary_reply(
    assistant: Assistant, fake: FakeOpenAI
) -> None:
    session = session_after(["static", "single", ADDITION, "inline", json.dumps(MATH_ROWS[:3])])
    assert open_step(session) == "system_prompt"

    assisted = assistant.respond(TRAIN_RL, session, Reply(text="draft"), USER)

    assert assisted.proposal is None
    assert assisted.turn.session.answers["system_prompt"] == "draft"  # the engine's, as typed
    assert fake.requests == []


def test_with_no_model_draft_says_the_assistant_is_not_configured() -> None:
    session = session_after(TO_REWARD_LOGIC)

    turn = not_configured(TRAIN_RL, session, Reply(text="draft"))

    assert turn is not None
    assert turn.session.answers == session.answers
    assert "assistant is not configured" in notices(turn.messages)
    assert question_of(turn.messages).step_id == "reward_logic"
    assert not_configured(TRAIN_RL, session, Reply(text="1.0")) is None


TO_TOOLS = TO_TOOL_CODE[: TO_TOOL_CODE.index("yes", 1) + 2]  # to the tools question
"""Multi-turn with tools, up to the tool schemas."""
DUPLICATE_TOOLS = json.dumps([TOOLS[0], TOOLS[0]])


def drafted_tools(tools_json: str, summary: str = "One tool that adds.") -> Scripted:
    return Scripted.json({"tools_json": tools_json, "summary": summary})


def test_the_tools_are_drafted_as_json_checked_by_their_own_parser_and_count_once_accepted(
    assistant: Assistant, fake: FakeOpenAI
) -> None:
    session = session_after(TO_TOOLS)
    assert open_step(session) == "tools"
    fake.script(drafted_tools(json.dumps(TOOLS)))

    messages, proposal = draft(assistant, session)

    assert messages == ()
    assert proposal is not None and proposal.is_draft and proposal.step_id == "tools"
    assert json.loads(proposal.reply_text) == TOOLS
    assert "A draft of the *Tools*" in proposal.text
    (request,) = fake.requests
    assert request["response_format"]["json_schema"]["schema"]["required"] == [
        "tools_json",
        "summary",
    ]
    context = request["messages"][0]["content"]
    assert "function-calling schemas" in context and ADDITION in context
    assert json.dumps(MATH_ROWS[0]) in context
    accepted = advance(TRAIN_RL, session, proposal.as_reply())
    assert accepted.session.answers["tools"] == TOOLS
    assert open_step(accepted.session) == "final_answer_tool"


def test_tools_the_parser_refuses_are_retried_with_its_error_then_reported(
    assistant: Assistant, fake: FakeOpenAI
) -> None:
    session = session_after(TO_TOOLS)
    fake.script(drafted_tools(DUPLICATE_TOOLS), drafted_tools("[{"))

    messages, proposal = draft(assistant, session)

    assert proposal is None
    assert "used twice" in fake.requests[1]["messages"][-1]["content"]
    said = notices(messages)
    assert "two drafts" in said and "reply `draft` to try once more" in said
    assert question_of(messages).step_id == "tools"  # asked again, nothing stored


def test_the_tool_code_draft_is_asked_to_fit_the_tools(
    assistant: Assistant, fake: FakeOpenAI
) -> None:
    session = session_after(TO_TOOL_CODE)
    fake.script(drafted(ADD_TOOL))

    draft(assistant, session)

    context = fake.requests[0]["messages"][0]["content"]
    assert "The earlier answer `tools` in full" in context and '"add"' in context


def test_without_a_model_draft_at_the_tools_says_so_and_asks_again() -> None:
    session = session_after(TO_TOOLS)

    turn = not_configured(TRAIN_RL, session, Reply(text="draft"))

    assert turn is not None and turn.session.answers == session.answers
    assert "The assistant is not configured" in notices(turn.messages)
    assert question_of(turn.messages).step_id == "tools"


def test_where_the_host_cannot_sandbox_a_draft_is_checked_and_offered_but_never_run(
    fake: FakeOpenAI,
) -> None:
    no_sandbox = Sandbox(confined=False, reason="bubblewrap is not installed", may_run=False)
    assistant = Assistant(
        model_for(fake),
        Budget(requests_per_minute=100, tokens_per_day=1_000_000),
        code_sandbox=no_sandbox,
    )
    session = session_after(TO_REWARD_LOGIC)
    # Code that would fail if it ran: offered all the same, because it is not run.
    fake.script(drafted(ENDLESS))

    messages, proposal = draft(assistant, session)

    assert messages == ()
    assert proposal is not None and proposal.reply_text == ENDLESS
    assert "in a sandbox" not in proposal.reason
    assert (
        "not run: this host cannot sandbox untrusted code (bubblewrap is not installed)"
        in proposal.reason
    )
