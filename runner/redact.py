"""Secrets out of what the runner stores, serves and logs: the values of the variables it passes
to jobs (and its own token), and strings shaped like well-known credentials.

A job can print anything, its secrets included (a debug print of os.environ, an HTTP error that
echoes a header). Everything of a job's output that the runner keeps or shows goes through a
`Redactor` first: event data and failures before they are stored, log tails before they are
served, the runner's own log lines before they are written.

What is not caught: a configured value shorter than MIN_SECRET_CHARS (too likely to be ordinary
text), a secret the job transformed (base64, split across lines), and credentials of shapes not
listed here. The job's raw output files in its folder are not rewritten.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from runner.schemas import Failure

MIN_SECRET_CHARS = 8
REDACTED = "[REDACTED]"

# Credential shapes (prefixes as the issuers document them), each a whole match to replace.
TOKEN_SHAPES = re.compile(
    "|".join(
        (
            r"\bsk-(?:proj-|ant-|svcacct-|admin-)?[A-Za-z0-9_-]{20,}",  # OpenAI, Anthropic
            r"\bxox[abposr]-[A-Za-z0-9-]{10,}",  # Slack bot/user/app tokens
            r"\bxapp-\d-[A-Za-z0-9-]{10,}",  # Slack app-level tokens
            r"\bhf_[A-Za-z0-9]{30,}",  # Hugging Face
            r"\bgh[pousr]_[A-Za-z0-9]{36,}",  # GitHub
            r"\bgithub_pat_[A-Za-z0-9_]{40,}",
            r"\bAKIA[0-9A-Z]{16}\b",  # AWS access key id
            r"\bAIza[0-9A-Za-z_-]{35}",  # Google API key
            r"\b[Bb]earer\s+[A-Za-z0-9._~+/=-]{16,}",  # an Authorization header's value
        )
    )
)
# A value after a name that says it is a secret: `WANDB_API_KEY=...`, `"hf_token": "..."`,
# `api_key: ...`. W&B keys are 40 hex digits (86 for the newer ones) with no prefix of their
# own, so they are found this way. The value must hold a letter or digit run of 8+ characters.
NAMED_SECRET = re.compile(
    r"""(?ix)
    ((?:api[_-]?key|secret|token|passw(?:or)?d)\b["']?\s*[=:]\s*["']?)
    ([A-Za-z0-9._~+/-]{8,})
    """
)
_SECRET_WORDS = ("key", "secret", "token", "passw")
WANDB_KEY_CONTEXT = re.compile(r"(?i)(wandb[^\n]{0,40}?)\b([0-9a-f]{40}|[0-9a-f]{86})\b")


class Redactor:
    """Replaces configured secret values (by name) and credential-shaped strings."""

    def __init__(self, secrets: Mapping[str, str]) -> None:
        """`secrets`: name -> value; values under MIN_SECRET_CHARS characters are skipped."""
        kept = {value: name for name, value in secrets.items() if len(value) >= MIN_SECRET_CHARS}
        self._names = kept
        # Longest first: a value that contains another is replaced whole.
        ordered = sorted(kept, key=len, reverse=True)
        self._values = re.compile("|".join(map(re.escape, ordered))) if ordered else None

    @property
    def longest(self) -> int:
        """The longest configured value (how far a cut may split one)."""
        return max((len(value) for value in self._names), default=0)

    def text(self, text: str) -> str:
        if self._values is not None:
            text = self._values.sub(lambda m: f"[REDACTED:{self._names[m.group(0)]}]", text)
        text = TOKEN_SHAPES.sub(REDACTED, text)
        lowered = text.lower()
        if "wandb" in lowered:
            text = WANDB_KEY_CONTEXT.sub(lambda m: m.group(1) + REDACTED, text)
        # The named-secret pattern is the slow one: only where one of its words occurs.
        if any(word in lowered for word in _SECRET_WORDS):
            text = NAMED_SECRET.sub(_keep_name, text)
        return text

    def data(self, value: Any) -> Any:
        """`value` with every string in it (dict keys included) redacted; other values as is."""
        if isinstance(value, str):
            return self.text(value)
        if isinstance(value, dict):
            return {self.data(key): self.data(item) for key, item in value.items()}  # pyright: ignore[reportUnknownVariableType]
        if isinstance(value, list | tuple):
            return [self.data(item) for item in value]  # pyright: ignore[reportUnknownVariableType]
        return value

    def failure(self, failure: Failure) -> Failure:
        """The failure with its texts redacted, cut to the schema's lengths."""
        return failure.model_copy(
            update={
                "summary": self.text(failure.summary)[:2_000],
                "fix": self.text(failure.fix)[:2_000],
                "log_excerpt": _last(self.text(failure.log_excerpt), 8_000),
            }
        )


def _keep_name(match: re.Match[str]) -> str:
    return match.group(1) + REDACTED if _looks_secret(match.group(2)) else match.group(0)


def _looks_secret(value: str) -> bool:
    # Letters and digits both: a key, not a word ("token: embedding") or a number.
    return any(c.isdigit() for c in value) and any(c.isalpha() for c in value)


def _last(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[-limit:]
