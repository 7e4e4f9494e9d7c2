"""What the stand-in policy says: OpenAI chat completions synthesized from the request.

Pure functions of (request, rng, moves). The answers are cheap guesses that still exercise a
script's plumbing: tool calls with arguments built from the tool's JSON Schema, short
texts that sometimes echo a word or number of the prompt (so simple programmatic rewards
and game loops see both hits and misses), JSON that fits a requested schema, and RULER
judge verdicts with one differing score per `<trajectory id="N">` block. In a game, `moves`
are the moves the dry run found the game accepts at the position shown
(`checks.dryrun.standins.move_search`): the policy plays one of them.
"""

from __future__ import annotations

import json
import random
import re
import uuid
from typing import Any

from checks.dryrun.standins.move_candidates import (
    ANSWER_TAG,
    example_answers,
    free_cells,
    message_text,
)

JsonObject = dict[str, Any]

TRAJECTORY_BLOCK = re.compile(r'<trajectory id="([^"]+)">')
# A word or a number, as a reward function comparing strings would see it.
TOKEN = re.compile(r"-?\d+(?:\.\d+)?|[A-Za-z][A-Za-z0-9_'-]*")
FINISHING_TOOL = re.compile(r"final|answer|submit|finish|done|complete|respond|reply", re.I)
SENTENCES = (
    "I think the answer is {token}.",
    "{token}",
    "The answer: {token}",
    "Let me think. It is {token}.",
    "I am not sure, maybe {token}?",
    "Done.",
)
MAX_TOOL_TURNS = 3
STOPWORDS = frozenset(
    re.split(
        r"\s+",
        "a an the is are was be to of in on at by for with and or not which what who how why "
        "when where this that these those it its you your i me my we our do does answer "
        "question reply respond word one please about from",
    )
)


def judge_trajectory_ids(request: JsonObject) -> list[str]:
    """The ids of the `<trajectory id="N">` blocks of a RULER judge request (empty if none)."""
    messages = request.get("messages") or []
    users = [m for m in messages if isinstance(m, dict) and m.get("role") == "user"]
    if not users:
        return []
    return TRAJECTORY_BLOCK.findall(message_text(users[-1]))


def judge_verdict(trajectory_ids: list[str], rng: random.Random) -> JsonObject:
    """RULER's `Response`: one score per trajectory, all different so GRPO has a signal."""
    count = len(trajectory_ids)
    # Evenly spread then shuffled: no two trajectories of a group share a score.
    levels = [0.1 + 0.8 * i / max(count - 1, 1) for i in range(count)]
    rng.shuffle(levels)
    return {
        "scores": [
            {
                "trajectory_id": trajectory_id,
                "explanation": f"Dry-run judge: stand-in score for trajectory {trajectory_id}.",
                "score": round(level, 3),
            }
            for trajectory_id, level in zip(trajectory_ids, levels, strict=True)
        ]
    }


def value_for_schema(
    schema: Any,
    rng: random.Random,
    words: list[str],
    defs: JsonObject | None = None,
    depth: int = 0,
) -> Any:
    """A value that validates against a (simple) JSON Schema, preferring words of the prompt."""
    if not isinstance(schema, dict) or depth > 6:
        return pick_token(words, rng) if words else "x"
    defs = {**(defs or {}), **schema.get("$defs", {}), **schema.get("definitions", {})}
    if "$ref" in schema:
        target = defs.get(str(schema["$ref"]).rsplit("/", 1)[-1], {})
        return value_for_schema(target, rng, words, defs, depth + 1)
    if "const" in schema:
        return schema["const"]
    if schema.get("enum"):
        return rng.choice(schema["enum"])
    for combinator in ("anyOf", "oneOf", "allOf"):
        options = [o for o in schema.get(combinator, []) if o.get("type") != "null"]
        if options:
            return value_for_schema(options[0], rng, words, defs, depth + 1)
    kind = schema.get("type", "object" if "properties" in schema else "string")
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), "string")
    if kind == "object":
        properties: JsonObject = schema.get("properties", {})
        return {
            name: value_for_schema(sub, rng, words, defs, depth + 1)
            for name, sub in properties.items()
        }
    if kind == "array":
        count = max(int(schema.get("minItems", 1)), min(int(schema.get("maxItems", 2)), 2))
        return [
            value_for_schema(schema.get("items", {}), rng, words, defs, depth + 1)
            for _ in range(count)
        ]
    if kind in ("integer", "number"):
        low = int(schema.get("minimum", 0))
        high = int(schema.get("maximum", max(low + 10, 10)))
        numbers = [int(w) for w in words if re.fullmatch(r"-?\d+", w) and low <= int(w) <= high]
        value = rng.choice(numbers) if numbers and rng.random() < 0.5 else rng.randint(low, high)
        return value if kind == "integer" else float(value)
    if kind == "boolean":
        return rng.random() < 0.5
    if kind == "null":
        return None
    return pick_token(words, rng) if words else "dry-run"


