"""How well the assistant understands, answers, drafts and recommends: a small eval set of
realistic replies (written from ART's train-rl skill and examples) run through the real
Assistant, printing numbers.

    uv run python benchmarks/assistant_eval.py            # ARTBOT_LLM_* set: that model
    uv run python benchmarks/assistant_eval.py --fake     # the scripted fake OpenAI server

With a model configured (ARTBOT_LLM_MODEL, ARTBOT_LLM_BASE_URL, ARTBOT_LLM_API_KEY or
OPENAI_API_KEY) the cases go to it; with none (or `--fake`) to the loopback fake of
tests/fakes/openai_server.py, scripted with the expected replies: that checks the harness and
measures artbot's own overhead (the numbers of a perfect model), not a model.

Printed: understanding accuracy (the proposal is the expected answer), questions answered
without moving the session, drafts that pass their checks (sandbox included) on the first try
and after the one retry, recommendations right (each expected step and value), tokens per case,
and latency per model call and per case (p50 / p95). Drafts run their sandbox in child
processes; only the model's server is contacted.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from assistant import (  # noqa: E402
    Assistant,
    Budget,
    ChatModel,
    Completion,
    OpenAIChatModel,
    load_assistant_settings,
)
from assistant.model import ChatMessage  # noqa: E402
from flows import TRAIN_RL, Notice, Reply, Session, advance, begin  # noqa: E402
from tests.fakes.openai_server import FakeOpenAI, Scripted  # noqa: E402
from tests.flows.matrix import GUESS_ROWS, MATH_ROWS, TOOLS  # noqa: E402

BIGGER_QWEN = "Qwen/Qwen3-30B-A3B-Instruct-2507"
MATH = "Answer grade-school arithmetic questions with just the final number."
GUESSING = "Guess the secret number from 1 to 9 in as few guesses as possible."
DOCS = "Answer questions about our product docs by calling a search tool, then answering."
SUPPORT = "Write friendly, accurate replies to customer support emails about billing."
SUPPORT_ROWS = [
    {"prompt": "I was charged twice for my March invoice, can you help?"},
    {"prompt": "How do I change the card my subscription is billed to?"},
    {"prompt": "Why did my plan price go up this month?"},
]

# Where each case starts: replies the engine accepts, in order.
AT_REPLAYABLE: list[str] = []
AT_TURNS = ["yes"]
AT_SOURCE = ["static", "single", MATH]
AT_ROWS_MATH = [*AT_SOURCE, "inline"]
AT_AGENT_PROMPT = [*AT_ROWS_MATH, json.dumps(MATH_ROWS[:4]), "skip"]
AT_REWARD = [*AT_AGENT_PROMPT, "default"]
AT_REWARD_LOGIC = [*AT_REWARD, "programmatic"]
AT_JUDGE = [*AT_REWARD, "ruler"]
AT_VAL_SPLIT = [*AT_JUDGE, "1", "default", "all"]
AT_VAL_FRACTION = [*AT_VAL_SPLIT, "held_out"]
AT_BASE_MODEL = [*AT_VAL_FRACTION, "0.25", "default", "default"]
AT_GAME_ROWS = ["yes", "multi", GUESSING, "inline"]
AT_ENVIRONMENT = [*AT_GAME_ROWS, json.dumps(GUESS_ROWS[:4]), "skip", "no"]
AT_MAX_TURNS = [
    *AT_ENVIRONMENT,
    "def create_game(scenario):\n    return {'target': scenario['target'], 'guesses': []}\n\n"
    "def render_observation(game):\n    return str(game['guesses'])\n\n"
    "def apply_action(game, action):\n    game['guesses'].append(int(action))\n\n"
    "def is_finished(game):\n    return game['target'] in game['guesses']\n",
    "end",
    "When the number is guessed.",
]
AT_DOCS_ROWS = ["yes", "multi", DOCS, "inline"]
AT_TOOL_CODE = [
    *AT_DOCS_ROWS,
    json.dumps(MATH_ROWS[:3]),
    "skip",
    "yes",
    "default",
    json.dumps(TOOLS),
    "none",
    "local",
]
AT_TOOLS = AT_TOOL_CODE[: AT_TOOL_CODE.index(json.dumps(TOOLS))]
AT_GENERATOR = ["static", "single", MATH, "generator"]
AT_SUPPORT_ROWS = ["static", "single", SUPPORT, "inline"]

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
    "    game['guesses'].append(int(action.strip()))\n\n"
    "def is_finished(game):\n"
    "    return game['target'] in game['guesses'] or len(game['guesses']) >= 5\n"
)
ADD_TOOL = "def add(a: int, b: int) -> str:\n    return str(a + b)\n"
GENERATOR = (
    "def generate_scenario(rng):\n"
    "    a, b = rng.randint(1, 99), rng.randint(1, 99)\n"
    "    return {'prompt': f'What is {a} + {b}?', 'answer': str(a + b)}\n"
)


@dataclass(frozen=True)
class Case:
    """One reply at one point of the wizard, and what a careful engineer expects of it."""

    kind: str  # understanding, question, draft, recommendation
    at: list[str]
    reply: str
    expected: Any = None
    """understanding: the answer; recommendation: {step: value}; others: unused."""
    fake: tuple[Scripted, ...] = ()
    """What the fake model says (the expected replies)."""


def reading(value: str, why: str) -> Scripted:
    return Scripted.json({"understood": True, "value": value, "reason": why})


def advice(expected: Mapping[str, str]) -> Scripted:
    items = [{"step": s, "value": v, "reason": "Expected."} for s, v in expected.items()]
    return Scripted.json({"recommendations": items})


def drafted(code: str) -> Scripted:
    return Scripted.json({"code": code, "summary": "The expected draft."})


def understanding(at: list[str], reply: str, expected: str) -> Case:
    return Case("understanding", at, reply, expected, (reading(expected, "Expected."),))


def recommendation(at: list[str], rows: list[dict[str, Any]], expected: dict[str, str]) -> Case:
    return Case("recommendation", at, json.dumps(rows), expected, (advice(expected),))


CASES = [
    understanding(
        AT_REPLAYABLE,
        "each episode starts from a fixed snapshot of the repo and the tools only read it",
        "yes",
    ),
    understanding(AT_REPLAYABLE, "we only have logs of past support chats", "static"),
    understanding(AT_TURNS, "it makes several moves and sees the board each time", "multi"),
    understanding(AT_SOURCE, "I'll paste a handful of examples right here", "inline"),
    understanding(AT_REWARD, "let an LLM judge score the answers", "ruler"),
    understanding(AT_REWARD, "code can check the final number exactly", "programmatic"),
    understanding(AT_JUDGE, "the cheaper mini judge", "openai/gpt-5.4-mini"),
    understanding(AT_VAL_SPLIT, "hold some of them back", "held_out"),
    understanding(AT_VAL_FRACTION, "hold out a fifth", "0.2"),
    understanding(AT_BASE_MODEL, "the bigger Qwen", BIGGER_QWEN),
    understanding(AT_MAX_TURNS, "a dozen", "12"),
    Case(
        "question",
        AT_BASE_MODEL,
        "which model fits a 24 GB GPU?",
        fake=(Scripted.text("Llama-3.1-8B-Instruct, the smallest of the three."),),
    ),
    Case(
        "question",
        AT_REWARD,
        "what is RULER?",
        fake=(Scripted.text("An LLM judge that ranks the trajectories of a group."),),
    ),
    Case(
        "question",
        AT_REPLAYABLE,
        "ask what does replayable mean",
        fake=(Scripted.text("An episode can be recreated from the same initial state."),),
    ),
    Case("draft", AT_REWARD_LOGIC, "draft", fake=(drafted(EXACT_REWARD),)),
    Case("draft", AT_ENVIRONMENT, "draft", fake=(drafted(GUESS_ENVIRONMENT),)),
    Case(
        "draft",
        AT_TOOLS,
        "draft",
        fake=(Scripted.json({"tools_json": json.dumps(TOOLS), "summary": "The expected tools."}),),
    ),
    Case("draft", AT_TOOL_CODE, "draft", fake=(drafted(ADD_TOOL),)),
    Case("draft", AT_GENERATOR, "draft", fake=(drafted(GENERATOR),)),
    recommendation(AT_ROWS_MATH, MATH_ROWS[:4], {"reward": "programmatic"}),
    recommendation(AT_SUPPORT_ROWS, SUPPORT_ROWS, {"reward": "ruler"}),
    recommendation(AT_DOCS_ROWS, MATH_ROWS[:3], {"uses_tools": "yes", "tool_execution": "local"}),
    recommendation(AT_GAME_ROWS, GUESS_ROWS[:4], {"uses_tools": "no"}),
]


@dataclass
class Measured:
    """A ChatModel that records each call's latency and tokens."""

    model: ChatModel
    calls: list[tuple[float, int]] = field(default_factory=list)

    def complete(
        self,
        messages: Sequence[ChatMessage],
        *,
        schema: Mapping[str, Any] | None = None,
        max_tokens: int,
    ) -> Completion:
        start = time.perf_counter()
        try:
            completion = self.model.complete(messages, schema=schema, max_tokens=max_tokens)
        except Exception:
            self.calls.append((time.perf_counter() - start, 0))
            raise
        self.calls.append((time.perf_counter() - start, completion.tokens))
        return completion


