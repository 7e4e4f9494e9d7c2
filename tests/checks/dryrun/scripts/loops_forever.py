"""Broken: trains one step, then its validation game loop never ends."""

import asyncio

import art
from art.local import LocalBackend

PROMPT = "Guess my number between 1 and 10."


async def rollout(model: art.TrainableModel, *, until_correct: bool) -> art.Trajectory:
    messages: art.Messages = [{"role": "user", "content": PROMPT}]
    while True:
        response = await model.openai_client().chat.completions.create(
            model=model.get_inference_name(), messages=messages
        )
        guess = response.choices[0].message.content or ""
        # The stand-in policy never says "eleven": validation waits for it forever.
        if not until_correct or guess.strip() == "eleven":
            return art.Trajectory(
                messages_and_choices=[*messages, response.choices[0]],
                reward=min(len(guess), 10) / 10,
            )


async def main() -> None:
    backend = LocalBackend()
    model = art.TrainableModel(
        name="loops-forever", project="dryrun-fixtures", base_model="Qwen/Qwen3-14B"
    )
    await model.register(backend)
    for _ in range(await model.get_step(), 3):
        groups = await art.gather_trajectory_groups(
            [art.TrajectoryGroup(rollout(model, until_correct=False) for _ in range(4))]
        )
        result = await backend.train(model, groups, learning_rate=1e-5)
        await model.log(groups, metrics=result.metrics, step=result.step, split="train")
        val_groups = await art.gather_trajectory_groups(
            [art.TrajectoryGroup(rollout(model, until_correct=True) for _ in range(2))]
        )
        await model.log(val_groups, step=result.step, split="val")
    await backend.close()


if __name__ == "__main__":
    asyncio.run(main())
