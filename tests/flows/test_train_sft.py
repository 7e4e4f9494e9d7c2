"""Whole conversations with the train-sft wizard, one table per branch: both scenarios, both
backends, every data source; and the defaults ART's own SFT skill computes."""

from __future__ import annotations

import contextlib
import io
import json
import re
import sys
from pathlib import Path

import art
import pytest

from flows import FLOWS, TRAIN_SFT, Attachment, Question, Reply, replay
from flows.wizards.sft.dataset import split_counts
from flows.wizards.sft.rows import skill_defaults
from flows.wizards.sft.train_sft import hyperparameters, training_rows
from tests.flows.conversation import Conversation
from tests.flows.sft_data import (
    INTRODUCTIONS,
    PROMPT_GENERATOR,
    PROMPTS_JSONL,
    PROMPTS_TEXT,
    ROWS,
    ROWS_JSONL,
)
from tests.flows.sft_matrix import VARIANTS

SKILL = Path(art.__file__).parent / "skills" / "train-sft" / "SKILL.md"


def sft() -> Conversation:
    return Conversation(flow=TRAIN_SFT)


def at_teacher_key(
    backend: str = "serverless", url: str = "https://api.openai.com/v1"
) -> Conversation:
    """A distillation with OpenAI's gpt-5.4 as its teacher, asking for its key's variable."""
    chat = sft()
    chat.play(
        [
            ("distillation", "backend"),
            (backend, "teacher_model"),
            ("gpt-5.4", "teacher_base_url"),
            (url, "teacher_key_env"),
        ]
    )
    return chat


def test_train_sft_is_registered_beside_train_rl() -> None:
    assert FLOWS["train-sft"] is TRAIN_SFT
    assert sorted(FLOWS) == ["train-rl", "train-sft"]


def test_a_jsonl_file_pasted_for_local_training_asks_every_question_in_order() -> None:
    chat = sft()
    assert chat.asking() == "scenario"
    chat.play(
        [
            ("Train from a JSONL file", "backend"),
            ("LocalBackend", "dataset_source"),
            ("paste", "dataset"),
            (ROWS_JSONL, "val_split"),
            ("none", "base_model"),
            ("OpenPipe/Qwen3-14B-Instruct", "project"),
            ("default", "run_name"),
            ("capitals-001", "hyperparameters"),
            ("Use defaults", None),
        ]
    )
    done = chat.completed()
    assert done is not None and chat.session.status == "complete"
    assert done.answers["dataset"] == ROWS
    assert done.answers["project"] == "sft-project"
    assert "teacher_model" not in done.answers


def test_the_dataset_is_summarized_when_it_is_taken() -> None:
    chat = sft()
    chat.play([("file", "backend"), ("serverless", "dataset_source"), ("upload", "dataset")])
    chat.send(Reply(attachments=(Attachment("train.jsonl", ROWS_JSONL.encode()),)))
    assert chat.problem() is None and chat.asking() == "val_split"
    summary = "\n".join(chat.notices())
    assert f"Checked {len(ROWS)} rows: every one can be used." in summary
    assert "3 rows (20%) with tool calls" in summary
    assert "an estimate at 4 characters a token" in summary
    assert "Warnings" not in summary


def test_a_file_on_the_runner_host_for_serverless_training_leaves_the_counting_to_the_script() -> (
    None
):
    chat = sft()
    chat.play(
        [
            ("1", "backend"),
            ("1", "dataset_source"),  # ServerlessBackend, the recommended one, comes first
            ("A JSONL file on the runner host", "dataset_path"),
            ("/data/support/train.jsonl", "val_split"),
            ("held_out", "val_fraction"),
            ("0.05", "base_model"),
            ("3", "project"),
            ("support", "run_name"),
            ("support-sft-001", "hyperparameters"),
        ]
    )
    asked = chat.asked()
    assert asked is not None
    assert "computed by the script from the rows it counts when it starts" in asked.text
    assert "epochs from the row count when the script starts" in asked.text
    chat.play([("defaults", None)])
    done = chat.completed()
    assert done is not None
    assert done.answers["backend"] == "serverless"
    assert done.answers["dataset_path"] == "/data/support/train.jsonl"
    assert training_rows(done.answers) is None
    assert hyperparameters(done.answers)["epochs"] is None


