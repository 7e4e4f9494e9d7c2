"""The assistant in front of the engine: questions get answers, replies the engine refuses get a
proposed reading, tool code gets tool schemas. The engine stays the authority: a proposal is a
reply the engine has accepted in a trial run, and it counts only when the user accepts it and it
is sent through the engine exactly as if typed.

    assisted = assistant.respond(TRAIN_RL, session, reply, user="U1")
    show(assisted.turn)                      # as the engine's turns
    if assisted.proposal: ask to confirm     # yes -> advance(flow, session, proposal.as_reply())
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from assistant.budget import Budget
from assistant.drafts import TOOLS_STEP, AskModel, is_draft_request, write_draft
from assistant.knowledge import open_question
from assistant.model import (
    ChatMessage,
    ChatModel,
    ModelUnavailable,
    StreamingChatModel,
    TextSink,
    read_json_object,
)
from assistant.prompts import (
    answering_messages,
    choice_values,
    understanding_messages,
    understanding_schema,
)
from assistant.proposals import Proposal, trial
from assistant.recommendations import (
    agent_code_in,
    recommend_ahead,
    recommend_from_code,
    should_recommend,
)
from assistant.repo_reply import answer_repo_zip, repo_zip_in
from assistant.sandbox import Limits
from assistant.tool_offer import tool_code_in, tools_summary
from flows import (
    Flow,
    InvalidAnswer,
    Notice,
    Problem,
    Question,
    Reply,
    Session,
    Turn,
    ValuesMenu,
    advance,
    begin,
    redact_secrets,
    tool_schemas_from_code,
)
from isolation.sandbox import Sandbox

ASK_PREFIX = "ask "
MAX_ASSISTED_CHARS = 2_000
"""Longer replies are data or code: the engine alone reads them."""
MAX_PROPOSED_CHARS = 2_000
"""The longest answer the model may propose (a choice's value, a number, a short text)."""
MAX_SHOWN_ANSWER_CHARS = 1_500
ANSWER_TOKENS = 400
UNDERSTANDING_TOKENS = 200
READABLE = frozenset({"choice", "text", "number", "path"})
"""Questions whose free-text replies the model may read; code and data (json) are not guessed."""
ACCEPT_WORDS = frozenset({"yes", "y", "accept", "ok", "use it"})
REJECT_WORDS = frozenset({"no", "n", "re-answer", "reanswer"})


@dataclass(frozen=True)
class Assisted:
    """The assistant's answer to one reply: a turn to show, and maybe a proposal to confirm."""

    turn: Turn
    proposal: Proposal | None = None
    answered: Notice | None = None
    """The message of `turn` that holds an answer whose whole text went to `on_text` as the
    model wrote it (None: nothing was streamed, or not all of it)."""


def is_question(text: str) -> bool:
    """Does a reply ask something (`ask ...`, or one line ending with `?`) rather than answer?
    An answer that ends with `?` can be sent in a ``` block."""
    stripped = text.strip()
    if stripped.lower().startswith(ASK_PREFIX):
        return True
    return stripped.endswith("?") and "\n" not in stripped and not stripped.startswith("```")


def read_confirmation(text: str) -> bool | None:
    """True for yes, False for no, None for anything else (a new reply)."""
    lowered = text.strip().lower().rstrip(".!")
    if lowered in ACCEPT_WORDS:
        return True
    if lowered in REJECT_WORDS:
        return False
    return None


@dataclass(frozen=True)
class Assistant:
    """Reads replies with a language model before (questions) and after (refusals) the engine."""

    model: ChatModel
    budget: Budget
    sandbox: Limits = field(default_factory=Limits)
    """What a draft may use when it is tried before it is offered."""
    code_sandbox: Sandbox | None = None
    """Where drafts are tried: None is this host's sandbox, which runs nothing unconfined."""

    def respond(
        self,
        flow: Flow,
        session: Session,
        reply: Reply,
        user: str,
        *,
        on_text: TextSink | None = None,
    ) -> Assisted:
        """The turn for `reply`: the engine's, or an answer to a question, or a proposal (a
        reading of the reply, or a draft of code when the reply is `draft`). Given `on_text`,
        an answer's text also goes there as the model writes it (`Assisted.answered`)."""
        question = open_question(flow, session)
        if question is not None and is_draft_request(flow, session, reply):
            return self.draft(flow, session, question, user)
        zipped = repo_zip_in(reply)
        if question is not None and zipped is not None:
            turn, proposal = answer_repo_zip(self._asker(user), flow, session, question, zipped)
            return Assisted(turn, proposal)
        agent_code = (
            agent_code_in(flow, session, reply)
            if question is not None and question.step_id != TOOLS_STEP  # there: tool code
            else None
        )
        if agent_code is not None and not _has_secret(agent_code):
            return Assisted(recommend_from_code(self._asker(user), flow, session, agent_code))
        text = reply.text.strip()
        plain_text = reply.value is None and not reply.attachments
        if (
            question is not None
            and plain_text
            and is_question(text)
            and len(text) <= MAX_ASSISTED_CHARS
            and not _has_secret(text)
        ):
            return self._answer(flow, session, question, text, user, on_text)
        turn = advance(flow, session, reply)
        if should_recommend(flow, session, turn):
            return Assisted(recommend_ahead(self._asker(user), flow, turn))
        if question is None or not _refused(turn, session) or reply.value is not None:
            return Assisted(turn)
        if _has_secret(text) or any(_has_secret(_decoded(a.content)) for a in reply.attachments):
            return Assisted(turn)  # the engine said why; nothing goes to the model
        if isinstance(flow.step(question.step_id), ValuesMenu):
            return Assisted(turn)
        if question.step_id == TOOLS_STEP:
            code = tool_code_in(reply)
            if code is not None:
                return _offer_tools(flow, session, turn, code)
        if (
            not text
            or not plain_text
            or len(text) > MAX_ASSISTED_CHARS
            or question.kind not in READABLE
        ):
            return Assisted(turn)  # an empty reply (Enter) has nothing for the model to read
        return self._understand(flow, session, question, turn, text, user)

    def draft(self, flow: Flow, session: Session, question: Question, user: str) -> Assisted:
        """A checked draft of the open code question's answer, offered as a proposal."""

        host = self.code_sandbox or Sandbox.for_host()
        turn, proposal = write_draft(self._asker(user), flow, session, question, self.sandbox, host)
        return Assisted(turn, proposal)

    def _asker(self, user: str) -> AskModel:
        """One model call on `user`'s budget, as the drafts and recommendations make them."""

        def ask(messages: list[ChatMessage], schema: dict[str, Any] | None, tokens: int) -> str:
            return self._call(user, messages, schema, tokens)

        return ask

    def _answer(
        self,
        flow: Flow,
        session: Session,
        question: Question,
        asked: str,
        user: str,
        on_text: TextSink | None,
    ) -> Assisted:
        """Answer the question and ask the open one again; the session does not move. The
        answer streams to `on_text` when given and the model can."""
        if asked.lower().startswith(ASK_PREFIX):
            asked = asked[len(ASK_PREFIX) :].strip()
        again = begin(flow, session)
        shown = _ShownAnswer(on_text) if on_text is not None else None
        try:
            reply = self._call(
                user,
                answering_messages(flow, session, question, asked),
                None,
                ANSWER_TOKENS,
                on_text=shown,
            )
        except ModelUnavailable as why:
            return Assisted(Turn(again.session, (_note(str(why)), *again.messages)))
        answer = Notice(reply[:MAX_SHOWN_ANSWER_CHARS].strip())
        turn = Turn(again.session, (answer, *again.messages))
        return Assisted(turn, answered=answer if shown is not None and shown.given else None)

    def _understand(
        self, flow: Flow, session: Session, question: Question, refused: Turn, text: str, user: str
    ) -> Assisted:
        values = choice_values(flow, question)
        try:
            raw = self._call(
                user,
                understanding_messages(flow, session, question, text),
                understanding_schema(values),
                UNDERSTANDING_TOKENS,
            )
            reading = read_json_object(raw)
            understood = reading.get("understood")
            value = reading.get("value")
            reason = reading.get("reason", "")
            if not isinstance(understood, bool) or not isinstance(reason, str):
                raise ModelUnavailable("its reply did not follow the schema")
            if not understood or value is None:
                return Assisted(refused)
            if not isinstance(value, str) or not value.strip():
                raise ModelUnavailable("its reply did not follow the schema")
            if values is not None and value not in values:
                raise ModelUnavailable("it picked something that is not an option")
        except ModelUnavailable as why:
            return Assisted(_with_note(refused, _note(str(why))))
        value = value.strip()
        reason = _clip(redact_secrets(reason), 300)
        proposal = trial(flow, session, question.step_id, value, reason)
        if proposal is None or len(value) > MAX_PROPOSED_CHARS:
            read_as = _clip(redact_secrets(value), 80)
            note = f"(The assistant read it as “{read_as}”, which is not a valid answer either.)"
            return Assisted(_with_note(refused, Notice(note)))
        return Assisted(Turn(session), proposal)

    def _call(
        self,
        user: str,
        messages: list[ChatMessage],
        schema: dict[str, Any] | None,
        max_tokens: int,
        *,
        on_text: TextSink | None = None,
    ) -> str:
        """One model call on `user`'s budget; streamed to `on_text` where the model can (plain
        text only)."""
        refused = self.budget.take(user)
        if refused:
            raise ModelUnavailable(refused)
        if on_text is not None and schema is None and isinstance(self.model, StreamingChatModel):
            completion = self.model.stream(messages, max_tokens=max_tokens, on_text=on_text)
        else:
            completion = self.model.complete(messages, schema=schema, max_tokens=max_tokens)
        self.budget.charge(user, completion.tokens)
        return completion.text


class _ShownAnswer:
    """Passes on what of a streamed answer is shown: the first MAX_SHOWN_ANSWER_CHARS
    characters of the reply, leading whitespace left out, as the one-message answer is cut."""

    def __init__(self, sink: TextSink) -> None:
        self._sink = sink
        self._seen = 0
        self.given = False
        """Has any text gone to the sink?"""

    def __call__(self, piece: str) -> None:
        shown = piece[: max(MAX_SHOWN_ANSWER_CHARS - self._seen, 0)]
        self._seen += len(piece)
        if not self.given:
            shown = shown.lstrip()
        if shown:
            self.given = True
            self._sink(shown)


def _offer_tools(flow: Flow, session: Session, refused: Turn, code: str) -> Assisted:
    """Tool schemas read from the user's functions (no model), offered as the answer."""
    try:
        schemas = tool_schemas_from_code(code)
    except InvalidAnswer as error:
        return Assisted(_with_note(refused, Notice(f"(Reading it as tool code: {error})")))
    proposal = trial(flow, session, TOOLS_STEP, json.dumps(schemas), tools_summary(schemas))
    if proposal is None:
        return Assisted(refused)
    return Assisted(Turn(session), proposal)


def _refused(turn: Turn, session: Session) -> bool:
    """The engine refused the reply: a problem said, nothing answered or done."""
    return (
        not turn.effects
        and any(isinstance(m, Problem) for m in turn.messages)
        and turn.session.answers == session.answers
        and turn.session.status == session.status
    )


def _with_note(turn: Turn, note: Notice) -> Turn:
    """`turn` with `note` just before its question."""
    messages = list(turn.messages)
    at = next((i for i, m in enumerate(messages) if isinstance(m, Question)), len(messages))
    messages.insert(at, note)
    return Turn(turn.session, tuple(messages), turn.effects)


def _note(reason: str) -> Notice:
    return Notice(f"(The assistant could not help this time: {reason}.)")


def _has_secret(text: str) -> bool:
    return redact_secrets(text) != text


def _decoded(content: bytes) -> str:
    return content[: MAX_ASSISTED_CHARS * 100].decode("utf-8", "replace")


def _clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"
