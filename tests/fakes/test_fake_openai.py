"""The fake OpenAI server refuses what OpenAI refuses, and the real `openai` client reads what it
says the way it reads OpenAI."""

from __future__ import annotations

import openai
import pytest

from tests.fakes.openai_server import FakeOpenAI, Scripted


def client(fake: FakeOpenAI, key: str | None = None) -> openai.OpenAI:
    return openai.OpenAI(
        api_key=key or fake.key, base_url=fake.base_url, max_retries=0, timeout=0.5
    )


def test_the_client_reads_a_scripted_completion() -> None:
    with FakeOpenAI() as fake:
        fake.script(Scripted.text("Hello."))
        response = client(fake).chat.completions.create(
            model="m", messages=[{"role": "user", "content": "hi"}], max_tokens=5
        )
        assert response.choices[0].message.content == "Hello."
        assert response.usage is not None and response.usage.completion_tokens == 20
        assert fake.requests[0]["messages"] == [{"role": "user", "content": "hi"}]


def test_a_wrong_key_is_refused_as_openai_does() -> None:
    with FakeOpenAI() as fake, pytest.raises(openai.AuthenticationError):
        client(fake, key="wrong").chat.completions.create(
            model="m", messages=[{"role": "user", "content": "hi"}]
        )


def test_a_strict_schema_must_require_every_property_and_allow_no_others() -> None:
    loose = {"type": "object", "properties": {"a": {"type": "string"}}, "required": []}
    with FakeOpenAI() as fake, pytest.raises(openai.BadRequestError):
        client(fake).chat.completions.create(
            model="m",
            messages=[{"role": "user", "content": "hi"}],
            response_format={
                "type": "json_schema",
                "json_schema": {"name": "answer", "schema": loose, "strict": True},
            },
        )
    assert fake.refused == [
        "Invalid schema: 'additionalProperties' is required to be false (schema)."
    ]


def test_429_reads_as_a_rate_limit_and_a_hang_as_a_timeout() -> None:
    with FakeOpenAI() as fake:
        fake.script(Scripted.error(429), Scripted.timeout())
        with pytest.raises(openai.RateLimitError):
            client(fake).chat.completions.create(
                model="m", messages=[{"role": "user", "content": "hi"}]
            )
        with pytest.raises(openai.APITimeoutError):
            client(fake).chat.completions.create(
                model="m", messages=[{"role": "user", "content": "hi"}]
            )


@pytest.mark.parametrize(
    ("schema", "why"),
    [
        (
            {
                "type": "object",
                "properties": {"items": {"type": "array"}},
                "required": ["items"],
                "additionalProperties": False,
            },
            "Invalid schema: an array must define 'items' (schema.items).",
        ),
        (
            {
                "type": "object",
                "properties": {
                    "items": {
                        "type": "array",
                        "items": {"type": "object", "properties": {"a": {"type": "string"}}},
                    }
                },
                "required": ["items"],
                "additionalProperties": False,
            },
            "Invalid schema: 'additionalProperties' is required to be false (schema.items.items).",
        ),
    ],
    ids=["array without items", "loose object in an array"],
)
def test_a_strict_schema_is_checked_inside_arrays(schema: dict[str, object], why: str) -> None:
    with FakeOpenAI() as fake, pytest.raises(openai.BadRequestError):
        client(fake).chat.completions.create(
            model="m",
            messages=[{"role": "user", "content": "hi"}],
            response_format={
                "type": "json_schema",
                "json_schema": {"name": "answer", "schema": schema, "strict": True},
            },
        )
    assert fake.refused == [why]


def test_max_tokens_below_one_is_refused() -> None:
    with FakeOpenAI() as fake, pytest.raises(openai.BadRequestError):
        client(fake).chat.completions.create(
            model="m", messages=[{"role": "user", "content": "hi"}], max_tokens=0
        )
    assert fake.refused[0].startswith("Invalid 'max_tokens'")


def test_a_streamed_completion_arrives_in_its_pieces_with_the_usage_last() -> None:
    with FakeOpenAI() as fake:
        fake.script(Scripted.streamed("Static ", "means fixed", "."), Scripted.words("go", 9))
        chunks = list(
            client(fake).chat.completions.create(
                model="m",
                messages=[{"role": "user", "content": "hi"}],
                max_tokens=50,
                stream=True,
                stream_options={"include_usage": True},
            )
        )
        texts = [c.choices[0].delta.content for c in chunks if c.choices]
        assert texts == ["", "Static ", "means fixed", ".", None]
        assert [c.choices[0].finish_reason for c in chunks if c.choices][-1] == "stop"
        assert chunks[-1].choices == [] and chunks[-1].usage is not None
        assert chunks[-1].usage.completion_tokens == 20
        # Without include_usage no usage; a reply over max_tokens is cut, finish_reason length.
        cut = list(
            client(fake).chat.completions.create(
                model="m", messages=[{"role": "user", "content": "hi"}], max_tokens=3, stream=True
            )
        )
        assert all(c.usage is None for c in cut)
        assert "".join(c.choices[0].delta.content or "" for c in cut) == "go go go"
        assert cut[-1].choices[0].finish_reason == "length"


def test_stream_options_without_stream_are_refused_as_openai_does() -> None:
    with FakeOpenAI() as fake, pytest.raises(openai.BadRequestError):
        client(fake).chat.completions.create(
            model="m",
            messages=[{"role": "user", "content": "hi"}],
            stream_options={"include_usage": True},
        )
    assert fake.refused == [
        "The 'stream_options' parameter is only allowed when 'stream' is enabled."
    ]
