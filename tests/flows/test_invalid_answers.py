"""Every question's bad answers get a specific error, the same question again, and lose nothing."""

from __future__ import annotations

import json
from typing import Any

import pytest

from flows import MAX_REPLY_CHARS, Attachment, Problem, Question, Reply, advance
from flows.definition.session import Session
from flows.wizards.rl.train_rl import TRAIN_RL
from tests.flows.matrix import TOOLS, answers_for


def session_at(step_id: str, **overrides: Any) -> Session:
    """A session whose open question is `step_id`, with plausible answers before it."""
    answers = answers_for("single", "programmatic", "dataset", "local", True)
    if step_id in (
        "uses_tools",
        "tools",
        "final_answer_tool",
        "tool_execution",
        "tool_code",
        "tool_urls",
        "tool_auth",
        "simulated_user",
        "simulated_user_model",
        "episode_end",
        "max_turns",
    ):
        answers = answers_for("tools", "programmatic", "dataset", "local", True)
    if step_id in ("environment", "invalid_action"):
        answers = answers_for("game", "programmatic", "dataset", "local", True)
    if step_id in ("reward_mix", "judge_model", "ruler_rubric"):
        answers = answers_for("single", "custom", "dataset", "local", True)
    answers.update(overrides)
    order = [step.id for step in TRAIN_RL.steps]
    kept = {k: v for k, v in answers.items() if order.index(k) < order.index(step_id)}
    session = Session(flow="train-rl", answers=kept)
    assert TRAIN_RL.next_step(session.answers) is not None
    assert TRAIN_RL.next_step(session.answers).id == step_id  # type: ignore[union-attr]
    return session


def refused(session: Session, reply: Reply) -> str:
    """Send a bad reply; check the session is intact and the same question is asked again."""
    step_id = TRAIN_RL.next_step(session.answers).id  # type: ignore[union-attr]
    turn = advance(TRAIN_RL, session, reply)
    problems = [m.text for m in turn.messages if isinstance(m, Problem)]
    assert problems, f"{reply!r} was accepted for {step_id}"
    assert turn.session.answers == session.answers
    assert turn.session.history == session.history
    assert not turn.effects
    questions = [m for m in turn.messages if isinstance(m, Question)]
    assert questions and questions[-1].step_id == step_id
    return problems[0]


