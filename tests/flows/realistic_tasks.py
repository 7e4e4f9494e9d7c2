"""Agents as their users write them, answered as a user would answer the wizard.

ART-E as its authors wrote it (OpenPipe's email-search agent).

Each scenario is a question about one person's inbox as of one date: `question`, the reference
`answer`, the `inbox_address`, the `query_date` and the `message_ids` that hold the answer (ART-E's
`Scenario`). The tools search *that scenario's* inbox up to *its* date, so they take the episode's
`scenario`; `return_final_answer(answer, reference_message_ids)` ends the episode, and the reward
compares the answer with `scenario["answer"]`, which the agent must never be shown.
"""

from __future__ import annotations

from typing import Any

from tests.flows.matrix import answers_for
from tests.flows.realistic_agents import EMAIL_TOOLS

ART_E_SCENARIOS = [
    {
        "id": 101,
        "question": "When is the Q3 planning offsite?",
        "answer": "September 14",
        "inbox_address": "dana@example.com",
        "query_date": "2024-08-01",
        "message_ids": ["d1"],
        "how_realistic": 0.9,
    },
    {
        "id": 102,
        "question": "Which hotel did I book for the Berlin trip?",
        "answer": "Hotel Adlon",
        "inbox_address": "dana@example.com",
        "query_date": "2024-09-20",
        "message_ids": ["d2"],
        "how_realistic": 0.8,
    },
    {
        "id": 201,
        "question": "What is the new budget for the Atlas project?",
        "answer": "$4.2 million",
        "inbox_address": "lee@example.com",
        "query_date": "2024-07-15",
        "message_ids": ["l1"],
        "how_realistic": 0.7,
    },
    {
        "id": 202,
        "question": "Who is presenting at Friday's all-hands?",
        "answer": "Priya",
        "inbox_address": "lee@example.com",
        "query_date": "2024-10-03",
        "message_ids": ["l2"],
        "how_realistic": 0.9,
    },
]

ART_E_TOOL_CODE = """\
from datetime import date

INBOXES = {
    "dana@example.com": {
        "d1": ("2024-07-02", "Q3 planning offsite", "The Q3 planning offsite is on September 14."),
        "d2": ("2024-09-10", "Berlin trip", "You are booked at the Hotel Adlon for Berlin."),
        "d3": ("2024-12-01", "Berlin, again", "Next time: the Hotel Bristol."),
    },
    "lee@example.com": {
        "l1": ("2024-07-01", "Atlas budget", "The Atlas project's new budget is $4.2 million."),
        "l2": ("2024-10-01", "All-hands", "Priya is presenting at Friday's all-hands."),
    },
}


def visible(scenario):
    \"\"\"This scenario's inbox, as it stood on its query date.\"\"\"
    until = date.fromisoformat(scenario["query_date"])
    inbox = INBOXES[scenario["inbox_address"]]
    return {
        message_id: email
        for message_id, email in inbox.items()
        if date.fromisoformat(email[0]) <= until
    }


def search_inbox(keywords: list[str], scenario) -> list[dict[str, str]]:
    words = [str(k).lower() for k in keywords]
    return [
        {"message_id": message_id, "subject": subject}
        for message_id, (_, subject, body) in visible(scenario).items()
        if all(w in (subject + " " + body).lower() for w in words)
    ]


def read_email(message_id: str, scenario) -> dict[str, str]:
    inbox = visible(scenario)
    if message_id not in inbox:
        return {"error": f"no email with id {message_id}"}
    sent, subject, body = inbox[message_id]
    return {"date": sent, "subject": subject, "body": body}
"""

ART_E_REWARD = """\
def compute_reward(scenario, answer, trajectory):
    if not trajectory.metrics["answered"]:
        return -1.0
    correct = scenario["answer"].lower() in answer.lower()
    cited = any(message_id in answer for message_id in scenario["message_ids"])
    return float(correct) + 0.5 * float(cited) - 0.05 * trajectory.metrics["turns"]
"""


