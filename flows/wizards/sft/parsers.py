"""The parsers that only the `train-sft` wizard's questions use: the teacher (its model id, its
API's base URL, the variable its key is in), the prompt generator, the validation share and the
choices typed in the hyperparameter menu."""

from __future__ import annotations

import re
from typing import Any
from urllib.parse import urlsplit

from flows.code.entry_points import entry_point, positional_call, require_plain
from flows.code.third_party import imported_modules, third_party
from flows.conversation import validators as v
from flows.definition.steps import Answers, InvalidAnswer
from flows.wizards.sft.branches import PROMPTS_HERE, ROWS_HERE
from flows.wizards.sft.dataset import split_counts

MODEL_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.:@/+-]{0,199}$")
ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,63}$")
# The variable a provider's key usually lives in, by the host of its OpenAI-compatible API.
KEY_VARIABLES = {
    "api.openai.com": "OPENAI_API_KEY",
    "openrouter.ai": "OPENROUTER_API_KEY",
    "api.together.xyz": "TOGETHER_API_KEY",
    "api.groq.com": "GROQ_API_KEY",
    "api.fireworks.ai": "FIREWORKS_API_KEY",
    "api.deepseek.com": "DEEPSEEK_API_KEY",
    "api.mistral.ai": "MISTRAL_API_KEY",
    "generativelanguage.googleapis.com": "GEMINI_API_KEY",
    "api.anthropic.com": "ANTHROPIC_API_KEY",
}
OTHER_KEY_VARIABLE = "TEACHER_API_KEY"


def teacher_model(value: str, answers: Answers) -> str:
    value = value.strip().strip("`")
    if not MODEL_ID.match(value):
        raise InvalidAnswer(
            f"“{value[:60]}” is not a model id: the name the teacher's API knows it by, with no "
            "spaces, e.g. `gpt-5.4` or `qwen/qwen3-235b-a22b-2507`."
        )
    return value


def base_url(value: str, answers: Answers) -> str:
    url = v.http_url(value).rstrip("/")
    if urlsplit(url).query or urlsplit(url).fragment:
        raise InvalidAnswer(
            "The base URL takes no query or fragment: e.g. `https://openrouter.ai/api/v1`."
        )
    return url


def default_key_variable(answers: Answers) -> str:
    host = (urlsplit(str(answers.get("teacher_base_url", ""))).hostname or "").lower()
    return next(
        (
            name
            for suffix, name in KEY_VARIABLES.items()
            if host == suffix or host.endswith("." + suffix)
        ),
        OTHER_KEY_VARIABLE,
    )


def key_variable(value: str, answers: Answers) -> str:
    value = value.strip().strip("`").removeprefix("$")
    if not ENV_NAME.match(value):
        raise InvalidAnswer(
            "Give the NAME of the environment variable that holds the key (e.g. "
            "`OPENROUTER_API_KEY`), never the key itself: letters, digits and `_`."
        )
    if value == "WANDB_API_KEY":
        raise InvalidAnswer("WANDB_API_KEY is W&B's key, not the teacher's: name another variable.")
    return value


def prompt_generator(value: str, answers: Answers) -> str:
    module = v.user_module(value, "prompt generator")
    function = entry_point(module, "generate_prompt", "prompt generator")
    if function is None:
        raise InvalidAnswer(
            "The prompt generator must define a top-level function `generate_prompt`."
        )
    require_plain(function, "the script calls it without await")
    positional_call(function, ("rng",), may_omit=True)
    imports = third_party(imported_modules([value]))
    if imports:
        raise InvalidAnswer(
            f"The prompt generator imports {', '.join(imports)}: it may use the standard library "
            "only (the script declares no other packages for it)."
        )
    return v.normalized_source(value)


def val_fraction_parse(value: str, answers: Answers) -> float:
    return check_split(v.float_in(0.0, 1.0, low_open=True, high_open=True)(value, answers), answers)


def check_split(fraction: float, answers: Answers) -> float:
    rows = (
        answers.get("dataset")
        if ROWS_HERE(answers)
        else answers.get("prompts")
        if PROMPTS_HERE(answers)
        else None
    )
    if isinstance(rows, list):
        train, held = split_counts(rows, fraction)
        if not held:
            raise InvalidAnswer(
                f"With {len(rows)} rows, no row falls in a {fraction:g} share: raise the fraction, "
                "or choose no validation."
            )
        if not train:
            raise InvalidAnswer(f"A {fraction:g} share holds out every row: lower it.")
    return fraction


def choice_of(options: tuple[str, ...]) -> Any:
    def parse(value: str, answers: Answers) -> str:
        wanted = value.strip().strip("`").lower()
        if wanted not in options:
            raise InvalidAnswer(f"Choose one of {', '.join(options)}.")
        return wanted

    return parse