def prompt_words(messages: list[JsonObject]) -> list[str]:
    """Words and numbers of the last user (or tool) message: what an answer may echo."""
    for message in reversed(messages):
        if message.get("role") in ("user", "tool"):
            words = TOKEN.findall(message_text(message))
            if words:
                return words
    return []


def pick_token(words: list[str], rng: random.Random) -> str:
    """A word of the prompt, favouring what answers are made of: names and numbers."""
    weights = [
        0 if w.lower() in STOPWORDS else 3 if w[0].isupper() or w[-1].isdigit() else 1
        for w in words
    ]
    if not any(weights):
        return rng.choice(words)
    return rng.choices(words, weights=weights)[0]


def grid_cells(words: list[str]) -> list[str]:
    """Cells a board's row letters and column numbers name (`B2`): a move in grid games."""
    letters = sorted({w for w in words if len(w) == 1 and w.isalpha() and w.isupper()})
    digits = sorted({w for w in words if w.isdigit() and len(w) <= 2}, key=int)
    return [letter + digit for letter in letters for digit in digits]


def move_token(messages: list[JsonObject], instructions: str, rng: random.Random) -> str:
    """What to answer with: often a move a game would accept (a cell of the board shown, an
    example from the instructions), else a word or number of the prompt, or a small integer."""
    words = prompt_words(messages)
    observation = next((message_text(m) for m in reversed(messages) if m.get("role") == "user"), "")
    free = free_cells(observation)
    cells = free or grid_cells(words)
    examples = example_answers(instructions)
    roll = rng.random()
    if cells and roll < (0.85 if free else 0.5):
        return rng.choice(cells)
    if examples and roll < 0.7:
        return rng.choice(examples)
    numbers = [int(w) for w in words if re.fullmatch(r"-?\d{1,6}", w)]
    if numbers and roll < 0.8:
        # "Guess a number from 1 to 9": a number in the range the prompt mentions.
        return str(rng.randint(min(numbers), max(numbers)))
    if words and roll < 0.95:
        return pick_token(words, rng)
    return str(rng.randint(0, 10))


def text_answer(messages: list[JsonObject], rng: random.Random) -> str:
    """A short answer: a move, a word or number of the prompt, a small integer, or a short
    sentence around one."""
    instructions = " ".join(
        message_text(m) for m in messages if m.get("role") in ("system", "developer", "user")
    )
    token = move_token(messages, instructions, rng)
    tags = ANSWER_TAG.findall(instructions)
    if tags and rng.random() < 0.7:
        return f"<{tags[0]}>{token}</{tags[0]}>"
    # Mostly the bare token: what a game's apply_action or an exact-match reward accepts.
    strategy = rng.random()
    if strategy < 0.6:
        return token
    if strategy < 0.7:
        return str(rng.randint(0, 10))
    return rng.choice(SENTENCES).format(token=token)


def tool_names(tools: list[JsonObject]) -> list[str]:
    """The function names of an OpenAI `tools` list."""
    return [str(t.get("function", {}).get("name")) for t in tools if t.get("function")]


def choose_tool(request: JsonObject, rng: random.Random) -> str | None:
    """Which tool to call now, or None to answer with text.

    The first assistant turn calls a tool; after tool results the policy either answers,
    calls a finishing tool (`submit_answer`, `final_answer`...) or calls another tool, so
    that episodes of different lengths come out.
    """
    tools: list[JsonObject] = request.get("tools") or []
    names = tool_names(tools)
    tool_choice = request.get("tool_choice", "auto")
    if not names or tool_choice == "none":
        return None
    if isinstance(tool_choice, dict):
        return str(tool_choice.get("function", {}).get("name") or names[0])
    messages: list[JsonObject] = request.get("messages") or []
    calls_so_far = sum(1 for m in messages if m.get("role") == "assistant" and m.get("tool_calls"))
    finishing = [n for n in names if FINISHING_TOOL.search(n)]
    working = [n for n in names if n not in finishing] or names
    if tool_choice == "required":
        return rng.choice(finishing if finishing and calls_so_far else names)
    if calls_so_far == 0:
        return rng.choice(working)
    if calls_so_far >= MAX_TOOL_TURNS:
        return finishing[0] if finishing else None
    roll = rng.random()
    if finishing:
        if roll < 0.5:
            return rng.choice(finishing)
        return rng.choice(working) if roll < 0.75 else None
    return rng.choice(working) if roll < 0.4 else None


def tool_call(name: str, request: JsonObject, rng: random.Random) -> JsonObject:
    """An OpenAI tool call of `name`, its arguments synthesized from the tool's schema."""
    tools: list[JsonObject] = request.get("tools") or []
    function = next((t["function"] for t in tools if t.get("function", {}).get("name") == name), {})
    arguments = value_for_schema(
        function.get("parameters") or {"type": "object"},
        rng,
        prompt_words(request.get("messages") or []),
    )
    return {
        "id": f"call_{uuid.UUID(int=rng.getrandbits(128)).hex[:24]}",
        "type": "function",
        "function": {"name": name, "arguments": json.dumps(arguments)},
    }


