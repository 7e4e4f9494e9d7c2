"""Broken: the reward function raises in every rollout; max_exceptions swallows them all."""

import asyncio

import art
from art.local import LocalBackend

PROMPTS = ["Name a colour: red or blue?", "Pick a number: 3 or 7?"]
ANSWERS = {"Name a colour: red or blue?": "red"}


def reward(prompt: str, answer: str) -> float:
    return 1.0 if ANSWERS[prompt] in answer else 0.0


async def rollout(model: art.TrainableModel, prompt: str) -> art.Trajectory:
    messages: art.Messages = [{"role": "user", "content": prompt}]
    response = await model.openai_client().chat.completions.create(
        model=model.get_inference_name(), messages=messages
    )
    choice = response.choices[0]
    score = reward(prompt.upper(), choice.message.content or "")
    return art.Trajectory(messages_and_choices=[*messages, choice], reward=score)


async def main() -> None:
    backend = LocalBackend()
    model = art.TrainableModel(
        name="always-raises", project="dryrun-fixtures", base_model="Qwen/Qwen3-14B"
    )
    await model.register(backend)
    for _ in range(await model.get_step(), 2):
        groups = await art.gather_trajectory_groups(
            (art.TrajectoryGroup(rollout(model, p) for _ in range(4)) for p in PROMPTS),
            max_exceptions=4 * len(PROMPTS),
        )
        result = await backend.train(model, groups, learning_rate=1e-5)
        await model.log(groups, metrics=result.metrics, step=result.step, split="train")
    await backend.close()


if __name__ == "__main__":
    asyncio.run(main())
