"""The `train-sft` wizard as data, after ART's own `train-sft` skill: train from a JSONL file of
chat examples, or distil a teacher model; the backend; the data (checked at the question); the
model and run; and hyperparameters whose defaults come from the row count as the skill computes
them (flows.wizards.sft.rows.skill_defaults). Its branches, parsers and wording are the modules
beside it."""

from __future__ import annotations

from typing import Any

from flows.code.third_party import imported_modules
from flows.conversation import validators as v
from flows.definition.flow import Flow, Part
from flows.definition.steps import (
    Answers,
    Choice,
    MenuField,
    Option,
    Text,
    ValuesMenu,
)
from flows.wizards.sft.branches import (
    DEFAULT_PROMPT_COUNT,
    DISTILLATION,
    FROM_FILE,
    HELD_OUT,
    LOCAL,
    PROMPT_GENERATOR,
    PROMPTS_HERE,
    ROWS_HERE,
    ROWS_ON_RUNNER,
    drafted,
    parts_default,
    skill_value,
    training_rows,
)
from flows.wizards.sft.dataset import (
    counted,
    dataset_rows,
    prompt_rows,
    summary_text,
)
from flows.wizards.sft.parsers import (
    base_url,
    check_split,
    choice_of,
    default_key_variable,
    key_variable,
    prompt_generator,
    teacher_model,
    val_fraction_parse,
)
from flows.wizards.sft.wording import (
    code_display,
    or_at_start,
    plain_http_caution,
    rows_display,
    split_caution,
)
from flows.wizards.shared_steps import (
    CUSTOM_HYPERPARAMETERS,
    base_model_step,
    hyperparameter_steps,
    project_step,
    run_name_step,
)

MAX_PROMPT_COUNT = 100_000
DEFAULT_VAL_SAMPLES = 5
DEFAULT_GPU_MEMORY_UTILIZATION = 0.7
SCHEDULES = ("linear", "cosine", "constant")


def hyperparameters(answers: Answers) -> dict[str, Any]:
    """The hyperparameters in force: the defaults (None where the script computes one at start),
    overlaid with any customized values."""
    menu = next(s for s in TRAIN_SFT.steps if isinstance(s, ValuesMenu))
    values = menu.values(
        {**answers, menu.id: drafted(answers) if CUSTOM_HYPERPARAMETERS(answers) else {}}
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
    shown = ", ".join(f"{_LABELS[k]} {or_at_start(v)}" for k, v in values.items())
    return f"The defaults ({where}, as ART's SFT skill sets them): {shown}."


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
    return MenuField(field_id, label, parse, default, hint=hint, display=or_at_start, **more)


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
            display=rows_display("example"),
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
            parse=teacher_model,
            when=DISTILLATION,
            example="qwen/qwen3-235b-a22b-2507",
            title="Teacher model",
        ),
        Text(
            "teacher_base_url",
            "What is the base URL of the teacher's OpenAI-compatible API?",
            parse=base_url,
            kind="text",
            when=DISTILLATION,
            default=lambda a: "https://openrouter.ai/api/v1",
            default_label="OpenRouter, `https://openrouter.ai/api/v1`",
            caution=plain_http_caution,
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
            parse=key_variable,
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
            display=rows_display("prompt"),
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
            parse=prompt_generator,
            kind="code",
            when=PROMPT_GENERATOR,
            accepts_files=(".py",),
            display=code_display,
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
            parse=val_fraction_parse,
            kind="number",
            when=HELD_OUT,
            default=lambda a: check_split(0.1, a),
            default_label="0.1",
            caution=split_caution,
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
                    default_from=skill_value("epochs"),
                    hint="1 to 100 passes over the training rows.",
                ),
                _field(
                    "batch_size",
                    "Batch size",
                    v.int_in(1, 64),
                    2,
                    default_from=skill_value("batch_size"),
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
                    choice_of(SCHEDULES),
                    "linear",
                    hint="linear, cosine or constant (after the warmup).",
                ),
                _field(
                    "warmup_ratio",
                    "Warmup ratio",
                    v.float_in(0.0, 1.0),
                    0.05,
                    default_from=skill_value("warmup_ratio"),
                    hint="0 to 1: the share of all steps spent warming up to the peak rate.",
                ),
                _field(
                    "checkpoints",
                    "Checkpoints",
                    v.int_in(1, 1_000),
                    10,
                    default_from=parts_default,
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


__all__ = ["TRAIN_SFT", "hyperparameters", "training_rows"]