def session_at(replies: list[str]) -> Session:
    session = begin(TRAIN_RL, Session.start(TRAIN_RL.id)).session
    for text in replies:
        answered = advance(TRAIN_RL, session, Reply(text=text)).session
        if len(answered.answers) != len(session.answers) + 1:
            raise SystemExit(f"the eval's path is broken: {text[:60]!r} was not accepted")
        session = answered
    return session


@dataclass
class Outcome:
    kind: str
    right: bool
    first_try: bool = True
    detail: str = ""
    seconds: float = 0.0
    tokens: int = 0
    hits: int = 0
    """Recommendations: how many of the expected (step, value) pairs were recommended."""
    expected: int = 0


def run_case(assistant: Assistant, measured: Measured, case: Case, user: str) -> Outcome:
    session = session_at(case.at)
    calls_before = len(measured.calls)
    start = time.perf_counter()
    assisted = assistant.respond(TRAIN_RL, session, Reply(text=case.reply), user)
    seconds = time.perf_counter() - start
    calls = measured.calls[calls_before:]
    tokens = sum(t for _, t in calls)
    proposal = assisted.proposal
    outcome = Outcome(case.kind, False, seconds=seconds, tokens=tokens)
    if case.kind == "understanding":
        got = proposal.reply_text if proposal is not None else None
        outcome.right = got is not None and _same(got, str(case.expected))
        outcome.detail = f"{case.reply!r}: expected {case.expected!r}, got {got!r}"
    elif case.kind == "question":
        answered = [m for m in assisted.turn.messages if isinstance(m, Notice)]
        outcome.right = bool(answered) and assisted.turn.session.answers == session.answers
        outcome.right = outcome.right and "could not help" not in answered[0].text
        outcome.detail = f"{case.reply!r}: {answered[0].text[:80] if answered else 'no answer'}"
    elif case.kind == "draft":
        outcome.right = proposal is not None and proposal.is_draft
        outcome.first_try = outcome.right and len(calls) == 1
        notes = " ".join(m.text for m in assisted.turn.messages if isinstance(m, Notice))
        step = TRAIN_RL.next_step(session.answers)
        outcome.detail = f"draft at {step.id if step else '?'}: {notes[:160]}"
    else:
        advice = assisted.turn.session.advice
        expected: dict[str, str] = case.expected
        outcome.hits = sum(1 for s, v in expected.items() if advice.get(s, {}).get("value") == v)
        outcome.expected = len(expected)
        outcome.right = outcome.hits == outcome.expected
        got = {s: a["value"] for s, a in advice.items()}
        outcome.detail = f"expected {expected}, got {got}"
    return outcome


