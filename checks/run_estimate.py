"""What a run will take, before anyone approves it: steps, rollouts and tokens from the answers
(the limits the script sets: upper bounds, said as such), and dollars for ServerlessBackend from
ART's own price table (`art.costs`). Every figure says what it assumes. Pure but for reading
that table."""

from __future__ import annotations

import functools
import importlib.util
import json
import math
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

from checks.preflight.numbers import PreflightNumbers
from flows import TRAIN_RL, TRAIN_SFT, hyperparameters, sft_hyperparameters, training_rows

CHARS_PER_TOKEN = 4
"""A rough tokens-from-characters rate for English text (no tokenizer is loaded here)."""


@dataclass(frozen=True)
class Prices:
    """$ per million tokens, as ART's `art.costs.ModelPricing` has them."""

    prefill: float
    sample: float
    train: float


def _package_file(package: str, name: str) -> Path | None:
    """The file `name` in an installed package's folder, found without importing the package;
    None when the package is not installed."""
    spec = importlib.util.find_spec(package)
    folders = list(spec.submodule_search_locations or []) if spec is not None else []
    return Path(folders[0]) / name if folders else None


@functools.cache
def _art_costs() -> ModuleType:
    """ART's own `art/costs.py`, loaded alone: importing `art.costs` would import all of ART
    (seconds, and LiteLLM reaching for the network), and the table needs none of it."""
    path = _package_file("art", "costs.py")
    if path is None:
        raise ModuleNotFoundError("the art package (openpipe-art) is not installed")
    loaded = importlib.util.spec_from_file_location("artbot_art_costs", path)
    if loaded is None or loaded.loader is None:
        raise ModuleNotFoundError(f"no art/costs.py at {path}")
    module = importlib.util.module_from_spec(loaded)
    sys.modules[loaded.name] = module  # its dataclasses look their module up by name
    loaded.loader.exec_module(module)
    return module


def art_prices(model: str) -> Prices | None:
    """The model's prices in ART's table (ServerlessBackend's), None where it has none."""
    found = _art_costs().get_model_pricing(model)
    return None if found is None else Prices(found.prefill, found.sample, found.train)


PriceLookup = Callable[[str], Prices | None]


@dataclass(frozen=True)
class Estimate:
    """A run's figures, each line with its assumption."""

    lines: tuple[str, ...]

    def text(self) -> str:
        return "\n".join(self.lines)


def dollars(tokens: float, per_million: float, bound: str = "about") -> str:
    """`tokens` at `per_million` $/M tokens: "about $1.23" (or "at most ..."), or "less than a
    cent"."""
    cost = tokens * per_million / 1_000_000
    return f"{bound} ${cost:,.2f}" if cost >= 0.005 else "less than a cent"


def _training_rows(answers: Mapping[str, Any]) -> int | None:
    """Scenarios trained on, where the answers hold them (pasted or uploaded rows), split as
    the script splits them (templates/train_rl/partials/scenarios.py.j2)."""
    rows = answers.get("scenario_rows")
    if not isinstance(rows, list):
        return None
    pool = len(rows)
    held_out = (
        max(1, round(float(answers.get("val_fraction") or 0) * pool))
        if answers.get("val_split") == "held_out"
        else 0
    )
    rest = pool - held_out
    if answers.get("train_split") == "fraction":  # a share of all the scenarios, of those left
        return min(rest, max(1, round(float(answers.get("train_fraction") or 1) * pool)))
    return max(rest, 0)


@dataclass(frozen=True)
class RlLoop:
    """How many rollouts an RL run makes, from its loop settings."""

    steps: int
    loop: str
    """What the steps are, in words."""
    groups: int
    rollouts: int
    """Per group."""
    validations: int
    """Validation rollouts in all."""
    judged_groups: int
    """Groups the RULER judge reads (training and validation), when it judges."""

    @property
    def train_rollouts(self) -> int:
        return self.steps * self.groups * self.rollouts

    def line(self) -> str:
        return (
            f"{self.steps:,} steps ({self.loop}) x {self.groups} groups x {self.rollouts} "
            f"rollouts = {self.train_rollouts:,} training rollouts"
            + (f", plus about {self.validations:,} validation rollouts" if self.validations else "")
        )


