"""A job's files on disk: its working folder (the script, ART's records) and the runner's own
folder for the job, `<workdir>/<job id>/.runner/` (the output log and exit status the supervisor
writes, and the baseline and GPU snapshot taken before the start).

A resumed job works in the earlier job's folder; its `.runner/` folder is still its own.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from runner.jobs.gpu import GpuInfo, GpuProcess
from runner.progress.art_records import Baseline

RUNNER_DIR_NAME = ".runner"
BASELINE_FILE = "baseline.json"
GPU_SNAPSHOT_FILE = "gpus.json"


def runner_dir(workdir: Path, job_id: str) -> Path:
    """The runner's folder for the job."""
    return workdir / job_id / RUNNER_DIR_NAME


@dataclass(frozen=True)
class JobFolder:
    """Where a job works (`run_dir`) and where the runner keeps its files (`runner_dir`)."""

    run_dir: Path
    runner_dir: Path

    @classmethod
    def of(cls, workdir: Path, job_id: str, run_dir: str) -> JobFolder:
        return cls(Path(run_dir), runner_dir(workdir, job_id))

    def prepare(self, script_name: str, script: str) -> Path:
        """Make both folders, write the script and note what ART left there before (a resumed
        run's records); returns the script's path."""
        self.runner_dir.mkdir(parents=True, exist_ok=True)
        self.run_dir.mkdir(parents=True, exist_ok=True)
        path = self.run_dir / script_name
        path.write_text(script, encoding="utf-8")
        baseline = Baseline.capture(self.run_dir).to_json()
        (self.runner_dir / BASELINE_FILE).write_text(baseline, encoding="utf-8")
        return path

    def baseline(self) -> Baseline:
        """What was on disk before the job started (none when the file is missing or broken)."""
        try:
            return Baseline.from_json((self.runner_dir / BASELINE_FILE).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return Baseline()

    def save_gpu_snapshot(self, snapshot: list[GpuInfo]) -> None:
        text = json.dumps([gpu.to_json() for gpu in snapshot])
        (self.runner_dir / GPU_SNAPSHOT_FILE).write_text(text, encoding="utf-8")

    def gpu_snapshot(self) -> list[GpuInfo]:
        """nvidia-smi as it was before the start (empty when not taken or unreadable)."""
        try:
            raw = json.loads((self.runner_dir / GPU_SNAPSHOT_FILE).read_text(encoding="utf-8"))
            return [
                GpuInfo(
                    **{**g, "processes": tuple(GpuProcess(**p) for p in g.get("processes", ()))}
                )
                for g in raw
            ]
        except (OSError, ValueError, TypeError):
            return []
