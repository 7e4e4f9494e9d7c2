"""The stand-in policy through the real `openai` client, and the RULER judge through litellm."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator

import openai
import pytest
from openai.types.chat import ChatCompletionMessageParam, ChatCompletionUserMessageParam

from checks.dryrun.standins.policy_server import PolicyServer

TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "search_catalog",
            "description": "Search the catalog.",
            "parameters": {
                "type": "object",
                "properties": {
                    "keyword": {"type": "string"},
                    "limit": {"type": "integer", "minimum": 1, "maximum": 5},
                    "exact": {"type": "boolean"},
                    "shelf": {"type": "string", "enum": ["A", "B"]},
                },
                "required": ["keyword"],
            },
        },
    },
    {
        "type": "function",
        "function": {
            "name": "submit_answer",
            "description": "Submit the answer.",
            "parameters": {"type": "object", "properties": {"title": {"type": "string"}}},
        },
    },
]
QUESTION: ChatCompletionUserMessageParam = {
    "role": "user",
    "content": "Which book is about dunes: Dune or Emma?",
}


@pytest.fixture
def server() -> Iterator[PolicyServer]:
    with PolicyServer(seed=7) as running:
        running.serve_model("agent", 0)
        yield running


@pytest.fixture
def client(server: PolicyServer) -> openai.OpenAI:
    return openai.OpenAI(base_url=server.base_url, api_key="placeholder", max_retries=0)


def test_a_plain_answer_is_a_well_formed_completion_with_logprobs(
    client: openai.OpenAI,
) -> None:
    response = client.chat.completions.create(
        model="agent@0", messages=[QUESTION], logprobs=True, max_completion_tokens=64
    )

    assert response.object == "chat.completion"
    assert response.id.startswith("chatcmpl-")
    assert response.model == "agent@0"
    assert response.created > 0
    [choice] = response.choices
    assert choice.finish_reason == "stop"
    assert choice.message.role == "assistant"
    assert choice.message.content
    assert choice.logprobs is not None and choice.logprobs.content
    assert "".join(t.token for t in choice.logprobs.content) == choice.message.content
    assert all(t.logprob < 0 for t in choice.logprobs.content)
    assert response.usage is not None
    assert response.usage.completion_tokens == len(choice.logprobs.content)
    assert response.usage.total_tokens == (
        response.usage.prompt_tokens + response.usage.completion_tokens
    )


def test_answers_vary_between_rollouts_and_sometimes_echo_the_prompt(
    client: openai.OpenAI,
) -> None:
    answers = [
        client.chat.completions.create(model="agent@0", messages=[QUESTION])
        .choices[0]
        .message.content
        or ""
        for _ in range(12)
    ]

    assert len(set(answers)) >= 4
    assert any("Dune" in a or "Emma" in a for a in answers)
    assert not all("Dune" in a for a in answers)


def test_the_same_run_gets_the_same_answers() -> None:
    def answers() -> list[str | None]:
        with PolicyServer(seed=3) as server:
            client = openai.OpenAI(base_url=server.base_url, api_key="x", max_retries=0)
            return [
                client.chat.completions.create(model="m", messages=[QUESTION])
                .choices[0]
                .message.content
                for _ in range(5)
            ]

    assert answers() == answers()


def test_the_first_turn_calls_a_tool_with_arguments_that_fit_its_schema(
    client: openai.OpenAI,
) -> None:
    for _ in range(6):
        response = client.chat.completions.create(
            model="agent@0",
            messages=[QUESTION],
            tools=TOOLS,  # type: ignore[arg-type]
        )
        [choice] = response.choices
        assert choice.finish_reason == "tool_calls"
        assert choice.message.content is None
        assert choice.logprobs is not None and choice.logprobs.content
        [call] = choice.message.tool_calls or []
        assert call.type == "function"  # narrows the union for the type checker too
        assert call.id.startswith("call_")
        # The first turn uses a working tool, not the finishing one.
        assert call.function.name == "search_catalog"
        arguments = json.loads(call.function.arguments)
        assert isinstance(arguments["keyword"], str)
        assert 1 <= arguments["limit"] <= 5
        assert isinstance(arguments["exact"], bool)
        assert arguments["shelf"] in ("A", "B")


def test_after_tool_results_the_policy_answers_or_finishes(client: openai.OpenAI) -> None:
    first = client.chat.completions.create(
        model="agent@0",
        messages=[QUESTION],
        tools=TOOLS,  # type: ignore[arg-type]
    )
    call = (first.choices[0].message.tool_calls or [])[0]
    history: list[ChatCompletionMessageParam] = [
        QUESTION,
        first.choices[0].message.model_dump(exclude_none=True),  # type: ignore[list-item]
        {"role": "tool", "tool_call_id": call.id, "content": '["Dune"]'},
    ]
    outcomes = set()
    for _ in range(12):
        choice = (
            client.chat.completions.create(
                model="agent@0",
                messages=history,
                tools=TOOLS,  # type: ignore[arg-type]
            )
        ).choices[0]
        calls = choice.message.tool_calls or []
        called = calls[0].function.name if calls and calls[0].type == "function" else None
        outcomes.add(called or "text")

    assert {"text", "submit_answer"} <= outcomes


def test_tool_choice_none_gets_text(client: openai.OpenAI) -> None:
    response = client.chat.completions.create(
        model="agent@0",
        messages=[QUESTION],
        tools=TOOLS,  # type: ignore[arg-type]
        tool_choice="none",
    )

    assert response.choices[0].message.tool_calls is None
    assert response.choices[0].message.content


def test_streaming_yields_the_content_and_a_finish_reason(client: openai.OpenAI) -> None:
    stream = client.chat.completions.create(
        model="agent@0",
        messages=[QUESTION],
        stream=True,
        stream_options={"include_usage": True},
    )
    chunks = list(stream)

    content = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert content
    assert [c.choices[0].finish_reason for c in chunks if c.choices][-1] == "stop"
    assert chunks[-1].usage is not None


def test_a_json_schema_response_format_gets_json_that_fits(client: openai.OpenAI) -> None:
    response = client.chat.completions.create(
        model="gpt-4.1",
        messages=[QUESTION],
        response_format={
            "type": "json_schema",
            "json_schema": {
                "name": "Verdict",
                "schema": {
                    "type": "object",
                    "properties": {"book": {"type": "string"}, "sure": {"type": "boolean"}},
                },
            },
        },
    )

    verdict = json.loads(response.choices[0].message.content or "")
    assert set(verdict) == {"book", "sure"}


def test_calling_the_policy_by_model_name_is_rejected_like_vllm_would(
    client: openai.OpenAI, server: PolicyServer
) -> None:
    with pytest.raises(openai.NotFoundError, match=r"model=model.get_inference_name\(\)"):
        client.chat.completions.create(model="agent", messages=[QUESTION])

    assert server.stats.rejected


def test_an_old_checkpoint_name_is_counted_as_stale(
    client: openai.OpenAI, server: PolicyServer
) -> None:
    server.serve_model("agent", 2)
    client.chat.completions.create(model="agent@0", messages=[QUESTION])

    assert server.stats.stale_model_requests == 1
    assert server.stats.stale_example == "agent@0 while agent@2 was the newest checkpoint"


def test_models_lists_the_served_checkpoints(client: openai.OpenAI) -> None:
    assert "agent@0" in [model.id for model in client.models.list()]


# litellm's response models warn on serialization; ART silences that at import, but pytest's
# per-test warning capture brings it back.
@pytest.mark.filterwarnings("ignore:Pydantic serializer warnings:UserWarning")
def test_ruler_scores_a_group_through_litellm_for_each_judge(
    server: PolicyServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_BASE", server.base_url)
    monkeypatch.setenv("OPENAI_BASE_URL", server.base_url)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-placeholder")
    import art
    from art.rewards import ruler_score_group

    def group() -> art.TrajectoryGroup:
        return art.TrajectoryGroup(
            art.Trajectory(
                messages_and_choices=[QUESTION, {"role": "assistant", "content": answer}],
                reward=0.0,
            )
            for answer in ("Dune", "Emma", "I do not know", "Dune, by Herbert")
        )

    async def judge_all() -> dict[str, list[float]]:
        rewards: dict[str, list[float]] = {}
        for judge in ("openai/gpt-5.4", "openai/o4-mini"):
            scored = await ruler_score_group(group(), judge_model=judge)
            assert scored is not None
            rewards[judge] = [t.reward for t in scored.trajectories]
            assert all(t.metrics["ruler_score"] == t.reward for t in scored.trajectories)
        return rewards

    rewards = asyncio.run(judge_all())

    for judge, scores in rewards.items():
        assert len(set(scores)) == 4, judge
        assert all(0 <= s <= 1 for s in scores), judge
    assert server.stats.judge_requests == 2
    assert set(server.stats.models_asked) == {"gpt-5.4", "o4-mini"}
