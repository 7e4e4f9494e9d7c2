"""Broken: crashes at import (`art.LocalBackend` is listed in art.__all__ but never defined)."""

import asyncio

import art
from art import LocalBackend  # type: ignore[attr-defined]


async def main() -> None:
    backend = LocalBackend()
    model = art.TrainableModel(
        name="import-crash", project="dryrun-fixtures", base_model="Qwen/Qwen3-14B"
    )
    await model.register(backend)
    await backend.close()


if __name__ == "__main__":
    asyncio.run(main())
