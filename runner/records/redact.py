"""Secrets out of what the runner stores, serves and logs: the values of the variables it passes
to jobs (and its own token), and strings shaped like well-known credentials (isolation.redaction).

A job can print anything, its secrets included (a debug print of os.environ, an HTTP error that
echoes a header). Everything of a job's output that the runner keeps or shows goes through a
`Redactor` first: event data and failures before they are stored, log tails before they are
served, the runner's own log lines before they are written. The job's raw output files in its
folder are not rewritten.
"""

from __future__ import annotations

from isolation import redaction
from isolation.redaction import REDACTED
from runner.schemas import Failure

__all__ = ["REDACTED", "Redactor"]


class Redactor(redaction.Redactor):
    """isolation.redaction's Redactor, and a job's failure redacted whole."""

    def failure(self, failure: Failure) -> Failure:
        """The failure with its texts redacted, cut to the schema's lengths."""
        return failure.model_copy(
            update={
                "summary": self.text(failure.summary)[:2_000],
                "fix": self.text(failure.fix)[:2_000],
                "log_excerpt": _last(self.text(failure.log_excerpt), 8_000),
            }
        )


def _last(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[-limit:]
