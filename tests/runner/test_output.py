"""A job's output: capped on disk, bounded in memory however much it prints; warnings from it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from runner.jobs.local import supervisor as supervise_module
from runner.jobs.local.supervisor import (
    DROPPED_FILE,
    EXIT_FILE,
    GO_LINE,
    HEAD_FILE,
    OLD_TAIL_FILE,
    RELEASED_FILE,
    TAIL_FILE,
    CappedLog,
    log_budget,
)
from runner.jobs.local.supervisor import main as supervise
from runner.progress.logfile import OutputFollower, read_excerpt, read_tail
from runner.schemas import EventType, JobState, JobSubmission
from tests.runner.conftest import Runner, RunnerFactory

MiB = 1024 * 1024


def _rss_kb() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise AssertionError("no VmRSS")


def _kept_bytes(folder: Path) -> int:
    return sum(
        (folder / name).stat().st_size
        for name in (HEAD_FILE, OLD_TAIL_FILE, TAIL_FILE)
        if (folder / name).exists()
    )


@pytest.mark.parametrize(
    "total", [pytest.param(20 * MiB, id="20MB"), pytest.param(200 * MiB, id="200MB")]
)
def test_a_job_printing_a_lot_keeps_the_log_capped_and_the_runner_small(
    make_runner: RunnerFactory, total: int
) -> None:
    runner = make_runner(log_max_bytes=str(MiB))
    before = _rss_kb()
    job_id = runner.submit("print_lots.py", args=["--bytes", str(total)])
    events = runner.follow(job_id, timeout=120)
    growth_mb = (_rss_kb() - before) / 1024

    assert events[-1].type is EventType.succeeded
    folder = runner.settings.resolved_workdir / job_id / ".runner"
    assert _kept_bytes(folder) <= MiB
    assert json.loads((folder / DROPPED_FILE).read_text())["dropped_bytes"] >= total - MiB
    status = json.loads((folder / EXIT_FILE).read_text())
    assert status["output_bytes"] >= total
    # Memory stays bounded: the supervisor copies in 64 KiB chunks, the runner reads at most
    # 1 MiB a poll. Python's own RSS moves by a few MB between measurements.
    assert status["supervisor_max_rss_kb"] < 40 * 1024, status
    assert growth_mb < 30, f"the runner grew by {growth_mb:.1f} MB"

    tail = runner.client.log(job_id, 4096)
    assert tail.truncated
    assert tail.text.rstrip().endswith("LAST LINE")
    head = read_excerpt(folder, 64, 64)
    assert head.startswith("FIRST LINE")
    assert "bytes of output not kept" in runner.client.log(job_id, MiB).text
    assert runner.client.job(job_id).state is JobState.succeeded


def test_capped_log_keeps_head_and_tail_within_the_limit(tmp_path: Path) -> None:
    log = CappedLog(tmp_path, 4000)
    head, _segment = log_budget(4000)
    lines = [f"line {i:05d}\n".encode() for i in range(2000)]  # 11 bytes each, 22 000 bytes
    for line in lines:
        log.write(line)
    log.close()
    assert _kept_bytes(tmp_path) <= 4000
    assert (tmp_path / HEAD_FILE).read_bytes() == b"".join(lines)[:head]
    text = read_tail(tmp_path, 10_000)
    assert text.truncated
    assert text.text.endswith("line 01999\n")
    assert "bytes of output not kept" in text.text
    assert read_tail(tmp_path, 22).text == "line 01998\nline 01999\n"
    everything = b"".join(lines)
    dropped = json.loads((tmp_path / DROPPED_FILE).read_text())["dropped_bytes"]
    assert dropped == len(everything) - _kept_bytes(tmp_path)


def test_short_output_is_returned_whole(tmp_path: Path) -> None:
    log = CappedLog(tmp_path, 4000)
    log.write(b"hello\nworld\n")
    log.close()
    assert read_tail(tmp_path, 1000).text == "hello\nworld\n"
    assert not read_tail(tmp_path, 1000).truncated
    assert read_tail(tmp_path, 6).text == "world\n"
    assert read_tail(tmp_path, 6).truncated
    assert read_excerpt(tmp_path, 10, 10) == "hello\nworld\n"
    assert read_tail(tmp_path / "nothing", 100).text == ""


def test_the_follower_reads_everything_across_rotations_when_it_keeps_up(tmp_path: Path) -> None:
    log = CappedLog(tmp_path, 4000)
    follower = OutputFollower(tmp_path, budget=100_000)
    written = bytearray()
    read = bytearray()
    for i in range(3000):
        chunk = f"{i}\n".encode()
        log.write(chunk)
        written += chunk
        if i % 50 == 0:  # fewer than two segments between polls
            read += follower.poll()
    log.close()
    read += follower.poll()
    follower.close()
    assert bytes(read) == bytes(written)


def test_the_supervisor_records_the_exit_code_and_runs_the_command_in_its_cwd(
    tmp_path: Path,
) -> None:
    (tmp_path / "run").mkdir()
    code = "import os, sys; print(os.getcwd()); sys.exit(7)"
    assert (
        supervise(
            [
                "--dir",
                str(tmp_path),
                "--cwd",
                str(tmp_path / "run"),
                "--max-bytes",
                "100000",
                "--",
                sys.executable,
                "-c",
                code,
            ],
            release=lambda: True,
        )
        == 0
    )
    status = json.loads((tmp_path / EXIT_FILE).read_text())
    assert status["exit_code"] == 7 and status["started"]
    assert read_tail(tmp_path, 1000).text.strip() == str(tmp_path / "run")


def test_the_supervisor_reports_a_command_that_cannot_start(tmp_path: Path) -> None:
    supervise(
        [
            "--dir",
            str(tmp_path),
            "--cwd",
            str(tmp_path),
            "--max-bytes",
            "100000",
            "--",
            str(tmp_path / "missing"),
        ],
        release=lambda: True,
    )
    status = json.loads((tmp_path / EXIT_FILE).read_text())
    assert status["exit_code"] == 127 and not status["started"]
    assert "cannot start" in read_tail(tmp_path, 1000).text


@pytest.mark.parametrize("given", [b"", b"no\n"], ids=["eof", "not-go"])
def test_the_supervisor_runs_nothing_unless_released(tmp_path: Path, given: bytes) -> None:
    ran = tmp_path / "ran"
    argv = [
        sys.executable,
        "-I",
        str(Path(supervise_module.__file__).resolve()),
        *("--dir", str(tmp_path), "--cwd", str(tmp_path), "--max-bytes", "100000"),
        *("--", sys.executable, "-c", f"open({str(ran)!r}, 'w')"),
    ]
    done = subprocess.run(argv, input=given, capture_output=True, timeout=30, check=False)
    assert done.returncode == 0
    assert not ran.exists()
    assert not (tmp_path / RELEASED_FILE).exists()
    done = subprocess.run(argv, input=GO_LINE, capture_output=True, timeout=30, check=False)
    assert ran.exists() and (tmp_path / RELEASED_FILE).exists()
    assert json.loads((tmp_path / EXIT_FILE).read_text())["exit_code"] == 0


def test_warnings_from_the_output_reach_the_events(runner: Runner, tmp_path: Path) -> None:
    script = tmp_path / "warns.py"
    script.write_text(
        "import sys\n"
        "for i in range(3):\n"
        "    print(f'Train step {i}: {i+1} of 8 rollouts failed. First error:', file=sys.stderr)\n"
        "print('Traceback (most recent call last):', file=sys.stderr)\n"
        "print('  File \"rl_train.py\", line 3, in rollout', file=sys.stderr)\n"
        "print('ValueError: bad tool call', file=sys.stderr)\n"
        "print('all good')\n"
    )
    job = runner.client.submit(
        JobSubmission(script=script.read_text(), idempotency_key=f"warnings-{os.getpid()}")
    )
    events = runner.follow(job.id)
    warnings = [e.data for e in events if e.type is EventType.warning]
    assert warnings[0] == {"message": "Train step 0: 1 of 8 rollouts failed. First error:"}
    assert len(warnings) == 2  # the same line with other numbers is one warning
    assert warnings[1]["message"] == "Exception in the job's output: ValueError: bad tool call"
    assert "in rollout" in warnings[1]["traceback"]
    assert events[-1].type is EventType.succeeded
