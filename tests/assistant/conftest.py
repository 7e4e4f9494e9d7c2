"""The assistant against a real `openai` client and a scripted OpenAI-compatible server on
loopback."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest

from assistant import Assistant, Budget, OpenAIChatModel
from flows import TRAIN_RL, Question, Reply, Session, advance, begin
from tests.fakes.openai_server import FakeOpenAI
from tests.flows.matrix import MATH_ROWS

MODEL = "gpt-test"
TIMEOUT_S = 0.5
"""Only the scripted hang reaches it: the fake never answers those."""
USER = "U1"

SINGLE_TURN_TO_VALIDATION = [
    "static",
    "single",
    "Add small numbers and answer with the sum only.",
    "inline",
    json.dumps(MATH_ROWS[:3]),
    "skip",
    "default",  # what the agent sees: `prompt`
    "ruler",
    "1",
    "default",  # RULER's rubric: ART's
    "all",
]
TO_BASE_MODEL = [*SINGLE_TURN_TO_VALIDATION, "none"]


@pytest.fixture
def fake() -> Iterator[FakeOpenAI]:
    with FakeOpenAI() as server:
        yield server
        assert server.refused == [], "the fake refused requests OpenAI would refuse"


def model_for(fake: FakeOpenAI) -> OpenAIChatModel:
    return OpenAIChatModel.connect(
        MODEL, base_url=fake.base_url, api_key=fake.key, timeout_s=TIMEOUT_S
    )


@pytest.fixture
def assistant(fake: FakeOpenAI) -> Assistant:
    return Assistant(model_for(fake), Budget(requests_per_minute=100, tokens_per_day=1_000_000))


def session_after(replies: list[str]) -> Session:
    """A train-rl session after `replies`, each accepted by the engine."""
    session = begin(TRAIN_RL, Session.start(TRAIN_RL.id)).session
    for text in replies:
        before = len(session.answers)
        session = advance(TRAIN_RL, session, Reply(text=text)).session
        assert len(session.answers) == before + 1, f"{text!r} was not accepted"
    return session


def open_step(session: Session) -> str:
    step = TRAIN_RL.next_step(session.answers)
    assert step is not None
    return step.id


def question_of(messages: tuple[object, ...]) -> Question:
    questions = [m for m in messages if isinstance(m, Question)]
    assert len(questions) == 1
    return questions[0]
