"""A small, valid ART RL training script (openpipe-art 0.5.18): the check must pass it."""

import asyncio
import random

import art
from art.local import LocalBackend

PROMPTS = ["Say hello.", "Name a colour.", "Count to three."]


async def rollout(model: art.TrainableModel, prompt: str) -> art.Trajectory:
    client = model.openai_client()
    messages: art.Messages = [{"role": "user", "content": prompt}]
    response = await client.chat.completions.create(
        model=model.get_inference_name(),
        messages=messages,
        max_completion_tokens=64,
    )
    choice = response.choices[0]
    reward = 1.0 if choice.message.content else 0.0
    return art.Trajectory(
        messages_and_choices=[*messages, choice],
        reward=reward,
        metadata={"prompt": prompt},
    )


async def main() -> None:
    random.seed(42)
    backend = LocalBackend(path="./.art")
    model = art.TrainableModel(
        name="hello-001",
        project="artbot-check",
        base_model="Qwen/Qwen2.5-0.5B-Instruct",
    )
    await model.register(backend)
    for _ in range(await model.get_step(), 3):
        groups = await art.gather_trajectory_groups(
            (art.TrajectoryGroup(rollout(model, prompt) for _ in range(4)) for prompt in PROMPTS),
            pbar_desc="gather",
            max_exceptions=2,
        )
        result = await backend.train(model, groups, learning_rate=1e-5)
        await model.log(groups, metrics=result.metrics, step=result.step, split="train")
    await backend.close()


if __name__ == "__main__":
    asyncio.run(main())
