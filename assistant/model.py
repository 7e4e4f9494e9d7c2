"""The language model behind the assistant: one chat completion through the `openai` package,
against OpenAI or any OpenAI-compatible server (vLLM, a model trained with artbot)."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import openai
from openai.types.chat import ChatCompletionMessageParam
from openai.types.shared_params import ResponseFormatJSONSchema

from isolation.redaction import redact


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
        client = openai.OpenAI(api_key=api_key, base_url=base_url, timeout=timeout_s, max_retries=0)
        return cls(client, model)

    def complete(
        self,
        messages: Sequence[ChatMessage],
        *,
        schema: Mapping[str, Any] | None = None,
        max_tokens: int,
    ) -> Completion:
        # The one door to the model: whatever a message holds, configured secrets, credential
        # shapes and URL passwords do not leave (isolation.redaction).
        wire: list[ChatCompletionMessageParam] = [
            {"role": "system", "content": redact(m.content)}
            if m.role == "system"
            else {"role": "user", "content": redact(m.content)}
            for m in messages
        ]
        try:
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
        if not response.choices:
            raise ModelUnavailable("its reply was empty")
        text = response.choices[0].message.content
        if not isinstance(text, str) or not text.strip():
            raise ModelUnavailable("its reply was empty")
        tokens = response.usage.total_tokens if response.usage is not None else 0
        return Completion(text, tokens or _estimate_tokens(messages, text))


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
