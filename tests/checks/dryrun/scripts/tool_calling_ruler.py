"""Multi-turn tool calling, RULER as after_each, ServerlessBackend, a manual step loop."""

import argparse
import asyncio
import json
import os
import sys

import art
from art.rewards import ruler_score_group

SYSTEM = "You are a librarian. Use the tools to find the book, then call submit_answer."
TOOLS: art.Tools = [
    {
        "type": "function",
        "function": {
            "name": "search_catalog",
            "description": "Search the catalog by keyword.",
            "parameters": {
                "type": "object",
                "properties": {
                    "keyword": {"type": "string"},
                    "limit": {"type": "integer", "minimum": 1, "maximum": 5},
                },
                "required": ["keyword"],
            },
        },
    },
    {
        "type": "function",
        "function": {
            "name": "submit_answer",
            "description": "Submit the title of the book.",
            "parameters": {
                "type": "object",
                "properties": {"title": {"type": "string"}},
                "required": ["title"],
            },
        },
    },
]
CATALOG = {"dune": "Dune", "hobbit": "The Hobbit", "emma": "Emma", "ulysses": "Ulysses"}
QUESTIONS = [f"Find the book about {key}." for key in CATALOG]


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    parser.add_argument("--num-steps", type=int, default=50)
    parser.add_argument("--groups-per-step", type=int, default=2)
    parser.add_argument("--rollouts-per-group", type=int, default=4)
    parser.add_argument("--max-turns", type=int, default=6)
    parser.add_argument("--judge-model", default="openai/gpt-5.4")
    parser.add_argument("--learning-rate", type=float, default=1e-5)
    return parser.parse_args()


def run_tool(name: str, arguments: dict[str, object]) -> str:
    if name == "search_catalog":
        keyword = str(arguments.get("keyword", "")).lower()
        return json.dumps(
            [title for key, title in CATALOG.items() if key in keyword or keyword in key]
        )
    return "unknown tool"


async def rollout(model: art.TrainableModel, question: str, max_turns: int) -> art.Trajectory:
    trajectory = art.Trajectory(
        messages_and_choices=[
            {"role": "system", "content": SYSTEM},
            {"role": "user", "content": question},
        ],
        tools=TOOLS,
        metadata={"question": question},
    )
    client = model.openai_client()
    for turn in range(max_turns):
        response = await client.chat.completions.create(
            model=model.get_inference_name(),
            messages=trajectory.messages(),
            tools=TOOLS,
            max_completion_tokens=128,
        )
        choice = response.choices[0]
        trajectory.messages_and_choices.append(choice)
        calls = choice.message.tool_calls or []
        if not calls or calls[0].type != "function":
            break
        call = calls[0]
        arguments = json.loads(call.function.arguments)
        if call.function.name == "submit_answer":
            trajectory.metadata["answer"] = str(arguments.get("title"))
            break
        trajectory.messages_and_choices.append(
            {
                "role": "tool",
                "tool_call_id": call.id,
                "content": run_tool(call.function.name, arguments),
            }
        )
        trajectory.metrics["turns"] = turn + 1
    return trajectory


async def main() -> None:
    args = parse_args()
    for variable in ("OPENAI_API_KEY", "WANDB_API_KEY"):
        if not os.environ.get(variable):
            sys.exit(f"{variable} is required")
    backend = art.ServerlessBackend()
    model = art.TrainableModel(
        name="librarian-001", project="dryrun-fixtures", base_model="OpenPipe/Qwen3-14B-Instruct"
    )
    await model.register(backend)
    try:
        for step in range(await model.get_step(), args.num_steps):
            batch = [
                QUESTIONS[(step * args.groups_per_step + i) % len(QUESTIONS)]
                for i in range(args.groups_per_step)
            ]
            groups = await art.gather_trajectory_groups(
                [
                    art.TrajectoryGroup(
                        rollout(model, q, args.max_turns) for _ in range(args.rollouts_per_group)
                    )
                    for q in batch
                ],
                after_each=lambda group: ruler_score_group(group, judge_model=args.judge_model),
                max_exceptions=args.rollouts_per_group * len(batch),
            )
            result = await backend.train(model, groups, learning_rate=args.learning_rate)
            await model.log(groups, metrics=result.metrics, step=result.step, split="train")
        print(f"Done: {model.get_inference_name()}")
    finally:
        await backend.close()


if __name__ == "__main__":
    asyncio.run(main())
