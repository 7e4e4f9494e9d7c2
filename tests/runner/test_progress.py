"""Following ART's records on disk, the output's warnings, and the script's end banner."""

from __future__ import annotations

import json
from pathlib import Path

from runner.progress.art_records import (
    MAX_LINE_BYTES,
    ArtProgress,
    Baseline,
    Seen,
    find_model_folders,
    has_checkpoints,
    history_events,
)
from runner.progress.output_lines import (
    OutputScanner,
    ProgressLines,
    progress_line_event,
    read_completion,
)
from runner.schemas import EventType


def _model(run_dir: Path, project: str = "proj", name: str = "m1", art: str = ".art") -> Path:
    folder = run_dir / art / project / "models" / name
    folder.mkdir(parents=True)
    return folder


def _append(path: Path, text: str) -> None:
    with path.open("a") as file:
        file.write(text)


def test_history_records_become_step_and_validation_events() -> None:
    record = {
        "step": 3,
        "recorded_at": "2026-01-01T00:00:00",
        "train/reward": 0.5,
        "train/n": 4,
        "loss/train": float("nan"),
        "note": "text",
    }
    assert history_events(record) == [
        (EventType.step, {"step": 3, "train/reward": 0.5, "train/n": 4, "loss/train": None})
    ]
    assert history_events({"step": 4, "val/reward": 0.25}) == [
        (EventType.validation, {"step": 4, "val/reward": 0.25})
    ]
    assert history_events({"step": "5", "train/reward": 1}) == []
    assert history_events({"train/reward": 1}) == []
    assert (
        history_events({"step": 1, "time/step_wall_s": 2.0}) == []
    )  # no train/ metric: not a step


def test_a_fine_tuning_record_with_a_loss_and_no_train_metric_is_a_step() -> None:
    # What ART 0.5.18's train_sft logs (model._log_metrics): the averaged batch metrics, the
    # trainer's time and the step, no train/ key.
    record = {
        "loss/train": 1.25,
        "loss/learning_rate": 0.0002,
        "loss/grad_norm": 0.8,
        "time/step_trainer_s": 12.5,
        "training_step": 2,
        "time/wall_clock_sec": 30.1,
        "step": 2,
        "recorded_at": "2026-11-27T10:00:00",
    }
    [(kind, data)] = history_events(record)
    assert kind is EventType.step
    assert data["step"] == 2 and data["loss/train"] == 1.25 and data["loss/grad_norm"] == 0.8
    # Its held-out samples' score is a validation, as the template logs it.
    assert history_events({"step": 2, "val/reference_similarity": 0.6}) == [
        (EventType.validation, {"step": 2, "val/reference_similarity": 0.6})
    ]


def test_partial_last_lines_wait_for_their_newline(tmp_path: Path) -> None:
    history = _model(tmp_path) / "history.jsonl"
    progress = ArtProgress(tmp_path)
    line = json.dumps({"step": 1, "train/reward": 0.1}) + "\n"
    _append(history, line[:10])
    assert progress.poll() == []
    _append(history, line[10:] + '{"step": 2, "train/re')
    assert progress.poll() == [(EventType.step, {"step": 1, "train/reward": 0.1})]
    _append(history, 'ward": 0.2}\nnot json\n{"step": 2, "val/reward": 0.3}\n')
    assert progress.poll() == [
        (EventType.step, {"step": 2, "train/reward": 0.2}),
        (EventType.validation, {"step": 2, "val/reward": 0.3}),
    ]
    assert progress.last_step == 2


def test_an_overlong_line_is_skipped_without_holding_it(tmp_path: Path) -> None:
    history = _model(tmp_path) / "history.jsonl"
    progress = ArtProgress(tmp_path)
    _append(history, '{"step": 1, "junk": "' + "x" * (MAX_LINE_BYTES + 10))
    assert progress.poll() == []
    _append(history, "x" * 1000)
    assert progress.poll() == []
    _append(history, '"}\n{"step": 2, "train/reward": 1.0}\n')
    assert progress.poll() == [(EventType.step, {"step": 2, "train/reward": 1.0})]