def art_e(**overrides: Any) -> dict[str, Any]:
    """ART-E with per-scenario inboxes: what the agent sees is the `question`, nothing else."""
    answers = answers_for("tools", "programmatic", "dataset", "serverless", False)
    answers.update(
        task="Answer questions about the user's inbox by searching and reading their emails.",
        scenario_rows=ART_E_SCENARIOS,
        agent_prompt={"fields": ["question"]},
        system_prompt=(
            "You are an email assistant. Search the inbox, read the relevant emails, then call "
            "return_final_answer with the answer and the ids of the emails it comes from."
        ),
        tools=EMAIL_TOOLS,
        final_answer_tool="return_final_answer",
        tool_code=ART_E_TOOL_CODE,
        episode_end="When the agent calls return_final_answer, or after 8 turns.",
        max_turns=8,
        reward_logic={"kind": "function", "code": ART_E_REWARD},
        run_name="art-e-001",
    )
    answers.update(overrides)
    return answers


def tool(name: str, properties: dict[str, Any], required: list[str]) -> dict[str, Any]:
    return {
        "type": "function",
        "function": {
            "name": name,
            "description": f"The {name} tool.",
            "parameters": {"type": "object", "properties": properties, "required": required},
        },
    }


SUPPORT_TOOLS = [
    tool("list_orders", {"status": {"type": "string"}}, []),
    tool(
        "refund",
        {"order_id": {"type": "string"}, "reason": {"type": "string"}},
        ["order_id", "reason"],
    ),
    tool("final_reply", {"reply": {"type": "string"}}, ["reply"]),
]
SUPPORT_SCENARIOS = [
    {
        "id": "t1",
        "message": "My blender arrived broken.",
        "customer_id": "c/42",
        "resolution": "refund",
    },
    {"id": "t2", "message": "Where is my order?", "customer_id": "c-7", "resolution": "status"},
]


def support_agent(crm_url: str, **overrides: Any) -> dict[str, Any]:
    """A support agent calling a CRM over HTTP (GET with the customer's id from the scenario, POST
    with the order's id from the call), authenticated by a key from `CRM_API_KEY`, judged by
    RULER; the agent is shown the customer's message only."""
    answers = answers_for("tools", "ruler", "open_ended", "serverless", False)
    answers.update(
        task="Resolve customer support tickets using the CRM's tools, then reply to the customer.",
        scenario_rows=SUPPORT_SCENARIOS,
        agent_prompt={"fields": ["message"]},
        tools=SUPPORT_TOOLS,
        final_answer_tool="final_reply",
        tool_execution="http",
        tool_urls={
            "list_orders": f"GET {crm_url}/customers/{{customer_id}}/orders",
            "refund": f"POST {crm_url}/orders/{{order_id}}/refund",
        },
        tool_auth={
            "header": "Authorization",
            "prefix": "Bearer ",
            "variable": "CRM_API_KEY",
            "suffix": "",
        },
        run_name="support-agent-001",
    )
    answers.pop("tool_code")
    answers.update(overrides)
    return answers


SIMULATED_CUSTOMER = (
    "You are a customer writing to support: {message} Answer the agent's questions in one "
    "sentence; you are polite but in a hurry. Your customer id is {customer_id}."
)


def support_agent_with_a_customer(crm_url: str, **overrides: Any) -> dict[str, Any]:
    """The support agent talking with a simulated customer until it sends its final reply."""
    customer = {
        "simulated_user": {"instructions": SIMULATED_CUSTOMER},
        "simulated_user_model": "openai/gpt-5.4-mini",
        "max_turns": 8,
    }
    return support_agent(crm_url, **{**customer, **overrides})