def rl_loop(answers: Mapping[str, Any]) -> RlLoop | None:
    """The run's loop, or None when its steps depend on scenarios read when the script starts."""
    hp = hyperparameters(answers)
    groups, rollouts = int(hp["groups_per_step"]), int(hp["rollouts_per_group"])
    if answers.get("iteration") == "dataset":
        rows = _training_rows(answers)
        if rows is None:
            return None
        steps = math.ceil(rows / groups) * int(hp["num_epochs"])
        loop = f"{hp['num_epochs']} epochs of {rows} scenarios"
    else:
        steps = int(hp["num_steps"])
        loop = "the open-ended loop's steps"
    val_groups = 0
    if answers.get("val_split") not in (None, "none"):
        every = int(answers.get("val_every") or 10)
        val_groups = (steps // every + 1) * int(answers.get("val_max_groups") or 8)
    return RlLoop(steps, loop, groups, rollouts, val_groups * rollouts, steps * groups + val_groups)


def estimate_rl(
    answers: Mapping[str, Any],
    prices: PriceLookup = art_prices,
    measured: PreflightNumbers | None = None,
    judge_prices: PriceLookup | None = None,
) -> Estimate:
    """Steps, rollouts and tokens of an RL run and its ServerlessBackend price: upper bounds from
    the reply limit, or, with a preflight's `measured` numbers, figures from what its rollouts
    took (prompts included) and, for LocalBackend, the rollouts' wall time."""
    hp = hyperparameters(answers)
    turns = 1 if answers.get("turns") == "single" else int(answers.get("max_turns") or 10)
    per_rollout = int(hp["max_completion_tokens"]) * turns
    loop = rl_loop(answers)
    if loop is None:
        return Estimate(
            (
                f"Estimate: {hp['groups_per_step']} groups x {hp['rollouts_per_group']} rollouts "
                f"a step, up to {per_rollout:,} completion tokens a rollout; the steps depend on "
                "the scenarios the script reads when it starts "
                f"({hp['num_epochs']} epochs of one step per {hp['groups_per_step']} scenarios).",
            )
        )
    if measured is not None:
        lines = _measured_lines(answers, loop, measured, prices)
    else:
        tokens = (loop.train_rollouts + loop.validations) * per_rollout
        lines = [
            f"Estimate: {loop.line()}; at most {tokens:,} completion tokens ({per_rollout:,} a "
            "rollout: the reply limit"
            + (f" x {turns} turns" if turns > 1 else "")
            + ", an upper bound; prompts not counted).",
            _serverless_line(answers, tokens, loop.train_rollouts * per_rollout, prices),
        ]
    if answers.get("reward") in ("ruler", "custom"):
        judge = str(answers.get("judge_model"))
        lines.append(_judge_line(judge, loop, measured, judge_prices or litellm_judge_prices))
    return Estimate(tuple(line for line in lines if line))


JUDGE_PROMPT_TOKENS = 600
"""RULER's own instructions and rubric in each judge call (art/rewards/ruler.py), roughly."""
JUDGE_TOKENS_PER_SCORE = 80
"""A score and its one-sentence explanation in the judge's reply, per trajectory, roughly."""


def _judge_line(
    judge: str, loop: RlLoop, measured: PreflightNumbers | None, prices: PriceLookup
) -> str:
    """The RULER judge's calls, and their price where a preflight measured the trajectories and
    LiteLLM's price map (which RULER calls the judge through) has the judge model."""
    calls = (
        f"The RULER judge `{judge}` is called once per group: about {loop.judged_groups:,} calls "
        f"(validation's included), each reading its group's {loop.rollouts} trajectories"
    )
    if measured is None:
        return calls + ", at its provider's prices."
    price = prices(judge)
    if price is None:
        return (
            calls + f"; LiteLLM's price map has no price for `{judge}`: at its provider's prices."
        )
    per_trajectory = (
        measured.prompt_tokens_per_rollout / max(measured.turns_per_rollout, 1.0)
        + measured.completion_tokens_per_rollout
    )
    prompt = loop.judged_groups * (JUDGE_PROMPT_TOKENS + loop.rollouts * per_trajectory)
    reply = loop.judged_groups * loop.rollouts * JUDGE_TOKENS_PER_SCORE
    cost = (prompt * price.prefill + reply * price.sample) / 1_000_000
    return (
        calls + f"; about ${cost:,.2f} at LiteLLM's prices for it (each call about "
        f"{JUDGE_PROMPT_TOKENS} tokens of RULER's instructions plus the trajectories as the "
        f"preflight measured them, and about {JUDGE_TOKENS_PER_SCORE} tokens a score back)."
    )


@functools.cache
def _litellm_prices() -> Mapping[str, Any]:
    """LiteLLM's bundled price map (model_prices_and_context_window_backup.json), read alone:
    importing litellm takes seconds and may reach for the network."""
    path = _package_file("litellm", "model_prices_and_context_window_backup.json")
    if path is None or not path.is_file():
        return {}
    loaded = json.loads(path.read_text(encoding="utf-8"))
    return loaded if isinstance(loaded, dict) else {}


def litellm_judge_prices(model: str) -> Prices | None:
    """The judge model's $ per million tokens in LiteLLM's price map (prompt as `prefill`, reply
    as `sample`), tried as named and without its provider prefix; None where it has none."""
    table = _litellm_prices()
    for name in (model, model.split("/", 1)[-1]):
        entry = table.get(name)
        if isinstance(entry, dict):
            prompt, reply = entry.get("input_cost_per_token"), entry.get("output_cost_per_token")
            if isinstance(prompt, int | float) and isinstance(reply, int | float):
                return Prices(prompt * 1_000_000, reply * 1_000_000, 0.0)
    return None


SCRIPT_MAX_CONCURRENT = 32
"""The script's MAX_CONCURRENT (templates/train_rl/partials/answers.py.j2): rollouts at once."""


def _measured_lines(
    answers: Mapping[str, Any], loop: RlLoop, measured: PreflightNumbers, prices: PriceLookup
) -> list[str]:
    """The estimate from a preflight's per-rollout tokens and times."""
    rollouts = loop.train_rollouts + loop.validations
    prompt = rollouts * measured.prompt_tokens_per_rollout
    completion = rollouts * measured.completion_tokens_per_rollout
    model = f"`{measured.model}`" + (
        "" if measured.base_model else ", a stand-in for the base model"
    )
    trained_share = 1 - measured.zero_variance_share
    lines = [
        f"Estimate from the preflight ({measured.rollouts} rollouts on {model}): {loop.line()}; "
        f"about {measured.prompt_tokens_per_rollout:,.0f} prompt and "
        f"{measured.completion_tokens_per_rollout:,.0f} completion tokens a rollout, so about "
        f"{prompt:,.0f} prompt and {completion:,.0f} completion tokens in all."
    ]
    if answers.get("backend") == "serverless":
        base = str(answers["base_model"])
        price = prices(base)
        if price is None:
            lines.append(
                f"ServerlessBackend: ART's price table (art.costs) has no price for `{base}`."
            )
        else:
            # ART trains on each trajectory's tokens (tinker_native: the datums' input tokens),
            # and only groups whose rewards differ make datums.
            trained = (
                loop.train_rollouts
                * trained_share
                * (
                    measured.prompt_tokens_per_rollout / max(measured.turns_per_rollout, 1.0)
                    + measured.completion_tokens_per_rollout
                )
            )
            lines.append(
                f"ServerlessBackend, at ART's prices for `{base}` (art.costs): sampling about "
                f"${(prompt * price.prefill + completion * price.sample) / 1_000_000:,.2f} "
                f"(prompts and completions) and training {dollars(trained, price.train)} "
                f"({trained_share:.0%} of the groups had a reward spread in the preflight; "
                "groups without one train nothing)."
            )
    elif measured.wall_s_per_rollout is not None:
        waves = math.ceil(loop.groups * loop.rollouts / SCRIPT_MAX_CONCURRENT)
        hours = loop.steps * waves * measured.wall_s_per_rollout / 3600
        whose = (
            "the base model at the preflight's endpoint"
            if measured.base_model
            else "a stand-in model, not the base model on the runner's GPU"
        )
        lines.append(
            f"LocalBackend: a rollout took a median {measured.wall_s_per_rollout:.1f} s on "
            f"{whose}; at {SCRIPT_MAX_CONCURRENT} rollouts at once, the training steps' rollouts "
            f"take about {_duration(hours)} of the GPU (validation and the training itself "
            "add to it; not measured here)."
        )
    else:
        lines.append("LocalBackend: no price per token; the preflight timed no rollout.")
    return lines


def _duration(hours: float) -> str:
    if hours >= 1:
        return f"{hours:,.1f} hours"
    minutes = max(1, round(hours * 60))
    return f"{minutes} minute{'s' if minutes > 1 else ''}"


def _serverless_line(
    answers: Mapping[str, Any], sampled: int, trained: int, prices: PriceLookup
) -> str:
    if answers.get("backend") != "serverless":
        return (
            "LocalBackend: no price per token; the GPU time depends on the runner's GPU and "
            "the model (a preflight measures the tokens per second)."
        )
    model = str(answers["base_model"])
    price = prices(model)
    if price is None:
        return f"ServerlessBackend: ART's price table (art.costs) has no price for `{model}`."
    return (
        f"ServerlessBackend, at ART's prices for `{model}` (art.costs): sampling "
        f"{dollars(sampled, price.sample, 'at most')} and training "
        f"{dollars(trained, price.train, 'at most')} for those tokens; prompts add "
        f"{price.prefill:g} $/M to sample and {price.train:g} $/M to train."
    )


def estimate_sft(answers: Mapping[str, Any], prices: PriceLookup = art_prices) -> Estimate:
    """The tokens a fine-tuning run trains on (rows x epochs, from the rows' characters) and
    their ServerlessBackend price; a file on the runner host is counted when the script starts."""
    hp = sft_hyperparameters(answers)
    rows = answers.get("dataset") if answers.get("dataset_source") in ("paste", "upload") else None
    if not isinstance(rows, list) or hp["epochs"] is None:
        return Estimate(
            (
                "Estimate: the rows (and so the epochs) are counted when the script starts; "
                "training costs the rows' tokens once per epoch.",
            )
        )
    trained = training_rows(answers) or 0
    characters = sum(len(json.dumps(row, ensure_ascii=False)) for row in rows)
    per_epoch = characters * trained // (len(rows) or 1) // CHARS_PER_TOKEN
    tokens = per_epoch * int(hp["epochs"])
    lines = [
        f"Estimate: {trained:,} training rows x {hp['epochs']} epochs ≈ {tokens:,} training "
        f"tokens (at "
        f"{CHARS_PER_TOKEN} characters a token, an estimate without the model's tokenizer)."
    ]
    if answers.get("backend") == "serverless":
        model = str(answers["base_model"])
        price = prices(model)
        lines.append(
            f"ServerlessBackend: ART's price table (art.costs) has no price for `{model}`."
            if price is None
            else f"ServerlessBackend, at ART's training price for `{model}` (art.costs): "
            f"{dollars(tokens, price.train)}."
        )
    return Estimate(tuple(lines))


ESTIMATES: Mapping[str, Callable[[Mapping[str, Any]], Estimate]] = {
    TRAIN_RL.id: estimate_rl,
    TRAIN_SFT.id: estimate_sft,
}
"""Each flow's estimate, by flow id."""