def _same(got: str, expected: str) -> bool:
    try:
        return float(got) == float(expected)
    except ValueError:
        return got.strip() == expected


def percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    if not ordered:
        return 0.0
    index = min(len(ordered) - 1, max(0, round(share * (len(ordered) - 1))))
    return ordered[index]


def share(right: int, total: int) -> str:
    return f"{right}/{total} ({100 * right / total:.0f}%)" if total else "0/0"


def report(
    outcomes: list[Outcome], measured: Measured, against: str, show: Callable[[str], None]
) -> None:
    def of(kind: str) -> list[Outcome]:
        return [o for o in outcomes if o.kind == kind]

    understood, questions, drafts = of("understanding"), of("question"), of("draft")
    recommendations = of("recommendation")
    hits = sum(o.hits for o in recommendations)
    expected = sum(o.expected for o in recommendations)
    show(f"assistant eval against {against}: {len(outcomes)} cases")
    rows = [
        ("understanding (proposal == expected)", sum(o.right for o in understood), understood),
        ("questions answered, session unmoved", sum(o.right for o in questions), questions),
        ("drafts passing checks, first try", sum(o.first_try for o in drafts), drafts),
        ("drafts passing checks, after a retry", sum(o.right for o in drafts), drafts),
    ]
    for label, right, cases in rows:
        show(f"  {label:<38} {share(right, len(cases))}")
    show(f"  {'recommendations right (step, value)':<38} {share(hits, expected)}")
    latencies = [seconds * 1000 for seconds, _ in measured.calls]
    cases = [o.seconds * 1000 for o in outcomes]
    tokens = [o.tokens for o in outcomes]
    show(
        f"  model calls: {len(latencies)}, latency p50 {percentile(latencies, 0.5):.0f} ms, "
        f"p95 {percentile(latencies, 0.95):.0f} ms"
    )
    show(
        f"  per case (calls, checks, sandbox): p50 {percentile(cases, 0.5):.0f} ms, "
        f"p95 {percentile(cases, 0.95):.0f} ms; tokens mean {statistics.mean(tokens):.0f}, "
        f"max {max(tokens)}"
    )
    wrong = [o for o in outcomes if not o.right]
    if wrong:
        show("  wrong:")
        for o in wrong:
            show(f"    {o.kind}: {o.detail}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--fake", action="store_true", help="use the scripted fake model")
    args = parser.parse_args()
    settings = None if args.fake else load_assistant_settings(os.environ)
    budget = Budget(requests_per_minute=10_000, tokens_per_day=100_000_000)
    if settings is not None:
        inner = OpenAIChatModel.connect(
            settings.model,
            base_url=settings.base_url,
            api_key=settings.key(),
            timeout_s=max(settings.timeout_s, 60.0),
        )
        measured = Measured(inner)
        assistant = Assistant(measured, budget)
        against = f"{settings.model} at {settings.base_url or 'OpenAI'}"
        outcomes = [run_case(assistant, measured, c, f"eval{i}") for i, c in enumerate(CASES)]
        report(outcomes, measured, against, print)
        return 0
    with FakeOpenAI() as fake:
        inner = OpenAIChatModel.connect(
            "gpt-fake", base_url=fake.base_url, api_key=fake.key, timeout_s=10
        )
        measured = Measured(inner)
        assistant = Assistant(measured, budget)
        outcomes = []
        for index, case in enumerate(CASES):
            fake.script(*case.fake)
            outcomes.append(run_case(assistant, measured, case, f"eval{index}"))
        against = "the scripted fake (expected replies: harness and overhead only)"
        report(outcomes, measured, against, print)
        if fake.refused:
            print(f"  the fake refused requests: {fake.refused}")
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
