"""An answer streams as the model writes it: each piece to the caller's sink, in order, the turn
the same as an answer in one piece, the tokens charged to the user, errors as ModelUnavailable."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from assistant import Assistant, Budget, Completion, ModelUnavailable
from assistant.model import ChatMessage
from flows import TRAIN_RL, Notice, Reply
from tests.assistant.conftest import (
    TO_BASE_MODEL,
    USER,
    model_for,
    question_of,
    session_after,
)
from tests.fakes.openai_server import FakeOpenAI, Scripted

PIECES = ("  Llama-3.1-8B", " is the smallest", ", so try it first", " on a 24 GB GPU.")
ANSWER = "".join(PIECES).strip()
ASKED = Reply(text="which model fits a 24 GB GPU?")


def test_an_answer_streams_piece_by_piece_and_the_turn_is_as_in_one_piece(
    fake: FakeOpenAI,
) -> None:
    budget = Budget(requests_per_minute=100, tokens_per_day=1_000_000)
    assistant = Assistant(model_for(fake), budget)
    session = session_after(TO_BASE_MODEL)
    fake.script(Scripted.streamed(*PIECES), Scripted.text(ANSWER))
    pieces: list[str] = []

    streamed = assistant.respond(TRAIN_RL, session, ASKED, USER, on_text=pieces.append)
    whole = assistant.respond(TRAIN_RL, session, ASKED, USER)

    assert pieces == [PIECES[0].lstrip(), *PIECES[1:]]  # leading whitespace is not shown
    assert streamed.turn == whole.turn
    assert streamed.answered == Notice(ANSWER) == streamed.turn.messages[0]
    assert whole.answered is None
    assert question_of(streamed.turn.messages).step_id == "base_model"
    first, second = fake.requests
    assert first["stream"] is True and first["stream_options"] == {"include_usage": True}
    assert "stream" not in second
    assert budget._used_today(USER, budget.clock()) > 0  # pyright: ignore[reportPrivateUsage]


def test_a_long_answer_streams_only_what_is_shown(fake: FakeOpenAI) -> None:
    assistant = Assistant(
        model_for(fake), Budget(requests_per_minute=100, tokens_per_day=1_000_000)
    )
    session = session_after(TO_BASE_MODEL)
    fake.script(Scripted.streamed(*["word " * 100] * 4))  # 2,000 characters
    pieces: list[str] = []

    streamed = assistant.respond(TRAIN_RL, session, ASKED, USER, on_text=pieces.append)

    assert streamed.answered is not None
    assert "".join(pieces).strip() == streamed.answered.text
    assert len("".join(pieces)) == 1_500


def test_a_failed_stream_is_the_plain_question_with_a_note(fake: FakeOpenAI) -> None:
    assistant = Assistant(
        model_for(fake), Budget(requests_per_minute=100, tokens_per_day=1_000_000)
    )
    session = session_after(TO_BASE_MODEL)
    fake.script(Scripted.error(429))
    pieces: list[str] = []

    streamed = assistant.respond(TRAIN_RL, session, ASKED, USER, on_text=pieces.append)

    assert pieces == [] and streamed.answered is None
    notes = [m.text for m in streamed.turn.messages if isinstance(m, Notice)]
    assert notes == ["(The assistant could not help this time: it is rate-limited right now.)"]
    assert question_of(streamed.turn.messages).step_id == "base_model"


def test_what_streams_out_to_the_model_is_redacted_and_errors_are_unavailable(
    fake: FakeOpenAI,
) -> None:
    model = model_for(fake)
    secret = "sk-proj-" + "a1B2c3D4" * 4
    fake.script(Scripted.streamed("fine"), Scripted.timeout())

    reply = model.stream(
        [ChatMessage("user", f"my key is {secret}")], max_tokens=50, on_text=lambda _: None
    )

    assert reply.text == "fine" and reply.tokens > 0
    assert secret not in str(fake.requests[0]) and "[REDACTED]" in str(fake.requests[0])
    try:
        model.stream([ChatMessage("user", "hi")], max_tokens=50, on_text=lambda _: None)
    except ModelUnavailable as why:
        assert str(why) == "it took too long"
    else:
        raise AssertionError("a hung stream must be unavailable")


def test_a_model_that_cannot_stream_answers_in_one_piece(fake: FakeOpenAI) -> None:
    inner = model_for(fake)

    class OnlyComplete:
        def complete(
            self,
            messages: Sequence[ChatMessage],
            *,
            schema: Mapping[str, Any] | None = None,
            max_tokens: int,
        ) -> Completion:
            return inner.complete(messages, schema=schema, max_tokens=max_tokens)

    assistant = Assistant(OnlyComplete(), Budget(requests_per_minute=100, tokens_per_day=1_000_000))
    fake.script(Scripted.text(ANSWER))
    pieces: list[str] = []

    answered = assistant.respond(
        TRAIN_RL, session_after(TO_BASE_MODEL), ASKED, USER, on_text=pieces.append
    )

    assert pieces == [] and answered.answered is None
    assert answered.turn.messages[0] == Notice(ANSWER)
