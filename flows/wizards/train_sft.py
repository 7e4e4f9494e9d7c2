"""The `train-sft` wizard as data, after ART's own `train-sft` skill: train from a JSONL file of
chat examples, or distil a teacher model; the backend; the data (checked at the question); the
model and run; and hyperparameters whose defaults come from the row count as the skill computes
them (flows.wizards.sft_rows.skill_defaults)."""

from __future__ import annotations

import re
from typing import Any
from urllib.parse import urlsplit

from flows.code.entry_points import entry_point, positional_call, require_plain
from flows.code.third_party import imported_modules, third_party
from flows.conversation import validators as v
from flows.definition.conditions import all_of, is_, not_
from flows.definition.flow import Flow, Part
from flows.definition.steps import (
    Answers,
    Choice,
    InvalidAnswer,
    MenuField,
    Option,
    Text,
    ValuesMenu,
)
from flows.wizards.sft_dataset import (
    counted,
    dataset_rows,
    prompt_rows,
    row_line,
    split_counts,
    summary_text,
)
from flows.wizards.sft_rows import held_out, skill_defaults
from flows.wizards.shared_steps import (
    CUSTOM_HYPERPARAMETERS,
    base_model_step,
    hyperparameter_steps,
    project_step,
    run_name_step,
)

FROM_FILE = is_("scenario", "file")
DISTILLATION = not_(FROM_FILE)
ROWS_HERE = all_of(FROM_FILE, is_("dataset_source", "paste", "upload"))
ROWS_ON_RUNNER = all_of(FROM_FILE, is_("dataset_source", "runner_file"))
PROMPTS_HERE = all_of(DISTILLATION, is_("prompts_source", "paste", "upload"))
PROMPT_GENERATOR = all_of(DISTILLATION, is_("prompts_source", "generator"))
HELD_OUT = is_("val_split", "held_out")
LOCAL = is_("backend", "local")

DEFAULT_PROMPT_COUNT = 100
MAX_PROMPT_COUNT = 100_000
DEFAULT_VAL_SAMPLES = 5
DEFAULT_GPU_MEMORY_UTILIZATION = 0.7
SCHEDULES = ("linear", "cosine", "constant")
FROM_ROW_COUNT = "from the row count when the script starts"
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


# ---- the rows training sees ----------------------------------------------------------------


def _val_fraction(answers: Answers) -> float:
    return float(answers.get("val_fraction") or 0.0) if HELD_OUT(answers) else 0.0


def training_rows(answers: Answers) -> int | None:
    """How many rows (or distilled prompts) training sees, where the wizard can know it: the
    pasted or uploaded ones not held out, or a generator's count without a split. None for a
    file on the runner host (or a generator's split): the script counts them when it starts."""
    fraction = _val_fraction(answers)
    if ROWS_HERE(answers) and isinstance(answers.get("dataset"), list):
        return split_counts(answers["dataset"], fraction)[0]
    if PROMPTS_HERE(answers) and isinstance(answers.get("prompts"), list):
        return split_counts(answers["prompts"], fraction)[0]
    if PROMPT_GENERATOR(answers) and not fraction:
        return int(answers.get("prompt_count") or DEFAULT_PROMPT_COUNT)
    return None


def _drafted(answers: Answers) -> dict[str, Any]:
    """The hyperparameters changed so far (the menu's draft, or its answer)."""
    return dict(answers.get("hyperparameter_values") or {})


def _skill_value(name: str) -> Any:
    """A hyperparameter's default for these answers: the skill's, from the training rows and
    any epochs or batch size already changed; None when the rows are counted only at start."""

    def default(answers: Answers) -> Any:
        rows = training_rows(answers)
        changed = _drafted(answers)
        if rows is None:
            return None if name in ("epochs", "warmup_ratio") else skill_defaults(1)[name]
        return skill_defaults(
            rows, epochs=changed.get("epochs"), batch_size=changed.get("batch_size", 2)
        )[name]

    return default


def _or_at_start(value: Any) -> str:
    return (
        FROM_ROW_COUNT
        if value is None
        else f"{value:g}"
        if isinstance(value, float)
        else str(value)
    )


