"""The command-line flags a fix button changes when it runs a failed script again."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from flows import hyperparameters

GPU_MEMORY_FLAG = "--gpu-memory-utilization"
GPU_MEMORY_STEP = 0.15
GPU_MEMORY_FLOOR = 0.2


def with_lower_gpu_memory(args: list[str], answers: Mapping[str, Any]) -> list[str]:
    """`args` with the GPU memory share lowered by a step (not below the floor), from what the
    script used: the flag's value in `args`, else the script's default, from its `answers`."""
    script_default = float(hyperparameters(answers)["gpu_memory_utilization"])
    current = flag_value(args, GPU_MEMORY_FLAG) or script_default
    lowered = round(max(GPU_MEMORY_FLOOR, current - GPU_MEMORY_STEP), 2)
    return with_flag(args, GPU_MEMORY_FLAG, str(lowered))


def flag_value(args: list[str], flag: str) -> float | None:
    """The number after `flag` in `args`; None when the flag or its number is missing."""
    if flag in args:
        index = args.index(flag)
        try:
            return float(args[index + 1])
        except (IndexError, ValueError):
            return None
    return None


def with_flag(args: list[str], flag: str, value: str) -> list[str]:
    """`args` with `flag` set to `value`: replaced where it is, else added at the end."""
    if flag in args:
        index = args.index(flag)
        return [*args[:index], flag, value, *args[index + 2 :]]
    return [*args, flag, value]