def test_distillation_from_pasted_prompts_asks_for_the_teacher_and_the_name_of_its_key() -> None:
    chat = sft()
    chat.play(
        [
            ("Distillation", "backend"),
            ("ServerlessBackend", "teacher_model"),
            ("z-ai/glm-5", "teacher_base_url"),
            ("default", "teacher_key_env"),
        ]
    )
    asked = chat.asked()
    assert asked is not None and "OpenRouter" not in asked.text  # the question names no key
    chat.play(
        [
            ("default", "prompts_source"),
            ("paste", "prompts"),
            (PROMPTS_TEXT, "val_split"),
            ("held_out", "val_fraction"),
            ("0.25", "base_model"),
            ("2", "project"),
            ("sft-distillation", "run_name"),
            ("extractor-001", "hyperparameters"),
            ("defaults", None),
        ]
    )
    done = chat.completed()
    assert done is not None
    assert done.answers["teacher_base_url"] == "https://openrouter.ai/api/v1"
    assert done.answers["teacher_key_env"] == "OPENROUTER_API_KEY"
    assert [p["messages"][0]["content"] for p in done.answers["prompts"]] == INTRODUCTIONS


def test_distillation_from_a_generator_on_a_local_gpu() -> None:
    chat = at_teacher_key("local", "https://api.openai.com/v1/")
    asked = chat.asked()
    assert asked is not None and "Reply `default`" in asked.hint
    chat.play(
        [
            ("default", "prompts_source"),
            ("generator", "prompt_generator"),
            (PROMPT_GENERATOR, "prompt_count"),
            ("250", "val_split"),
            ("none", "base_model"),
            ("1", "project"),
            ("default", "run_name"),
            ("multiplier-001", "hyperparameters"),
            ("customize", "hyperparameter_values"),
            ("gpu_memory_utilization", "hyperparameter_values"),
            ("0.5", "hyperparameter_values"),
            ("done", None),
        ]
    )
    done = chat.completed()
    assert done is not None
    assert done.answers["teacher_base_url"] == "https://api.openai.com/v1"
    assert done.answers["teacher_key_env"] == "OPENAI_API_KEY"
    assert done.answers["hyperparameter_values"] == {"gpu_memory_utilization": 0.5}
    # 250 prompts, no split: the defaults are the skill's for 250 rows.
    assert hyperparameters(done.answers)["epochs"] == skill_defaults(250)["epochs"] == 10


def test_prompts_come_as_text_lines_jsonl_or_an_uploaded_file() -> None:
    for prompts, reply in (
        (PROMPTS_TEXT, Reply(text=PROMPTS_TEXT)),
        (PROMPTS_JSONL, Reply(attachments=(Attachment("prompts.jsonl", PROMPTS_JSONL.encode()),))),
        (PROMPTS_TEXT, Reply(attachments=(Attachment("prompts.txt", PROMPTS_TEXT.encode()),))),
    ):
        chat = at_teacher_key()
        chat.play([("default", "prompts_source"), ("upload", "prompts")])
        chat.send(reply)
        assert chat.problem() is None, (prompts[:40], chat.problem())
        assert len(chat.session.answers["prompts"]) == len(INTRODUCTIONS)


def test_a_key_pasted_where_its_variable_name_goes_is_refused_and_never_stored() -> None:
    chat = at_teacher_key()
    before = chat.session.answers
    chat.say("sk-proj-" + "A1b2C3d4E5" * 5)
    problem = chat.problem()
    assert problem is not None and "never stores or repeats keys" in problem
    assert chat.session.answers == before and chat.asking() == "teacher_key_env"
    chat.say("the key is in OPENAI KEY")
    problem = chat.problem()
    assert problem is not None and "NAME of the environment variable" in problem
    chat.say("WANDB_API_KEY")
    assert "W&B's key" in (chat.problem() or "")


def test_a_plain_http_teacher_off_this_machine_is_taken_with_a_warning() -> None:
    chat = sft()
    chat.play(
        [("distillation", "backend"), ("local", "teacher_model"), ("qwen3", "teacher_base_url")]
    )
    chat.say("http://gpu-box.example.com:8000/v1")
    assert any("unencrypted" in n for n in chat.notices())
    chat = sft()
    chat.play(
        [("distillation", "backend"), ("local", "teacher_model"), ("qwen3", "teacher_base_url")]
    )
    chat.say("http://127.0.0.1:8000/v1")
    assert not any("unencrypted" in n for n in chat.notices())
    assert chat.asking() == "teacher_key_env"


