"""The runner's domain errors: plain exceptions that the web layer maps to status codes."""

from __future__ import annotations


class JobRequestError(Exception):
    """A request about jobs the runner will not carry out; the message says why, for the user."""


class JobNotFound(JobRequestError):
    """No job has this id (404)."""


class InvalidSubmission(JobRequestError):
    """A submission the runner will not run as it is (422)."""


class SubmissionTooLarge(InvalidSubmission):
    """A script over the size limit (413)."""


class IdempotencyConflict(JobRequestError):
    """An idempotency key that already names a different submission (409)."""


class ResumeConflict(JobRequestError):
    """resume_from_job names a job whose folder an active job is using (409)."""


class RunsAsRoot(JobRequestError):
    """The runner is root with no job user and no opt-out: it runs no job (403)."""


class InvalidQuery(JobRequestError):
    """A query the runner cannot answer as asked (422): a cursor that names no job."""


class ServeRefused(JobRequestError):
    """A job whose model cannot be served here (409): not succeeded, serverless, no checkpoint."""


class NotServing(JobRequestError):
    """A request for a job's serving job when it has none (404)."""


class ServingNotReady(JobRequestError):
    """A request to a serving job that is not answering yet (503: try again shortly)."""


class CheckpointRefused(JobRequestError):
    """A request about a job's checkpoints the runner cannot carry out (409): the job has not
    finished, its checkpoints are elsewhere (ServerlessBackend, Ray), it has no such step, the
    runner has no Hub token, or another export of the job is under way."""


class CheckpointNotFound(JobRequestError):
    """A download of a checkpoint the job's folder does not hold (404)."""


class NoExport(JobRequestError):
    """A request for a job's export when it never had one (404)."""


class DownloadLinkRefused(JobRequestError):
    """A download link that does not open its file (see the subclasses for the status)."""


class DownloadLinkInvalid(DownloadLinkRefused):
    """Not a download link of this runner at all (401)."""


class DownloadLinkForged(DownloadLinkRefused):
    """A link whose signature does not match its job, step and expiry (403)."""


class DownloadLinkExpired(DownloadLinkRefused):
    """A genuine link past its expiry (410)."""
