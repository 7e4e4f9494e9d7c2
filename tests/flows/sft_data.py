"""Realistic SFT data for the train-sft tests: rows in the format of ART's SFT docs (chat
examples, tool calls with their schemas), and prompts like those of its distillation example."""

from __future__ import annotations

import json
from typing import Any

WEATHER_TOOL = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Get current weather",
        "parameters": {"type": "object", "properties": {"location": {"type": "string"}}},
    },
}


def weather_row(city: str, report: str) -> dict[str, Any]:
    """A tool-call conversation as ART's SFT docs show one."""
    return {
        "messages": [
            {"role": "system", "content": "You are a helpful assistant"},
            {"role": "user", "content": f"What's the weather in {city}?"},
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": "call_1",
                        "type": "function",
                        "function": {
                            "name": "get_weather",
                            "arguments": json.dumps({"location": city}),
                        },
                    }
                ],
            },
            {"role": "tool", "tool_call_id": "call_1", "content": report},
            {"role": "assistant", "content": f"It's currently {report} in {city}."},
        ],
        "tools": [WEATHER_TOOL],
    }


CAPITALS = [
    ("Tasmania", "Hobart"),
    ("Victoria", "Melbourne"),
    ("Queensland", "Brisbane"),
    ("New South Wales", "Sydney"),
    ("Western Australia", "Perth"),
    ("South Australia", "Adelaide"),
    ("the Northern Territory", "Darwin"),
    ("Ontario", "Toronto"),
    ("Quebec", "Quebec City"),
    ("British Columbia", "Victoria"),
    ("Bavaria", "Munich"),
    ("Saxony", "Dresden"),
]

CAPITAL_ROWS: list[dict[str, Any]] = [
    {
        "messages": [
            {"role": "system", "content": "You are a helpful assistant"},
            {"role": "user", "content": f"What is the capital of {region}?"},
            {"role": "assistant", "content": capital},
        ]
    }
    for region, capital in CAPITALS
]
WEATHER_ROWS = [
    weather_row("Hobart", "15°C, partly cloudy"),
    weather_row("Darwin", "31°C, humid"),
    weather_row("Zürich", "4°C, light snow"),
]
ROWS = CAPITAL_ROWS + WEATHER_ROWS
ROWS_JSONL = "\n".join(json.dumps(row, ensure_ascii=False) for row in ROWS)

# Inputs like those of ART's distillation example (extract {name, role, company} as JSON).
EXTRACTION_SYSTEM = "Extract {name, role, company} as JSON from the text. Return only valid JSON."
INTRODUCTIONS = [
    "Hi, I'm Sarah Chen, VP of Engineering at Acme Corp.",
    "David Park here, senior data scientist at Globex.",
    "I'm Maria Lopez. I lead product at Initech.",
    "Hey, this is James Wu from Umbrella Corp, working as a DevOps engineer.",
    "My name is Aisha Patel and I'm a research lead at DeepMind.",
    "Tom Becker, head of sales at Hooli, nice to meet you.",
    "This is Priya Nair, staff engineer with Stark Industries.",
    "Good morning, Lars Jensen, CFO of Vandelay Industries.",
    "I'm Chen Wei and I run the data platform team at Pied Piper.",
    "Olivia Brown, marketing director at Soylent Corp.",
    "Hello! Kenji Sato, a product designer at Wayne Enterprises.",
    "Fatima Al-Sayed here; I manage partnerships at Cyberdyne.",
]
PROMPTS_TEXT = "\n".join(INTRODUCTIONS)
PROMPTS_JSONL = "\n".join(
    json.dumps(
        {
            "messages": [
                {"role": "system", "content": EXTRACTION_SYSTEM},
                {"role": "user", "content": text},
            ]
        }
    )
    for text in INTRODUCTIONS
)

PROMPT_GENERATOR = (
    "def generate_prompt(rng):\n"
    "    a, b = rng.randint(10, 99), rng.randint(10, 99)\n"
    '    return f"What is {a} * {b}? Show your working, then the answer on its own line."\n'
)
PROMPT_GENERATOR_NO_RNG = (
    "import random\n"
    "\n"
    "TOPICS = ['photosynthesis', 'tides', 'inflation', 'vaccines']\n"
    "\n"
    "def generate_prompt():\n"
    "    return [\n"
    "        {'role': 'system', 'content': 'Explain to a ten-year-old, in three sentences.'},\n"
    "        {'role': 'user', 'content': f'Explain {random.choice(TOPICS)}.'},\n"
    "    ]\n"
)