# Codenames after ART's example: the spymaster sees the board and its team's words (both shown
# on purpose: the reward reads them too, and the wizard says so) and gives a one-word clue and a
# count. Scenarios come from a generator.
CODENAMES_GENERATOR = """\
WORDS = (
    "apple bank bark bat bear bell board bolt bridge car cast cell chair check chest clock "
    "cloud code cold cook court crane cross crown dance day deck diamond dog draft dragon"
).split()


def generate_scenario(rng):
    board = rng.sample(WORDS, 12)
    return {"board": ", ".join(board), "team": ", ".join(board[:4]), "avoid": board[4]}
"""
CODENAMES_REWARD = """\
import re


def compute_reward(scenario, answer, trajectory):
    found = re.fullmatch(r"\\s*([A-Za-z]+)\\s*[,:]?\\s*(\\d+)\\s*", answer)
    trajectory.metrics["well_formed"] = found is not None
    if found is None:
        return -1.0
    clue, count = found.group(1).lower(), int(found.group(2))
    board = [word.strip() for word in scenario["board"].split(",")]
    team = [word.strip() for word in scenario["team"].split(",")]
    if clue in board:
        return -1.0  # a clue may not be a word on the board
    return min(count, len(team)) / len(team) - (0.5 if clue == scenario["avoid"] else 0.0)
"""


def codenames(**overrides: Any) -> dict[str, Any]:
    """Single-turn codenames clues from a generator; the agent sees the board and its team."""
    answers = answers_for("single", "programmatic", "open_ended", "serverless", False)
    answers.pop("scenario_rows")
    answers.update(
        task="As the spymaster, give a one-word clue and a count that link your team's words.",
        scenario_source="generator",
        scenario_generator=CODENAMES_GENERATOR,
        agent_prompt={"fields": ["board", "team"]},
        system_prompt="Reply with one word and a number, like `ocean 3`. Never a board word.",
        reward_logic={"kind": "function", "code": CODENAMES_REWARD},
        val_generated="none",
        run_name="codenames-001",
    )
    answers.pop("train_split", None)
    answers.pop("val_split", None)
    answers.update(overrides)
    return answers


# Temporal clue after ART's example: a puzzle of who did what when; the agent sees the puzzle only,
# the reward checks the solution, mixed with RULER's judgement of the reasoning.
TEMPORAL_CLUE_ROWS = [
    {
        "id": f"tc{n}",
        "puzzle": (
            f"Three guests arrived at the manor: {a} before {b}, and {c} last. Who arrived "
            "first, and who arrived second? Answer as `first, second`."
        ),
        "solution": {"first": a, "second": b},
    }
    for n, (a, b, c) in enumerate(
        [
            ("Mrs. Peacock", "Colonel Mustard", "Professor Plum"),
            ("Miss Scarlet", "Mr. Green", "Mrs. White"),
            ("Professor Plum", "Miss Scarlet", "Colonel Mustard"),
            ("Mr. Green", "Mrs. Peacock", "Miss Scarlet"),
        ]
    )
]
TEMPORAL_CLUE_REWARD = """\
def compute_reward(scenario, answer, trajectory):
    solution = scenario["solution"]
    said = [part.strip().lower() for part in answer.split(",")]
    right = [said[i:i + 1] == [solution[key].lower()] for i, key in enumerate(("first", "second"))]
    trajectory.metrics["both_right"] = all(right)
    return sum(right) / 2
"""


def temporal_clue(**overrides: Any) -> dict[str, Any]:
    """Temporal clue with a custom mix: the solution checked by code, the reasoning by RULER."""
    answers = answers_for("single", "custom", "dataset", "serverless", True)
    answers.update(
        task="Solve who-arrived-when puzzles and answer with the first and second arrivals.",
        scenario_rows=TEMPORAL_CLUE_ROWS,
        agent_prompt={"fields": ["puzzle"]},
        system_prompt="Think it through, then answer on the last line as `first, second`.",
        reward_logic={"kind": "function", "code": TEMPORAL_CLUE_REWARD},
        reward_mix=0.3,
        ruler_rubric=(
            "- A trajectory whose last line names the right first and second arrival beats one "
            "that does not.\n- Among right answers, clear step-by-step reasoning scores higher."
        ),
        run_name="temporal-clue-001",
    )
    answers.update(overrides)
    return answers