def structured_answer(request: JsonObject, rng: random.Random) -> str | None:
    """JSON text for a `response_format` request, or None when plain text is wanted."""
    response_format = request.get("response_format")
    if not isinstance(response_format, dict):
        return None
    words = prompt_words(request.get("messages") or [])
    if response_format.get("type") == "json_schema":
        schema = response_format.get("json_schema", {}).get("schema", {})
        return json.dumps(value_for_schema(schema, rng, words))
    if response_format.get("type") == "json_object":
        return json.dumps({"answer": pick_token(words, rng) if words else rng.randint(0, 10)})
    return None


def token_logprobs(text: str, rng: random.Random) -> list[JsonObject]:
    """Per-token logprobs for `text`, one entry per word-with-leading-space."""
    pieces = re.findall(r"\s*\S+|\s+", text) or [text]
    return [
        {
            "token": piece,
            "logprob": round(-rng.uniform(0.001, 2.5), 4),
            "bytes": list(piece.encode()),
            "top_logprobs": [],
        }
        for piece in pieces
    ]


def max_tokens(request: JsonObject) -> int | None:
    """The completion length limit the request asked for, if any."""
    for key in ("max_completion_tokens", "max_tokens"):
        value = request.get(key)
        if isinstance(value, int) and value > 0:
            return value
    return None


def synthesize_choice(
    request: JsonObject, rng: random.Random, index: int, moves: list[str] | None = None
) -> JsonObject:
    """One `choices[i]` entry, with logprobs (ART's vLLM always returns them); in a game, one
    of `moves` (those the game accepts here), when any."""
    message: JsonObject = {"role": "assistant", "content": None}
    judged = judge_trajectory_ids(request)
    tool = None if judged else choose_tool(request, rng)
    if judged:
        text = json.dumps(judge_verdict(judged, rng))
    elif tool is not None:
        call = tool_call(tool, request, rng)
        message["tool_calls"] = [call]
        # vLLM's hermes parser: the sampled tokens are the tool call in tags.
        text = f"<tool_call>\n{json.dumps(call['function'])}\n</tool_call>"
    elif moves:
        text = rng.choice(moves)
    else:
        text = structured_answer(request, rng) or text_answer(request.get("messages") or [], rng)
    logprobs = token_logprobs(text, rng)
    finish_reason = "tool_calls" if tool is not None else "stop"
    limit = max_tokens(request)
    if limit is not None and len(logprobs) > limit and tool is None and not judged:
        logprobs = logprobs[:limit]
        text = "".join(entry["token"] for entry in logprobs)
        finish_reason = "length"
    if tool is None:
        message["content"] = text
    return {
        "index": index,
        "message": message,
        "finish_reason": finish_reason,
        "logprobs": {"content": logprobs, "refusal": None},
    }


def synthesize_completion(
    request: JsonObject, rng: random.Random, *, created: int, moves: list[str] | None = None
) -> JsonObject:
    """A complete `chat.completion` object answering `request` (in a game, with one of `moves`
    where there are any)."""
    count = request.get("n")
    choices = [
        synthesize_choice(request, rng, i, moves)
        for i in range(count if isinstance(count, int) and count > 1 else 1)
    ]
    prompt_tokens = max(1, len(json.dumps(request.get("messages") or [])) // 4)
    completion_tokens = sum(len(c["logprobs"]["content"]) for c in choices)
    return {
        "id": f"chatcmpl-{uuid.UUID(int=rng.getrandbits(128)).hex}",
        "object": "chat.completion",
        "created": created,
        "model": str(request.get("model", "dryrun-policy")),
        "choices": choices,
        "usage": {
            "prompt_tokens": prompt_tokens,
            "completion_tokens": completion_tokens,
            "total_tokens": prompt_tokens + completion_tokens,
        },
        "system_fingerprint": "artbot-dryrun",
    }


def completion_chunks(completion: JsonObject, *, include_usage: bool) -> list[JsonObject]:
    """The same completion as `chat.completion.chunk` objects, for `stream=True`."""
    base = {k: completion[k] for k in ("id", "created", "model", "system_fingerprint")}
    chunks: list[JsonObject] = []
    for choice in completion["choices"]:
        message = choice["message"]
        delta: JsonObject = {"role": "assistant", "content": message["content"]}
        if message.get("tool_calls"):
            delta["tool_calls"] = [
                {"index": i, **call} for i, call in enumerate(message["tool_calls"])
            ]
        chunks.append(
            {
                **base,
                "object": "chat.completion.chunk",
                "choices": [
                    {
                        "index": choice["index"],
                        "delta": delta,
                        "finish_reason": None,
                        "logprobs": choice["logprobs"],
                    }
                ],
            }
        )
        chunks.append(
            {
                **base,
                "object": "chat.completion.chunk",
                "choices": [
                    {
                        "index": choice["index"],
                        "delta": {},
                        "finish_reason": choice["finish_reason"],
                    }
                ],
            }
        )
    if include_usage:
        chunks.append(
            {**base, "object": "chat.completion.chunk", "choices": [], "usage": completion["usage"]}
        )
    return chunks