def test_the_hyperparameter_defaults_follow_the_changed_epochs_and_batch_size() -> None:
    chat = sft()
    chat.play(
        [
            ("file", "backend"),
            ("local", "dataset_source"),
            ("paste", "dataset"),
            (ROWS_JSONL, "val_split"),
            ("none", "base_model"),
            ("1", "project"),
            ("default", "run_name"),
            ("capitals-001", "hyperparameters"),
            ("customize", "hyperparameter_values"),
        ]
    )
    rows = len(ROWS)
    shown = chat.asked()
    assert shown is not None
    assert (
        f"Warmup ratio: {skill_defaults(rows)['warmup_ratio']:g}"
        in [o.label for o in shown.options][4]
    )
    chat.play([("1", "hyperparameter_values"), ("2", "hyperparameter_values")])
    shown = chat.asked()
    assert shown is not None
    labels = [o.label for o in shown.options]
    assert labels[0] == "Epochs: 2"
    assert labels[4] == f"Warmup ratio: {skill_defaults(rows, epochs=2)['warmup_ratio']:g}"
    chat.play([("done", None)])
    done = chat.completed()
    assert done is not None and done.answers["hyperparameter_values"] == {"epochs": 2}


# ---- the skill's own numbers -------------------------------------------------------------------


def skill_snippet(marker: str) -> str:
    """The python block of ART's SKILL.md that contains `marker`."""
    blocks = re.findall(r"```python\n(.*?)```", SKILL.read_text(encoding="utf-8"), re.S)
    return next(block for block in blocks if marker in block)


def skill_prints(snippet: str, *argv: str) -> str:
    out = io.StringIO()
    saved = sys.argv
    sys.argv = ["skill", *argv]
    try:
        with contextlib.redirect_stdout(out), contextlib.suppress(SystemExit):
            exec(compile(snippet, "SKILL.md", "exec"), {})
    finally:
        sys.argv = saved
    return out.getvalue()


@pytest.mark.parametrize(
    "rows", [2, 3, 7, 10, 13, 50, 99, 100, 101, 500, 1234, 5000, 20_000, 10**6]
)
def test_the_defaults_are_the_ones_arts_sft_skill_computes(rows: int) -> None:
    printed = skill_prints(skill_snippet("round(10000 / n)"), str(rows))
    values = dict(pair.split("=") for pair in printed.split())
    ours = skill_defaults(rows)
    assert int(values["epochs"]) == ours["epochs"]
    assert int(values["batch_size"]) == ours["batch_size"]
    assert float(values["lr"]) == ours["learning_rate"]
    assert values["schedule"] == ours["schedule"]
    assert float(values["warmup_ratio"]) == ours["warmup_ratio"]


def test_for_one_row_the_warmup_ratio_is_capped_at_one() -> None:
    """The only difference: for a single row the skill's formula gives a ratio of 2.0 (10
    warmup steps of 5), which ART would read as a schedule that never reaches its peak."""
    printed = skill_prints(skill_snippet("round(10000 / n)"), "1")
    assert "warmup_ratio=2.0" in printed
    assert skill_defaults(1)["warmup_ratio"] == 1.0


def test_the_defaults_are_computed_from_the_rows_left_to_train_on() -> None:
    answers = dict(VARIANTS["file-serverless-upload-val"])
    session = replay(TRAIN_SFT, answers)
    train, held = split_counts(ROWS, 0.2)
    assert held > 0 and training_rows(session.answers) == train
    assert hyperparameters(session.answers)["warmup_ratio"] == skill_defaults(train)["warmup_ratio"]


@pytest.mark.parametrize("name", sorted(VARIANTS))
def test_every_variant_replays_from_its_answers_file(name: str) -> None:
    session = replay(TRAIN_SFT, json.loads(json.dumps(VARIANTS[name])))
    assert session.status == "complete"


def test_every_question_says_where_it_stands() -> None:
    chat = sft()
    first = chat.asked()
    assert isinstance(first, Question) and first.progress is not None
    assert str(first.progress) == "Part 1 of 5: What to train · question 1 of this part"