def _parts_default(answers: Answers) -> int:
    """Ten checkpoints, or one per batch when there are fewer batches than that."""
    rows = training_rows(answers)
    if rows is None:
        return 10
    values = skill_defaults(
        rows, _drafted(answers).get("epochs"), _drafted(answers).get("batch_size", 2)
    )
    total = -(-rows * values["epochs"] // values["batch_size"])
    return max(1, min(10, total))


def hyperparameters(answers: Answers) -> dict[str, Any]:
    """The hyperparameters in force: the defaults (None where the script computes one at start),
    overlaid with any customized values."""
    menu = next(s for s in TRAIN_SFT.steps if isinstance(s, ValuesMenu))
    values = menu.values(
        {**answers, menu.id: _drafted(answers) if CUSTOM_HYPERPARAMETERS(answers) else {}}
    )
    return values


def _hyperparameter_details(answers: Answers) -> str:
    values = hyperparameters({k: v for k, v in answers.items() if k != "hyperparameter_values"})
    rows = training_rows(answers)
    where = (
        f"from the {counted(rows, 'row')} training sees"
        if rows is not None
        else "computed by the script from the rows it counts when it starts"
    )
    shown = ", ".join(f"{_LABELS[k]} {_or_at_start(v)}" for k, v in values.items())
    return f"The defaults ({where}, as ART's SFT skill sets them): {shown}."


# ---- parsers and displays ------------------------------------------------------------------


def _teacher_model(value: str, answers: Answers) -> str:
    value = value.strip().strip("`")
    if not MODEL_ID.match(value):
        raise InvalidAnswer(
            f"“{value[:60]}” is not a model id: the name the teacher's API knows it by, with no "
            "spaces, e.g. `gpt-5.4` or `qwen/qwen3-235b-a22b-2507`."
        )
    return value


def _base_url(value: str, answers: Answers) -> str:
    url = v.http_url(value).rstrip("/")
    if urlsplit(url).query or urlsplit(url).fragment:
        raise InvalidAnswer(
            "The base URL takes no query or fragment: e.g. `https://openrouter.ai/api/v1`."
        )
    return url


def _plain_http_caution(answers: Answers) -> str | None:
    parts = urlsplit(str(answers.get("teacher_base_url", "")))
    local = parts.hostname in ("localhost", "127.0.0.1", "::1") or (parts.hostname or "").endswith(
        ".internal"
    )
    if parts.scheme == "http" and not local:
        return (
            "That URL is plain http: the teacher's key and every prompt would cross the network "
            "unencrypted. Use https unless the teacher runs on a network you trust."
        )
    return None


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


def _key_variable(value: str, answers: Answers) -> str:
    value = value.strip().strip("`").removeprefix("$")
    if not ENV_NAME.match(value):
        raise InvalidAnswer(
            "Give the NAME of the environment variable that holds the key (e.g. "
            "`OPENROUTER_API_KEY`), never the key itself: letters, digits and `_`."
        )
    if value == "WANDB_API_KEY":
        raise InvalidAnswer("WANDB_API_KEY is W&B's key, not the teacher's: name another variable.")
    return value


def _prompt_generator(value: str, answers: Answers) -> str:
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


def _val_fraction_parse(value: str, answers: Answers) -> float:
    return _check_split(
        v.float_in(0.0, 1.0, low_open=True, high_open=True)(value, answers), answers
    )


def _check_split(fraction: float, answers: Answers) -> float:
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


def _split_caution(answers: Answers) -> str | None:
    rows = (
        answers.get("dataset")
        if ROWS_HERE(answers)
        else answers.get("prompts")
        if PROMPTS_HERE(answers)
        else None
    )
    if not isinstance(rows, list):
        return (
            "The script splits the rows when it starts, by a hash of each row, so a row and its "
            "duplicates always fall on the same side."
        )
    train, held = split_counts(rows, _val_fraction(answers))
    return (
        f"Held out for validation: {held:,} of {len(rows):,} rows, chosen by a hash of each row "
        f"(its duplicates stay with it); {train:,} to train on."
    )


def _rows_display(what: str) -> Any:
    def display(rows: Any) -> str:
        if not isinstance(rows, list):
            return str(rows)
        return counted(len(rows), what)

    return display


def _code_display(code: Any) -> str:
    lines = str(code).strip().splitlines()
    return f"{len(lines)} line{'s' if len(lines) != 1 else ''} of code"


def _choice_of(options: tuple[str, ...]) -> Any:
    def parse(value: str, answers: Answers) -> str:
        wanted = value.strip().strip("`").lower()
        if wanted not in options:
            raise InvalidAnswer(f"Choose one of {', '.join(options)}.")
        return wanted

    return parse


_LABELS = {
    "epochs": "epochs",
    "batch_size": "batch size",
    "learning_rate": "peak learning rate",
    "schedule": "schedule",
    "warmup_ratio": "warmup ratio",
    "checkpoints": "checkpoints",
    "gpu_memory_utilization": "GPU memory utilization",
    "val_samples": "held-out samples",
}


def _field(
    field_id: str, label: str, parse: Any, default: Any, *, hint: str, **more: Any
) -> MenuField:
    return MenuField(field_id, label, parse, default, hint=hint, display=_or_at_start, **more)


TRAIN_SFT = Flow(
    "train-sft",
    template="train_sft/script.py.j2",
    steps=[
        Choice(
            "scenario",
            "Train from a JSONL file of examples, or distil a teacher model?",
            options=(
                Option(
                    "file", "Train from a JSONL file", "Chat examples with the replies to learn"
                ),
                Option(
                    "distillation",
                    "Distillation",
                    "A larger teacher model answers your prompts; the small model learns them",
                ),
            ),
            guide=(
                "Supervised fine-tuning teaches a model by example: a format, a style, the way to "
                "call tools. It is also the usual warm-up before RL."
            ),
            help=(
                "A JSONL file: each line a conversation ending with the assistant's reply to "
                "learn. Distillation: you give prompts, a teacher model writes the replies."
            ),
            title="Scenario",
        ),
        Choice(
            "backend",
            "Where does training run?",
            options=(
                Option(
                    "serverless", "ServerlessBackend", "W&B's managed GPUs; needs WANDB_API_KEY"
                ),
                Option("local", "LocalBackend", "On a GPU host (vLLM + Unsloth)"),
            ),
            recommend=lambda a: "serverless",
            recommend_reads=(),
            recommend_reason=lambda a: (
                "ServerlessBackend is what ART's SFT skill recommends: no GPU of your own, and "
                "the trained model is served at once."
            ),
            title="Backend",
        ),
        Choice(
            "dataset_source",
            "Where is the training data?",
            options=(
                Option("paste", "Paste it here", "JSONL, one example per line"),
                Option("upload", "Upload a .jsonl file", "Into this conversation"),
                Option("runner_file", "A JSONL file on the runner host", "Give its path"),
            ),
            when=FROM_FILE,
            guide=(
                "Each line a JSON object with `messages` (a chat ending with the assistant's "
                "reply) and, to train tool calls, `tools`. Pasted or uploaded data goes into the "
                "script (up to 1.5 MB); a bigger file stays on the runner host."
            ),
            title="Data source",
        ),
        Text(
            "dataset",
            "What are the training examples?",
            guide=(
                'JSONL: one object per line, `{"messages": [...], "tools": [...]}`, the last '
                "message the assistant's. Paste it, or upload a .jsonl file. I check every row and "
                "name the lines that need fixing."
            ),
            parse=dataset_rows,
            kind="json",
            when=ROWS_HERE,
            accepts_files=(".jsonl", ".json"),
            display=_rows_display("example"),
            caution=lambda a: (
                summary_text(a["dataset"]) if isinstance(a.get("dataset"), list) else None
            ),
            help=(
                "Rows in OpenAI's chat format: `messages` (roles system, user, assistant, "
                "developer, tool; each with content or tool calls; the last one the "
                "assistant's) and optionally `tools` (function schemas)."
            ),
            example=(
                '{"messages": [{"role": "user", "content": "What is the capital of Tasmania?"}, '
                '{"role": "assistant", "content": "Hobart"}]}'
            ),
            title="Training examples",
        ),
        Text(
            "dataset_path",
            "Where is the JSONL file on the runner host?",
            guide=(
                "Its path on the machine that trains. I cannot read it from here: the script "
                "checks every row, streaming, when it starts, and stops before training if one "
                "is wrong."
            ),
            parse=v.runner_path((".jsonl",)),
            kind="path",
            when=ROWS_ON_RUNNER,
            example="/data/support/train.jsonl",
            title="Training file",
        ),
        Text(
            "teacher_model",
            "Which teacher model writes the replies?",
            guide="Its id as its OpenAI-compatible API knows it (on OpenRouter: `provider/model`).",
            parse=_teacher_model,
            when=DISTILLATION,
            example="qwen/qwen3-235b-a22b-2507",
            title="Teacher model",
        ),
        Text(
            "teacher_base_url",
            "What is the base URL of the teacher's OpenAI-compatible API?",
            parse=_base_url,
            kind="text",
            when=DISTILLATION,
            default=lambda a: "https://openrouter.ai/api/v1",
            default_label="OpenRouter, `https://openrouter.ai/api/v1`",
            caution=_plain_http_caution,
            example="https://api.openai.com/v1",
            title="Teacher API",
        ),
        Text(
            "teacher_key_env",
            "Which environment variable holds the teacher's API key?",
            guide=(
                "Its NAME only: the script reads the key from it where training runs, and "
                "stops at start with a clear message when it is not set. Never paste the key."
            ),
            parse=_key_variable,
            when=DISTILLATION,
            default=default_key_variable,
            default_label="the usual variable for that API",
            example="OPENROUTER_API_KEY",
            title="Teacher key variable",
        ),
        Choice(
            "prompts_source",
            "Where do the prompts for the teacher come from?",
            options=(
                Option("paste", "Paste them here", "A prompt a line, or JSONL"),
                Option("upload", "Upload a file", ".jsonl, .json or .txt"),
                Option("generator", "A generator function", "Python code that makes a prompt"),
            ),
            when=DISTILLATION,
            title="Prompts source",
        ),
        Text(
            "prompts",
            "Which prompts should the teacher answer?",
            guide=(
                'One prompt a line, or JSONL of `{"prompt": "..."}` or `{"messages": [...]}` '
                "(a system message too, if you like; optionally `tools`). The teacher's reply to "
                "each becomes a training example."
            ),
            parse=prompt_rows,
            kind="json",
            when=PROMPTS_HERE,
            accepts_files=(".jsonl", ".json", ".txt"),
            display=_rows_display("prompt"),
            caution=lambda a: (
                summary_text(a["prompts"], "prompt") if isinstance(a.get("prompts"), list) else None
            ),
            example=(
                "Hi, I'm Sarah Chen, VP of Engineering at Acme Corp.\n"
                "David Park here, senior data scientist at Globex."
            ),
            title="Prompts",
        ),
        Text(
            "prompt_generator",
            "Which Python function generates a prompt?",
            guide=(
                "Write `generate_prompt(rng)`: `rng` is a seeded `random.Random`; it returns the "
                "user's message as a string, or a list of chat messages. Standard library only."
            ),
            parse=_prompt_generator,
            kind="code",
            when=PROMPT_GENERATOR,
            accepts_files=(".py",),
            display=_code_display,
            example=(
                "def generate_prompt(rng):\n"
                "    a, b = rng.randint(10, 99), rng.randint(10, 99)\n"
                '    return f"What is {a} * {b}? Show your working."'
            ),
            title="Prompt generator",
        ),
        Text(
            "prompt_count",
            "How many prompts should the generator make?",
            parse=v.int_in(1, MAX_PROMPT_COUNT),
            kind="number",
            when=PROMPT_GENERATOR,
            default=lambda a: DEFAULT_PROMPT_COUNT,
            default_label=str(DEFAULT_PROMPT_COUNT),
            help="Each prompt costs one call of the teacher.",
            example="200",
            title="Prompt count",
        ),
        Choice(
            "val_split",
            "Hold out some rows to compare the model before and after training?",
            options=(
                Option(
                    "held_out", "Hold out a fraction", "Never trained on; sampled before and after"
                ),
                Option("none", "No validation", "Train on every row"),
            ),
            guide=(
                "ART 0.5.18 has no evaluation loss for SFT, so the script asks the model for the "
                "held-out rows' replies before and after training, shows them beside the "
                "reference, and logs how similar they are (val/reference_similarity)."
            ),
            recommend=lambda a: "held_out",
            recommend_reads=(),
            title="Validation",
        ),
        Text(
            "val_fraction",
            "What fraction of the rows should be held out?",
            guide="A number between 0 and 1; held-out rows are never trained on.",
            parse=_val_fraction_parse,
            kind="number",
            when=HELD_OUT,
            default=lambda a: _check_split(0.1, a),
            default_label="0.1",
            caution=_split_caution,
            example="0.1",
            title="Validation fraction",
        ),
        base_model_step(help="The models ART's SFT skill recommends."),
        project_step("sft-project"),
        run_name_step(
            lambda a: imported_modules([str(a.get("prompt_generator", ""))]), "pii-redactor-001"
        ),
        *hyperparameter_steps(
            (
                _field(
                    "epochs",
                    "Epochs",
                    v.int_in(1, 100),
                    3,
                    default_from=_skill_value("epochs"),
                    hint="1 to 100 passes over the training rows.",
                ),
                _field(
                    "batch_size",
                    "Batch size",
                    v.int_in(1, 64),
                    2,
                    default_from=_skill_value("batch_size"),
                    hint="1 to 64 rows per gradient step.",
                ),
                _field(
                    "learning_rate",
                    "Peak learning rate",
                    v.float_in(1e-7, 1e-2),
                    2e-4,
                    hint="From 1e-7 to 1e-2; the schedule warms up to it, then decays.",
                ),
                _field(
                    "schedule",
                    "Schedule",
                    _choice_of(SCHEDULES),
                    "linear",
                    hint="linear, cosine or constant (after the warmup).",
                ),
                _field(
                    "warmup_ratio",
                    "Warmup ratio",
                    v.float_in(0.0, 1.0),
                    0.05,
                    default_from=_skill_value("warmup_ratio"),
                    hint="0 to 1: the share of all steps spent warming up to the peak rate.",
                ),
                _field(
                    "checkpoints",
                    "Checkpoints",
                    v.int_in(1, 1_000),
                    10,
                    default_from=_parts_default,
                    hint=(
                        "1 to 1000: training runs in this many parts, each saving a checkpoint "
                        "and reporting its loss (a run stopped midway resumes from the last)."
                    ),
                ),
                _field(
                    "gpu_memory_utilization",
                    "GPU memory utilization",
                    v.float_in(0.1, 0.95),
                    DEFAULT_GPU_MEMORY_UTILIZATION,
                    when=LOCAL,
                    hint="0.1 to 0.95; lower it after a CUDA out-of-memory error.",
                ),
                _field(
                    "val_samples",
                    "Held-out samples",
                    v.int_in(1, 100),
                    DEFAULT_VAL_SAMPLES,
                    when=HELD_OUT,
                    hint="1 to 100 held-out rows sampled before and after training.",
                ),
            ),
            details=_hyperparameter_details,
            example="1",
        ),
    ],
    parts=[
        Part("What to train", "scenario"),
        Part("Data", "dataset_source"),
        Part("Validation", "val_split"),
        Part("Model and run", "base_model"),
        Part("Training", "hyperparameters"),
    ],
)


def embedded_lines(answers: Answers) -> list[str]:
    """The rows (or prompts) the script carries, as JSONL lines."""
    rows = answers.get("dataset") if ROWS_HERE(answers) else answers.get("prompts")
    return [row_line(row) for row in rows or ()]


def held_out_count(answers: Answers) -> int | None:
    """How many embedded rows are held out (None when the script splits at start)."""
    fraction = _val_fraction(answers)
    lines = embedded_lines(answers) if ROWS_HERE(answers) or PROMPTS_HERE(answers) else None
    return None if lines is None else sum(held_out(line, fraction) for line in lines)


__all__ = ["TRAIN_SFT", "hyperparameters", "training_rows"]