GENERATOR = {
    "scenario_source": "generator",
    "scenario_generator": "def generate_scenario(rng):\n    return {'prompt': 'hi'}\n",
}
YAML_REWARD = {
    "reward_logic": {
        "kind": "function",
        "code": (
            "import yaml\n\n\ndef compute_reward(scenario, answer, trajectory):\n"
            "    return float(yaml.safe_load(answer) == scenario['answer'])\n"
        ),
    }
}
CUSTOMER = "You are a customer who wants to add {prompt} up, in a hurry."
HTTP_TOOL = {"tool_execution": "http", "tool_urls": {"add": "POST https://example.com/add"}}
DEEP = "[" * 50_000 + "]" * 50_000
BAD_ANSWERS: list[tuple[str, str, str, dict[str, Any]]] = [
    # step, reply, what the error must say, answers that set the scene
    ("replayable", "", "empty", {}),
    ("replayable", "maybe later", "not one of the options", {}),
    ("replayable", "7", "not one of the options", {}),
    ("turns", "triple", "not one of the options", {}),
    ("task", "short", "too short", {}),
    ("task", "x" * 5000, "keep it under", {}),
    ("scenario_source", "9", "not one of the options", {}),
    ("scenario_rows", "not json at all", "not valid JSON", {}),
    ("scenario_rows", '{"prompt": "a"}\n{"prompt": ', "Line 2 of the JSONL", {}),
    ("scenario_rows", "[1, 2]", "Item 1 is int", {}),
    ("scenario_rows", "[]", "no scenarios", {}),
    ("agent_prompt", "question", "“question” is not a field of your scenarios", {}),
    ("agent_prompt", "prompt; answer", "is not a field name", {}),
    (
        "agent_prompt",
        "default",
        "None of your scenarios' fields is named like a prompt (`answer`)",
        {"scenario_rows": [{"answer": "4"}]},
    ),
    ("agent_prompt", "def render_prompt():\n    return 'x'", "does not match", {}),
    ("scenario_rows", '[{"prompt": "a", "x": NaN}]', "NaN is not valid JSON", {}),
    ("scenario_rows", DEEP, "nested too deeply", {}),
    ("scenario_rows", "1" * 5000, "not usable JSON", {}),
    ("scenarios_path", "data.csv", "must end with .jsonl", {"scenario_source": "runner_file"}),
    ("scenario_generator", "def nope(:", "does not parse", {"scenario_source": "generator"}),
    (
        "scenario_generator",
        "def other(rng):\n    return {}",
        "`generate_scenario`",
        {"scenario_source": "generator"},
    ),
    (
        "scenario_generator",
        "def generate_scenario(rng, difficulty):\n    return {}",
        "does not match how the script calls it: `generate_scenario(rng)`",
        {"scenario_source": "generator"},
    ),
    (
        "scenario_generator",
        "def generate_scenario(rng):\n    return {}\n\ngenerate_scenario = dict",
        "binds `generate_scenario` to something other than a function",
        {"scenario_source": "generator"},
    ),
    (
        "scenario_generator",
        "async def generate_scenario(rng):\n    return {}",
        "must be a plain function, not async",
        {"scenario_source": "generator"},
    ),
    (
        "scenario_generator",
        "def generate_scenario(rng):\n    return {}\n\nreturn None",
        "does not compile: 'return' outside function",
        {"scenario_source": "generator"},
    ),
    ("system_prompt", "bad \x00 byte", "NUL", {}),
    ("uses_tools", "perhaps", "not one of the options", {}),
    ("tools", "[{", "not valid JSON", {}),
    ("tools", "[]", "at least one", {}),
    ("tools", '[{"name": "my-tool", "description": "d"}]', "must be a Python identifier", {}),
    ("tools", '[{"name": "class", "description": "d"}]', "must be a Python identifier", {}),
    ("tools", '[{"name": "add"}]', 'needs a non-empty "description"', {}),
    (
        "tools",
        '[{"name": "add", "description": "d", "parameters": {"type": "array"}}]',
        "JSON-Schema object",
        {},
    ),
    ("tools", json.dumps([TOOLS[0]["function"], TOOLS[0]["function"]]), "used twice", {}),
    (
        "tools",
        json.dumps([{"name": f"t{i}", "description": "d"} for i in range(70)]),
        "the limit is 64",
        {},
    ),
    (
        "tools",
        '[{"name": "add", "description": "d", "parameters": '
        '{"type": "object", "properties": {"a": {}}, "required": ["b"]}}]',
        '"required" must list names',
        {},
    ),
    ("tool_execution", "grpc", "not one of the options", {}),
    (
        "tool_code",
        "def other(a, b):\n    return a",
        "must define a top-level function `add`",
        {"tool_execution": "local"},
    ),
    ("tool_code", "def add(a):\n    return a", "missing: b", {"tool_execution": "local"}),
    (
        "tool_code",
        "def add(a, b, carry):\n    return a + b + carry",
        "`add(a, b, carry)` requires `carry`, which the tool's schema does not have",
        {"tool_execution": "local"},
    ),
    (
        "tool_code",
        "def add(a, b, /):\n    return a + b",
        "remove the `/`",
        {"tool_execution": "local"},
    ),
    ("tool_code", "def add(a, b) return a", "does not parse", {"tool_execution": "local"}),
    ("tool_urls", "add: ftp://example.com/add", "not an http(s) URL", {"tool_execution": "http"}),
    ("tool_urls", "sub: https://example.com/sub", "no tool named sub", {"tool_execution": "http"}),
    ("tool_urls", "{}", "missing: add", {"tool_execution": "http"}),
    (
        "tool_urls",
        "add: GET https://example.com/add/{x}",
        "`{x}` in add's URL is neither",
        {"tool_execution": "http"},
    ),
    ("tool_auth", "Authorization: Bearer", "exactly one environment variable", HTTP_TOOL),
    ("tool_auth", "Content-Type: $KEY", "set by the HTTP client", HTTP_TOOL),
    ("simulated_user", "A customer.", "Describe who the simulated user is", {}),
    ("simulated_user", CUSTOMER.replace("{prompt}", "{sum}"), "`{sum}` is not a field", {}),
    (
        "simulated_user_model",
        "openai/o4-mini",
        "shut `openai/o4-mini` down",
        {"simulated_user": {"instructions": CUSTOMER}},
    ),
    ("environment", "def create_game(s):\n    return {}", "`render_observation`", {}),
    ("episode_end", "ab", "too short", {}),
    ("max_turns", "0", "out of range", {}),
    ("max_turns", "1001", "out of range: give a number from 1 to 1000", {}),
    ("invalid_action", "skip it", "not one of the options", {}),
    ("max_turns", "ten", "is not a number", {}),
    ("max_turns", "1.5", "not a whole number", {}),
    ("max_turns", "1e400", "must be finite", {}),
    ("reward", "maybe", "not one of the options", {}),
    ("reward_logic", "1.0 if", "does not parse", {}),
    (
        "reward_logic",
        "1.0 if scenario['solution'] == answer else 0.0",
        "has no “solution” field",
        {},
    ),
    (
        "reward_logic",
        "def compute_reward(response, expected):\n    return 1.0",
        "`compute_reward(response, expected)` cannot be called as the reward: the script has "
        "nothing to pass as `response`. The script passes `scenario`, `answer`, `trajectory` by "
        "name",
        {},
    ),
    (
        "reward_logic",
        "def compute_reward(answer, *, strict):\n    return 1.0",
        "nothing to pass as `strict`",
        {},
    ),
    ("reward_logic", "import os", "`compute_reward`", {}),
    ("extra_packages", "pyyaml @ https://evil.example/x.whl", "no URLs", YAML_REWARD),
    ("extra_packages", "--index-url https://evil.example pyyaml", "no URLs", YAML_REWARD),
    ("extra_packages", "./vendor/pyyaml", "not a package requirement", YAML_REWARD),
    ("extra_packages", 'pyyaml; python_version < "3.12"', "not a package requirement", YAML_REWARD),
    ("extra_packages", 'pyyaml"]\nevil = ["x', "not a package requirement", YAML_REWARD),
    ("extra_packages", '["pyyaml", 3]', "a JSON list of requirement strings", YAML_REWARD),
    ("reward_mix", "2", "out of range", {}),
    ("judge_model", "gpt 5", "not a LiteLLM model id", {}),
    ("judge_model", "openai/o4-mini", "OpenAI shut `openai/o4-mini` down on 2026-10-23", {}),
    ("judge_model", "OpenAI/O1", "every call to it would fail", {}),
    ("ruler_rubric", "be strict", "too short", {}),
    ("train_fraction", "0", "out of range", {"train_split": "fraction"}),
    ("train_fraction", "1.5", "out of range", {"train_split": "fraction"}),
    ("val_fraction", "1", "out of range", {}),
    (
        "val_fraction",
        "0.3",
        "together take more",
        {"train_split": "fraction", "train_fraction": 0.8},
    ),
    ("val_every", "0", "out of range", {}),
    ("base_model", "gpt-4", "not one of the options", {}),
    ("project", "my project", "not a safe name", {}),
    ("project", "../etc", "not a safe name", {}),
    ("project", "a" * 65, "keep it to 64", {}),
    ("run_name", "default name", "not a safe name", {}),
    ("run_name", "", "empty", {}),
    ("run_name", "random", "`random` is a module of Python's standard library", {}),
    ("run_name", "math", "saved as `math.py`", {}),
    ("run_name", "art", "`art` is ART itself", {}),
    ("run_name", "openai", "a module the script's dependencies provide", {}),
    ("run_name", "torch", "a module the script's dependencies provide", {}),
    (
        "run_name",
        "yaml",
        "`yaml` is a module your code imports",
        {**YAML_REWARD, "extra_packages": {"imports": ["yaml"], "requirements": ["pyyaml"]}},
    ),
    ("backend", "gpu", "not one of the options", {}),
    ("hyperparameters", "some", "not one of the options", {}),
    ("iteration", "dataset", "no fixed dataset", {**GENERATOR, "val_generated": "none"}),
]