def test_checkpoints_are_reported_once_each(tmp_path: Path) -> None:
    model = _model(tmp_path)
    progress = ArtProgress(tmp_path)
    (model / "checkpoints" / "0001").mkdir(parents=True)
    (model / "checkpoints" / "0002").mkdir()
    (model / "checkpoints" / "tmp-upload").mkdir()
    assert progress.poll() == [
        (EventType.checkpoint, {"step": 1}),
        (EventType.checkpoint, {"step": 2}),
    ]
    (model / "checkpoints" / "0001").rmdir()  # delete_checkpoints keeps only the best
    (model / "checkpoints" / "0003").mkdir()
    assert progress.poll() == [(EventType.checkpoint, {"step": 3})]
    assert has_checkpoints(tmp_path)


def test_what_was_there_before_or_already_reported_is_not_news(tmp_path: Path) -> None:
    model = _model(tmp_path)
    history = model / "history.jsonl"
    _append(history, json.dumps({"step": 1, "train/reward": 0.1}) + "\n")
    (model / "checkpoints" / "0001").mkdir(parents=True)
    baseline = Baseline.from_json(Baseline.capture(tmp_path).to_json())
    _append(history, json.dumps({"step": 2, "train/reward": 0.2}) + "\n")
    _append(history, json.dumps({"step": 3, "train/reward": 0.3}) + "\n")
    (model / "checkpoints" / "0002").mkdir()
    progress = ArtProgress(tmp_path, baseline, Seen(steps={2}))
    assert progress.poll() == [
        (EventType.step, {"step": 3, "train/reward": 0.3}),
        (EventType.checkpoint, {"step": 2}),
    ]


def test_art_folders_are_found_a_few_levels_down_but_not_in_virtualenvs(tmp_path: Path) -> None:
    _model(tmp_path, "p1", "a")
    _model(tmp_path / "sub", "p2", "b")
    _model(tmp_path / ".venv", "p3", "c")
    _model(tmp_path / "a" / "b" / "c" / "d", "p4", "d")
    found = [str(path.relative_to(tmp_path)) for path in find_model_folders(tmp_path)]
    assert found == [".art/p1/models/a", "sub/.art/p2/models/b"]


def test_output_scanner_reports_lines_that_matter_once() -> None:
    scanner = OutputScanner(max_warnings=3)
    assert scanner.feed(b"step 1\nloading INFO\nWARNING 11-22 [config.py] harmless\n") == []
    assert scanner.feed(b"Train step 1: 2 of 8 rollouts fai") == []
    assert scanner.feed(b"led. First error:\n") == [
        {"message": "Train step 1: 2 of 8 rollouts failed. First error:"}
    ]
    assert scanner.feed(b"Train step 2: 5 of 8 rollouts failed. First error:\n") == []
    found = scanner.feed(
        b"Traceback (most recent call last):\n"
        b"  File \"x.py\", line 1, in f\n    g()\nKeyError: 'a'\n"
        b"/x.py:3: RuntimeWarning: invalid value encountered in divide\n"
        b"ERROR 11-22 12:00:00 [engine.py:99] Engine died\n"
        b"ERROR 11-22 12:00:01 [engine.py:99] Engine died again\n"
    )
    assert [w["message"] for w in found] == [
        "Exception in the job's output: KeyError: 'a'",
        "/x.py:3: RuntimeWarning: invalid value encountered in divide",
        "More than 3 distinct warnings: the rest are only in the log.",
    ]
    assert "in f" in found[0]["traceback"]
    assert scanner.feed(b"ERROR something else\n") == []


def test_output_scanner_memory_is_bounded_by_lines_without_end() -> None:
    scanner = OutputScanner()
    for _ in range(100):
        scanner.feed(b"\r progress " * 10_000)  # a progress bar: no newline, ever
    assert len(scanner._partial) <= 8 * 1024


