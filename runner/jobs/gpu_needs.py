"""What a LocalBackend job's script asks of a GPU, read without running it: its base model (and
so the weights' size, from the parameters its name gives) and its gpu_memory_utilization, from
the script's BASE_MODEL and GPU_MEMORY_UTILIZATION literals (`ast`) or the job's arguments."""

from __future__ import annotations

import ast
import re
from collections.abc import Sequence
from dataclasses import dataclass

MIB = 1024 * 1024
BF16_BYTES = 2.0
KV_CACHE_MIN_MIB = 2048
"""Room counted for vLLM's KV cache, activations and CUDA graphs on top of the weights."""

_UTILIZATION_FLAG = "--gpu-memory-utilization"
_BASE_MODEL_FLAG = "--base-model"
_UTILIZATION_CONSTANT = "GPU_MEMORY_UTILIZATION"
_BASE_MODEL_CONSTANT = "BASE_MODEL"
_SIZE = re.compile(r"^(?:(\d+)x)?(\d+(?:\.\d+)?)([bm])$", re.IGNORECASE)
_QUANTIZED = (
    (re.compile(r"4bit|int4|awq|gptq|nf4", re.IGNORECASE), 0.5),
    (re.compile(r"8bit|int8|fp8", re.IGNORECASE), 1.0),
)


# ---- what the script asks for ---------------------------------------------------------------


def model_params_billion(model: str) -> float | None:
    """Parameters, in billions, from a model name: "Qwen/Qwen2.5-7B-Instruct" is 7, "...-0.5B" 0.5,
    "SmolLM2-135M" 0.135, "Mixtral-8x7B" 56 (every expert counts); None when the name says none."""
    for token in re.split(r"[/\-_ ]", model):
        match = _SIZE.match(token)
        if match is None:
            continue
        experts = int(match.group(1)) if match.group(1) else 1
        size = float(match.group(2)) * experts
        return size / 1000 if match.group(3).lower() == "m" else size
    return None


def bytes_per_param(model: str) -> float:
    """2 (bf16), or less for a name that says it is quantized (4-bit, AWQ, GPTQ, int8, fp8)."""
    for pattern, size in _QUANTIZED:
        if pattern.search(model):
            return size
    return BF16_BYTES


@dataclass(frozen=True)
class GpuNeeds:
    """What a job's script asks of its GPU: the base model and vLLM's share of memory, if known."""

    base_model: str | None = None
    utilization: float | None = None

    @property
    def params_billion(self) -> float | None:
        return model_params_billion(self.base_model) if self.base_model else None

    @property
    def weights_mib(self) -> int | None:
        """The base model's weights: params x bytes per param, in MiB."""
        params = self.params_billion
        if params is None or self.base_model is None:
            return None
        return round(params * 1e9 * bytes_per_param(self.base_model) / MIB)

    @property
    def model_mib(self) -> int | None:
        """Weights plus the least room vLLM needs beside them."""
        weights = self.weights_mib
        return None if weights is None else weights + KV_CACHE_MIN_MIB


def _constants(script: str) -> dict[str, object]:
    """The script's module-level constants that are plain literals (never executed)."""
    try:
        tree = ast.parse(script)
    except (SyntaxError, ValueError):
        return {}
    found: dict[str, object] = {}
    for node in tree.body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1:
            target, value = node.targets[0], node.value
        elif isinstance(node, ast.AnnAssign) and node.value is not None:
            target, value = node.target, node.value
        else:
            continue
        if isinstance(target, ast.Name):
            try:
                found[target.id] = ast.literal_eval(value)
            except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
                found.pop(target.id, None)  # not a literal: unknown
    return found


def _flag(args: Sequence[str], flag: str) -> str | None:
    """The last value given to `flag` (`--flag X` or `--flag=X`), as argparse keeps it."""
    value = None
    for index, arg in enumerate(args):
        if arg == flag and index + 1 < len(args):
            value = args[index + 1]
        elif arg.startswith(flag + "="):
            value = arg.split("=", 1)[1]
    return value


def _share(value: object) -> float | None:
    try:
        share = float(value)  # pyright: ignore[reportArgumentType]
    except (TypeError, ValueError):
        return None
    return share if 0 < share <= 1 else None


def script_needs(script: str, args: Sequence[str]) -> GpuNeeds:
    """BASE_MODEL and GPU_MEMORY_UTILIZATION from the generated script's constants, overridden by
    `--base-model` and `--gpu-memory-utilization` in its args; None where neither says."""
    constants = _constants(script)
    model = _flag(args, _BASE_MODEL_FLAG) or constants.get(_BASE_MODEL_CONSTANT)
    utilization = _flag(args, _UTILIZATION_FLAG)
    share = _share(utilization if utilization is not None else constants.get(_UTILIZATION_CONSTANT))
    return GpuNeeds(
        base_model=model if isinstance(model, str) and model else None, utilization=share
    )