@pytest.mark.parametrize(("step", "reply", "expected", "scene"), BAD_ANSWERS)
def test_bad_answer_is_refused_with_a_specific_error(
    step: str, reply: str, expected: str, scene: dict[str, Any]
) -> None:
    problem = refused(session_at(step, **scene), Reply(text=reply))
    assert expected in problem


def test_a_reply_over_the_size_limit_is_refused_before_parsing() -> None:
    problem = refused(session_at("scenario_rows"), Reply(text="x" * (MAX_REPLY_CHARS + 1)))
    assert "the limit is 200,000" in problem


def test_a_file_answers_a_data_question_and_a_wrong_file_is_refused() -> None:
    session = session_at("scenario_rows")
    assert "not a .jsonl or .json file" in refused(
        session, Reply(attachments=(Attachment("rows.csv", b"a,b"),))
    )
    assert "not UTF-8" in refused(
        session, Reply(attachments=(Attachment("rows.jsonl", b"\xff\xfe\x00"),))
    )
    huge = Attachment("rows.jsonl", b"{}\n" * 2_000_000)
    assert "the limit is 5,000,000" in refused(session, Reply(attachments=(huge,)))
    assert "does not take a file" in refused(
        session_at("task"), Reply(attachments=(Attachment("a.jsonl", b"{}"),))
    )
    good = Attachment("rows.jsonl", b'{"prompt": "1+1?", "answer": "2"}\n')
    turn = advance(TRAIN_RL, session, Reply(attachments=(good,)))
    assert turn.session.answers["scenario_rows"] == [{"prompt": "1+1?", "answer": "2"}]