def test_read_completion_reads_the_generated_scripts_banner() -> None:
    tail = (
        "Validation at step 10: val/reward=0.812\n\n"
        + "=" * 60
        + "\nRL TRAINING COMPLETE\n"
        + "=" * 60
        + "\n"
        "  Model:          math-solver-001@10\n  Base model:     OpenPipe/Qwen3-14B-Instruct\n"
        "  Training step:  10\n  Inference URL:  http://10.0.0.5:8000/v1/\n" + "=" * 60 + "\n"
    )
    done = read_completion(tail)
    assert (done.complete, done.model, done.inference_url, done.step) == (
        True,
        "math-solver-001@10",
        "http://10.0.0.5:8000/v1/",
        10,
    )
    assert not read_completion("Model: x\n").complete


def test_read_completion_reads_a_fine_tuning_scripts_banner_too() -> None:
    tail = (
        "Part 3 of 3: 12 of 12 batches, checkpoint 3, loss 0.4120.\n\n"
        + "=" * 60
        + "\nSFT TRAINING COMPLETE\n"
        + "=" * 60
        + "\n  Model:          support-sft@3\n  Base model:     Qwen/Qwen2.5-7B-Instruct\n"
        "  Training step:  3\n  Inference URL:  http://10.0.0.5:8000/v1\n" + "=" * 60 + "\n"
    )
    done = read_completion(tail)
    assert (done.complete, done.model, done.step) == (True, "support-sft@3", 3)
    # A line that only mentions the words is no banner.
    assert not read_completion("print('SFT TRAINING COMPLETE soon')\n").complete


def test_progress_lines_in_the_output_become_step_and_validation_events() -> None:
    lines = ProgressLines()
    train = {
        "step": 3,
        "split": "train",
        "reward": 0.41,
        "count": 32,
        "metrics": {"train/loss": 0.2, "note": "not a number", "train/grad": float("nan")},
    }
    line = b"ARTBOT_PROGRESS " + json.dumps(train).encode() + b"\n"

    # A line cut between two chunks waits for its end; other output is ignored.
    assert lines.feed(b"step 3: training\n" + line[:20]) == []
    events = lines.feed(
        line[20:] + b'ARTBOT_PROGRESS {"step": 4, "split": "val", "reward": null}\n'
    )

    assert events == [
        (
            EventType.step,
            {
                "step": 3,
                "train/loss": 0.2,
                "train/grad": None,
                "train/reward": 0.41,
                "train/trajectories": 32,
            },
        ),
        (EventType.validation, {"step": 4, "val/reward": None}),
    ]


def test_malformed_progress_lines_are_skipped() -> None:
    lines = ProgressLines()
    output = (
        b"ARTBOT_PROGRESS {not json\n"
        b'ARTBOT_PROGRESS {"step": "3", "split": "train"}\n'
        b'ARTBOT_PROGRESS {"step": 3, "split": "test"}\n'
        b"ARTBOT_PROGRESS [1, 2]\n"
        b'  ARTBOT_PROGRESS {"step": 3, "split": "train"}\n'  # not at the start of its line
    )
    assert lines.feed(output) == []
    assert progress_line_event(b'{"step": true, "split": "train"}') is None


def test_a_step_told_by_history_and_by_a_progress_line_is_reported_once(tmp_path: Path) -> None:
    folder = _model(tmp_path)
    seen = Seen()
    progress = ArtProgress(tmp_path, seen=seen)
    _append(folder / "history.jsonl", json.dumps({"step": 1, "train/reward": 0.5}) + "\n")
    from_history = progress.poll()
    from_output = seen.fresh(
        ProgressLines().feed(
            b'ARTBOT_PROGRESS {"step": 1, "split": "train", "reward": 0.5}\n'
            b'ARTBOT_PROGRESS {"step": 2, "split": "train", "reward": 0.7}\n'
        )
    )
    assert from_history == [(EventType.step, {"step": 1, "train/reward": 0.5})]
    assert from_output == [(EventType.step, {"step": 2, "train/reward": 0.7})]
    assert progress.last_step == 2
