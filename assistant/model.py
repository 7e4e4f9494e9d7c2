"""The language model behind the assistant: one chat completion through the `openai` package,
against OpenAI or any OpenAI-compatible server (vLLM, a model trained with artbot)."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

import httpx

from isolation.redaction import redact

if TYPE_CHECKING:
    # `openai` is imported where a model is connected: its types take seconds to load, and
    # `artbot chat` without an assistant never needs them.
    import openai
    from openai.types.chat import ChatCompletionMessageParam
    from openai.types.shared_params import ResponseFormatJSONSchema


class ModelUnavailable(Exception):
    """No usable reply this time (timeout, rate limit, server error, malformed output); the
    message is one short reason a user may read."""


@dataclass(frozen=True)
class Completion:
    text: str
    tokens: int
    """Tokens the call cost (prompt and completion), as the server counted them."""


@dataclass(frozen=True)
class ChatMessage:
    role: str  # "system" or "user"
    content: str


class ChatModel(Protocol):
    def complete(
        self,
        messages: Sequence[ChatMessage],
        *,
        schema: Mapping[str, Any] | None = None,
        max_tokens: int,
    ) -> Completion:
        """The model's reply; with `schema`, JSON text asked for by structured output.
        Raises ModelUnavailable."""
        ...


TextSink = Callable[[str], None]
"""Takes the model's text as it is written, a piece at a time."""


@runtime_checkable
class StreamingChatModel(Protocol):
    """A ChatModel that can also hand its reply over as it is written (an optional capability:
    a model with only `complete` answers in one piece)."""

    def stream(
        self, messages: Sequence[ChatMessage], *, max_tokens: int, on_text: TextSink
    ) -> Completion:
        """The model's plain-text reply, each piece given to `on_text` as it arrives, then the
        whole of it. Raises ModelUnavailable, also after some pieces were given."""
        ...


@dataclass(frozen=True)
class OpenAIChatModel:
    """A ChatModel over `openai.OpenAI`. No retries: a slow or refused call degrades to the plain
    question at once rather than keeping the user waiting."""

    client: openai.OpenAI
    model: str

    @classmethod
    def connect(
        cls, model: str, *, base_url: str | None, api_key: str, timeout_s: float
    ) -> OpenAIChatModel:
        import openai

        client = openai.OpenAI(api_key=api_key, base_url=base_url, timeout=timeout_s, max_retries=0)
        return cls(client, model)

    def complete(
        self,
        messages: Sequence[ChatMessage],
        *,
        schema: Mapping[str, Any] | None = None,
        max_tokens: int,
    ) -> Completion:
        wire = _wire(messages)
        with _unavailable_on_errors():
            if schema is None:
                response = self.client.chat.completions.create(
                    model=self.model, messages=wire, max_tokens=max_tokens, temperature=0
                )
            else:
                response_format: ResponseFormatJSONSchema = {
                    "type": "json_schema",
                    "json_schema": {"name": "answer", "schema": dict(schema), "strict": True},
                }
                response = self.client.chat.completions.create(
                    model=self.model,
                    messages=wire,
                    max_tokens=max_tokens,
                    temperature=0,
                    response_format=response_format,
                )
        if not response.choices:
            raise ModelUnavailable("its reply was empty")
        text = response.choices[0].message.content
        if not isinstance(text, str) or not text.strip():
            raise ModelUnavailable("its reply was empty")
        tokens = response.usage.total_tokens if response.usage is not None else 0
        return Completion(text, tokens or _estimate_tokens(messages, text))

    def stream(
        self, messages: Sequence[ChatMessage], *, max_tokens: int, on_text: TextSink
    ) -> Completion:
        """As `complete` without a schema, the reply streamed: each content delta to `on_text`,
        the usage from the stream's last chunk (`include_usage`)."""
        wire = _wire(messages)
        pieces: list[str] = []
        tokens = 0
        with _unavailable_on_errors():
            chunks = self.client.chat.completions.create(
                model=self.model,
                messages=wire,
                max_tokens=max_tokens,
                temperature=0,
                stream=True,
                stream_options={"include_usage": True},
            )
            with chunks:
                for chunk in chunks:
                    if chunk.usage is not None:
                        tokens = chunk.usage.total_tokens
                    for choice in chunk.choices:
                        piece = choice.delta.content if choice.index == 0 else None
                        if piece:
                            pieces.append(piece)
                            on_text(piece)
        text = "".join(pieces)
        if not text.strip():
            raise ModelUnavailable("its reply was empty")
        return Completion(text, tokens or _estimate_tokens(messages, text))


def _wire(messages: Sequence[ChatMessage]) -> list[ChatCompletionMessageParam]:
    """The one door to the model: whatever a message holds, configured secrets, credential
    shapes and URL passwords do not leave (isolation.redaction)."""
    return [
        {"role": "system", "content": redact(m.content)}
        if m.role == "system"
        else {"role": "user", "content": redact(m.content)}
        for m in messages
    ]


@contextmanager
def _unavailable_on_errors() -> Iterator[None]:
    """The openai package's errors as ModelUnavailable, with a reason a user may read."""
    import openai

    try:
        yield
    except openai.APITimeoutError:
        raise ModelUnavailable("it took too long") from None
    except openai.RateLimitError:
        raise ModelUnavailable("it is rate-limited right now") from None
    except openai.APIStatusError as error:
        raise ModelUnavailable(f"its server answered {error.status_code}") from None
    except openai.APIConnectionError:
        raise ModelUnavailable("its server cannot be reached") from None
    except openai.OpenAIError:
        raise ModelUnavailable("its reply could not be read") from None
    except httpx.TimeoutException:  # a stream read times out or drops past openai's wrapping
        raise ModelUnavailable("it took too long") from None
    except httpx.HTTPError:
        raise ModelUnavailable("its server cannot be reached") from None


def _estimate_tokens(messages: Sequence[ChatMessage], reply: str) -> int:
    """About four characters a token: for servers that report no usage."""
    return (sum(len(m.content) for m in messages) + len(reply)) // 4 + 1


def read_json_object(text: str) -> dict[str, Any]:
    """A structured reply as a JSON object; ModelUnavailable when it is not one."""
    try:
        loaded = json.loads(text)
    except json.JSONDecodeError:
        raise ModelUnavailable("its reply was not valid JSON") from None
    if not isinstance(loaded, dict):
        raise ModelUnavailable("its reply was not a JSON object")
    return loaded
