"""Secrets never reach what the runner stores, serves or logs: redaction by value and by shape,
and a real job that prints its secrets every way it can."""

from __future__ import annotations

import logging

import pytest
from sqlalchemy import text

from isolation.log_filters import AccessLogWithoutQuery, RedactingLogFilter
from runner.records.redact import REDACTED, Redactor
from runner.schemas import EventType, Failure, FailureKind, JobState
from storage.database import create_database_engine
from tests.runner.conftest import TOKEN, RunnerFactory, job_environ

OPENAI_KEY = "sk-proj-" + "Zq9xW2vB7nM4" * 3
WANDB_KEY = "0123456789abcdef" * 2 + "01234567"


def test_configured_values_are_replaced_by_their_name() -> None:
    redactor = Redactor({"OPENAI_API_KEY": "my-own-secret-value", "SHORT": "abc"})
    assert redactor.text("key=my-own-secret-value;") == "key=[REDACTED:OPENAI_API_KEY];"
    assert redactor.text("abc stays: too short to be told from text") == (
        "abc stays: too short to be told from text"
    )


@pytest.mark.parametrize(
    "secret",
    [
        OPENAI_KEY,
        "sk-ant-api03-" + "a1B2c3D4e5" * 3,
        "xoxb-1234567890-1234567890-" + "abcDEF123456",
        "xoxp-" + "12345-" * 3 + "abcdef",
        "xapp-1-A0123456789-" + "abcdef123456",
        "hf_" + "A1b2C3d4E5" * 4,
        "ghp_" + "a1B2c3D4e5F6" * 3,
        "AKIA" + "ABCDEFGHIJ234567",
    ],
)
def test_token_shapes_are_redacted(secret: str) -> None:
    assert Redactor({}).text(f"got {secret} back") == f"got {REDACTED} back"


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        (f"WANDB_API_KEY={WANDB_KEY}", f"WANDB_API_KEY={REDACTED}"),
        (
            f"wandb: appending key to netrc: {WANDB_KEY}",
            f"wandb: appending key to netrc: {REDACTED}",
        ),
        ('{"api_key": "abc123def456ghi"}', f'{{"api_key": "{REDACTED}"}}'),
        ("HF_TOKEN: hf9d8s7a6f5d4", f"HF_TOKEN: {REDACTED}"),
        ("Authorization: Bearer abcdefghijklmnop1234", f"Authorization: {REDACTED}"),
    ],
)
def test_secrets_named_by_their_context_are_redacted(line: str, expected: str) -> None:
    assert Redactor({}).text(line) == expected


@pytest.mark.parametrize(
    "line",
    [
        "Train step 3: reward 0.41, 8 of 8 rollouts, max_tokens: 2048",
        "git commit 0123456789abcdef0123456789abcdef01234567 built the image",
        "token: embedding",
        "password reset is not our business",
        "checkpoint saved to .art/proj/models/m1/checkpoints/0004",
    ],
)
def test_ordinary_lines_are_left_alone(line: str) -> None:
    assert Redactor({}).text(line) == line


def test_structured_data_and_failures_are_redacted_within_their_limits() -> None:
    redactor = Redactor({"OPENAI_API_KEY": OPENAI_KEY})
    assert redactor.data({"message": OPENAI_KEY, "step": 3, "nested": [OPENAI_KEY]}) == {
        "message": "[REDACTED:OPENAI_API_KEY]",
        "step": 3,
        "nested": ["[REDACTED:OPENAI_API_KEY]"],
    }
    # A tiny secret repeated to the excerpt's limit grows when redacted: cut to the limit.
    short = Redactor({"K": "12345678"})
    failure = Failure(kind=FailureKind.unknown, summary="x", log_excerpt="12345678" * 1000)
    redacted = short.failure(failure)
    assert "12345678" not in redacted.log_excerpt and len(redacted.log_excerpt) == 8_000


def test_log_records_lose_secrets_and_query_strings() -> None:
    redactor = Redactor({"ARTBOT_RUNNER_TOKEN": TOKEN})
    record = logging.LogRecord(
        "uvicorn.access",
        logging.INFO,
        __file__,
        1,
        '%s - "%s %s HTTP/%s" %d',
        ("127.0.0.1:5", "GET", f"/jobs/x/events?after=1&token={TOKEN}", "1.1", 200),
        None,
    )
    AccessLogWithoutQuery().filter(record)
    RedactingLogFilter(redactor.text).filter(record)
    assert record.getMessage() == '127.0.0.1:5 - "GET /jobs/x/events HTTP/1.1" 200'
    try:
        raise RuntimeError(f"failed with {TOKEN}")
    except RuntimeError as error:
        failing = logging.LogRecord(
            "runner", logging.ERROR, __file__, 1, "oops %s", (TOKEN,), (type(error), error, None)
        )
    RedactingLogFilter(redactor.text).filter(failing)
    assert TOKEN not in failing.getMessage() and TOKEN not in (failing.exc_text or "")


def test_a_job_printing_its_secrets_leaves_none_in_events_failure_log_or_database(
    make_runner: RunnerFactory,
) -> None:
    runner = make_runner(environ=job_environ(OPENAI_API_KEY=OPENAI_KEY, WANDB_API_KEY=WANDB_KEY))
    job_id = runner.submit("leak_secrets.py", required_env=["OPENAI_API_KEY"])
    events = runner.follow(job_id)
    assert events[-1].type is EventType.failed
    job = runner.client.job(job_id)
    assert job.state is JobState.failed and job.failure is not None
    assert "RuntimeError" in job.failure.log_excerpt  # the excerpt is there, redacted
    tail = runner.client.log(job_id, 64 * 1024).text
    assert "[REDACTED:OPENAI_API_KEY]" in tail
    assert any(
        "[REDACTED:OPENAI_API_KEY]" in str(e.data) for e in events if e.type is EventType.warning
    )

    served = [repr(e.data) for e in events] + [job.failure.model_dump_json(), tail]
    engine = create_database_engine(runner.settings.resolved_database_url)
    with engine.connect() as connection:
        stored = [
            repr(row)
            for table in ("runner_jobs", "runner_job_events")
            for row in connection.execute(text(f"SELECT * FROM {table}"))
        ]
    engine.dispose()
    leaked = ["A1b2C3d4E5A1b2C3d4E5", "1234567890-1234567890-", WANDB_KEY, OPENAI_KEY[:20]]
    for where in served + stored:
        for secret in leaked:
            assert secret not in where
