"""What a submission may hold beyond its schema: the script's size in bytes, no NUL characters,
environment variable names the runner passes to jobs, keys and ids without control characters,
and bounded arguments and metadata."""

from __future__ import annotations

import re
from collections.abc import Collection

from runner.errors import InvalidSubmission, SubmissionTooLarge
from runner.schemas import ENV_NAME_PATTERN, MAX_SCRIPT_BYTES, JobSubmission

MAX_ARG_CHARS = 4_096
MAX_METADATA_ITEMS = 32
MAX_METADATA_KEY = 64
MAX_METADATA_VALUE = 1_000


RUNNER_SETTING_PREFIX = "ARTBOT_RUNNER_"
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
_LOADER_PREFIXES = ("LD_", "PYTHON", "DYLD_")
_JOB_ID = re.compile(r"^[A-Za-z0-9_-]{1,64}$")


def check_submission(submission: JobSubmission, passed_env: Collection[str]) -> None:
    """InvalidSubmission (or SubmissionTooLarge) saying what is wrong; None when all is well.

    `passed_env`: the variables the runner may give a job (its allow-list and the secrets the
    operator listed); `required_env` may name only those."""
    _check_script(submission.script)
    _check_env_names(submission.required_env)
    _check_env_passed(submission.required_env, passed_env)
    _check_key(submission.idempotency_key)
    if submission.resume_from_job is not None and not _JOB_ID.fullmatch(submission.resume_from_job):
        raise InvalidSubmission("resume_from_job: not a job id (letters, digits, _ and -)")
    _check_args(submission.args)
    _check_metadata(submission.metadata)


def _check_key(key: str) -> None:
    if _CONTROL.search(key):
        raise InvalidSubmission("idempotency_key: control characters (NUL, newlines) not allowed")


def _check_env_passed(names: list[str], passed_env: Collection[str]) -> None:
    for name in names:
        if name.startswith(RUNNER_SETTING_PREFIX):
            raise InvalidSubmission(
                f"required_env: {name} is a setting of the runner itself (its token among them); "
                "jobs never get it"
            )
        if name in passed_env:
            continue
        if name.startswith(_LOADER_PREFIXES):
            raise InvalidSubmission(
                f"required_env: {name} changes how programs are loaded; the runner never passes "
                "it to jobs"
            )
        raise InvalidSubmission(
            f"required_env: the runner does not pass {name} to jobs. If jobs need it, the "
            "runner's operator sets it on the runner host and adds it to ARTBOT_RUNNER_JOB_SECRETS"
        )


def _check_script(script: str) -> None:
    size = len(script.encode())
    if size > MAX_SCRIPT_BYTES:
        raise SubmissionTooLarge(f"script is {size:,} bytes; the limit is {MAX_SCRIPT_BYTES:,}")
    if "\x00" in script:
        raise InvalidSubmission("script contains a NUL character")


def _check_env_names(names: list[str]) -> None:
    bad = [name for name in names if not re.fullmatch(ENV_NAME_PATTERN, name)]
    if bad:
        listed = ", ".join(repr(b) for b in bad[:5])
        raise InvalidSubmission(
            f"required_env: not environment variable names: {listed} "
            "(upper-case letters, digits and _, not starting with a digit)"
        )


def _check_args(args: list[str]) -> None:
    for arg in args:
        if "\x00" in arg or len(arg) > MAX_ARG_CHARS:
            raise InvalidSubmission(
                f"args: each argument must be under {MAX_ARG_CHARS} characters, without NUL"
            )


def _check_metadata(metadata: dict[str, str]) -> None:
    if len(metadata) > MAX_METADATA_ITEMS:
        raise InvalidSubmission(f"metadata: at most {MAX_METADATA_ITEMS} entries")
    for key, value in metadata.items():
        if (
            not key
            or len(key) > MAX_METADATA_KEY
            or len(value) > MAX_METADATA_VALUE
            or "\x00" in key + value
        ):
            raise InvalidSubmission(
                f"metadata: keys of 1 to {MAX_METADATA_KEY} characters, "
                f"values up to {MAX_METADATA_VALUE}, no NUL"
            )
