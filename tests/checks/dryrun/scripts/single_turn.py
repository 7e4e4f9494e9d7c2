"""Single-turn, programmatic reward, LocalBackend, held-out validation every step."""

import argparse
import asyncio

import art
from art.local import LocalBackend
from art.utils.iterate_dataset import iterate_dataset

SYSTEM = "Answer with one word from the question."
SCENARIOS = [
    {"id": f"s{i}", "question": f"Which word comes first: {first} or {second}?", "answer": first}
    for i, (first, second) in enumerate(
        [
            ("apple", "pear"),
            ("red", "blue"),
            ("cat", "dog"),
            ("one", "two"),
            ("sun", "moon"),
            ("salt", "pepper"),
            ("left", "right"),
            ("up", "down"),
            ("hot", "cold"),
            ("yes", "no"),
            ("day", "night"),
            ("north", "south"),
        ]
    )
]


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    parser.add_argument("--num-epochs", type=int, default=5)
    parser.add_argument("--groups-per-step", type=int, default=4)
    parser.add_argument("--rollouts-per-group", type=int, default=6)
    parser.add_argument("--dataset-size", type=int, default=None)
    parser.add_argument("--val-every", type=int, default=1)
    parser.add_argument("--val-max-groups", type=int, default=4)
    parser.add_argument("--learning-rate", type=float, default=1e-5)
    return parser.parse_args()


@art.retry(max_attempts=2, delay=0.05)
async def rollout(model: art.TrainableModel, scenario: dict[str, str]) -> art.Trajectory:
    messages: art.Messages = [
        {"role": "system", "content": SYSTEM},
        {"role": "user", "content": scenario["question"]},
    ]
    response = await model.openai_client().chat.completions.create(
        model=model.get_inference_name(), messages=messages, max_completion_tokens=32
    )
    choice = response.choices[0]
    answer = (choice.message.content or "").lower()
    correct = scenario["answer"] in answer
    return art.Trajectory(
        messages_and_choices=[*messages, choice],
        reward=1.0 if correct else 0.0,
        metrics={"correct": correct, "answer_chars": len(answer)},
        metadata={"scenario_id": scenario["id"]},
    )


def groups_for(model: art.TrainableModel, scenarios: list[dict[str, str]], rollouts: int):
    return [
        art.TrajectoryGroup(
            (rollout(model, scenario) for _ in range(rollouts)),
            metadata={"scenario_id": scenario["id"]},
        )
        for scenario in scenarios
    ]


async def main() -> None:
    args = parse_args()
    scenarios = SCENARIOS[: args.dataset_size]
    split = max(1, len(scenarios) // 4)
    validation, training = scenarios[:split][: args.val_max_groups], scenarios[split:]
    backend = LocalBackend()
    model = art.TrainableModel(
        name="first-word-001", project="dryrun-fixtures", base_model="Qwen/Qwen3-14B"
    )
    await model.register(backend)
    try:
        for batch in iterate_dataset(
            training,
            groups_per_step=args.groups_per_step,
            num_epochs=args.num_epochs,
            initial_step=await model.get_step(),
        ):
            groups = await art.gather_trajectory_groups(
                groups_for(model, batch.items, args.rollouts_per_group),
                pbar_desc="train",
                max_exceptions=args.rollouts_per_group * len(batch.items),
            )
            result = await backend.train(model, groups, learning_rate=args.learning_rate)
            await model.log(groups, metrics=result.metrics, step=result.step, split="train")
            if result.step % args.val_every == 0:
                val_groups = await art.gather_trajectory_groups(
                    groups_for(model, validation, args.rollouts_per_group),
                    pbar_desc="val",
                    max_exceptions=args.rollouts_per_group * len(validation),
                )
                await model.log(val_groups, step=result.step, split="val")
                await model.delete_checkpoints()
        print(
            f"Trained {model.name} to step {await model.get_step()}: {model.get_inference_name()}"
        )
    finally:
        await backend.close()


if __name__ == "__main__":
    asyncio.run(main())