def test_a_typed_answer_to_a_button_question_and_a_button_to_a_text_question() -> None:
    assert "not one of this question's options" in refused(
        session_at("backend"), Reply.button("backend", "gpu")
    )
    assert "typed answer" in refused(session_at("task"), Reply.button("task", "x"))


@pytest.mark.parametrize(
    "secret",
    [
        "sk-proj-abcdefghijklmnopqrstuvwxyz0123456789",
        "xoxb-1234567890-abcdefghijkl",
        "my key is hf_abcdefghijklmnopqrstuvwxyz0123456789",
        "OPENAI_API_KEY=abcdefghijklmnop0123456789",
    ],
)
def test_a_reply_that_looks_like_a_key_is_neither_stored_nor_echoed(secret: str) -> None:
    session = session_at("task")
    turn = advance(TRAIN_RL, session, Reply(text=secret))
    assert turn.session.answers == session.answers
    assert not turn.effects
    said = " ".join(getattr(m, "text", "") for m in turn.messages)
    assert "never stores" in said
    assert secret not in said and secret.split()[-1] not in said


def test_three_failures_explain_the_question_with_an_example_and_never_dead_end() -> None:
    session = session_at("max_turns")
    for attempt in range(1, 5):
        turn = advance(TRAIN_RL, session, Reply(text="lots"))
        session = turn.session
        problem = next(m.text for m in turn.messages if isinstance(m, Problem))
        assert ("For example" in problem) == (attempt >= 3)
    turn = advance(TRAIN_RL, session, Reply(text="7"))
    assert turn.session.answers["max_turns"] == 7
    assert "max_turns" not in turn.session.failures


SCENES: dict[str, dict[str, Any]] = {
    "scenarios_path": {"scenario_source": "runner_file"},
    "scenario_generator": {"scenario_source": "generator"},
    "val_generated": GENERATOR,
    "train_fraction": {"train_split": "fraction"},
    "train_source": {"train_split": "separate"},
    "val_source": {"val_split": "separate"},
    "tool_code": {"tool_execution": "local"},
    "tool_urls": {"tool_execution": "http"},
    "tool_auth": HTTP_TOOL,
    "simulated_user_model": {"simulated_user": {"instructions": CUSTOMER}},
    "hyperparameter_values": {"hyperparameters": "customize"},
    "extra_packages": YAML_REWARD,
}
"""What each question needs answered before it, beyond session_at's plausible answers."""


@pytest.mark.parametrize("step", [step.id for step in TRAIN_RL.steps])
def test_every_question_refuses_an_empty_answer(step: str) -> None:
    refused(session_at(step, **SCENES.get(step, {})), Reply(text="   "))


@pytest.mark.parametrize("step", [step.id for step in TRAIN_RL.steps])
def test_three_failures_explain_every_question_with_an_example_of_an_answer(step: str) -> None:
    session = session_at(step, **SCENES.get(step, {}))
    for _ in range(3):
        turn = advance(TRAIN_RL, session, Reply(text="   "))
        session = turn.session
    problem = next(m.text for m in turn.messages if isinstance(m, Problem))
    asked = next(m for m in turn.messages if isinstance(m, Question))
    explained = problem.split("\n\n", 1)[1]
    if asked.options:  # a choice or a menu: every option, numbered, and how to pick one
        for option in asked.options:
            assert f"{option.number}. {option.label}" in explained
        assert "for example `1`" in explained.lower()
    else:
        assert "For example" in explained
    assert explained.endswith("Or say `back` to change an earlier answer, or `help`.")
