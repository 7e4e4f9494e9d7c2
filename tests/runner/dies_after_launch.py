"""A runner process that dies between launching a job's supervisor and recording its pid.

    python -m tests.runner.dies_after_launch [--recorded] < submission.json

Settings come from the ARTBOT_RUNNER_* variables, the jobs' environment from
TEST_JOB_ENVIRON (JSON). It queues the submission, starts scheduling, and ends with
os._exit(DIED) right after the supervisor is launched: no cleanup, no finally blocks, as when
the runner is killed. With --recorded it dies a moment later: the pid is stored (as the
runner records it) but the supervisor was not released yet. It prints the job id, then the
orphaned supervisor's pid.
"""

from __future__ import annotations

import json
import os
import sys
import time

from runner.api.server import build_service
from runner.jobs.local.job_process import JobProcess
from runner.schemas import EventType, JobState, JobSubmission
from runner.settings import load_settings

DIED = 86


def main() -> int:
    recorded = "--recorded" in sys.argv[1:]
    submission = JobSubmission.model_validate_json(sys.stdin.read())
    job_id = ""

    def die(process: JobProcess) -> None:
        print(process.pid, flush=True)
        if recorded:
            store = service.store
            store.transition(
                job_id,
                [JobState.starting],
                JobState.running,
                event=(EventType.started, {"gpus": [0], "pid": process.pid}),
                pid=process.pid,
                process_start=process.start_id,
                started_at=store.now(),
            )
        os._exit(DIED)

    service = build_service(
        load_settings(), environ=json.loads(os.environ["TEST_JOB_ENVIRON"]), after_launch=die
    )
    job, _ = service.submit(submission)
    job_id = job.id
    print(job.id, flush=True)
    service.start()
    time.sleep(60)  # the scheduler launches the job and _die ends the process
    return 1


if __name__ == "__main__":
    sys.exit(main())
