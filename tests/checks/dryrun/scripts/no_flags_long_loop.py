"""No size flags to cap: a 1000-step loop that only the stand-in trainer's hard cap ends."""

import asyncio

import art
from art.local import LocalBackend


async def rollout(model: art.TrainableModel) -> art.Trajectory:
    messages: art.Messages = [{"role": "user", "content": "Pick a number: 3 or 7?"}]
    response = await model.openai_client().chat.completions.create(
        model=model.get_inference_name(), messages=messages
    )
    choice = response.choices[0]
    return art.Trajectory(
        messages_and_choices=[*messages, choice], reward=len(choice.message.content or "") / 20
    )


async def main() -> None:
    backend = LocalBackend()
    model = art.TrainableModel(
        name="long-loop", project="dryrun-fixtures", base_model="Qwen/Qwen3-14B"
    )
    await model.register(backend)
    try:
        for _ in range(await model.get_step(), 1000):
            groups = await art.gather_trajectory_groups(
                [art.TrajectoryGroup(rollout(model) for _ in range(3))]
            )
            result = await backend.train(model, groups, learning_rate=1e-5)
            await model.log(groups, metrics=result.metrics, step=result.step, split="train")
    except Exception as error:  # the hard cap is not an Exception: this does not catch it
        print(f"never printed: {error}")
    finally:
        await backend.close()


if __name__ == "__main__":
    asyncio.run(main())
