"""Secrets out of everything artbot shows, sends or keeps: configured secret values (by name),
strings shaped like well-known credentials, and passwords in URLs.

The runner redacts what its jobs print (runner.records.redact); the bot redacts everything it
posts to Slack, sends to a model or logs through one process-wide redactor (`redact`, configured at
start-up with the bot's secrets by `configure_secrets`): dry-run reports, draft errors and
tracebacks can hold whatever the user's code managed to read.

What is not caught: a configured value shorter than MIN_SECRET_CHARS (too likely to be ordinary
text), a secret transformed (base64, split across lines), and credentials of shapes not listed
here.

Standard library only, and nothing of ours: every layer redacts with it.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

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
# A password in a URL's user info: `postgresql://artbot:PASSWORD@db/artbot`.
URL_PASSWORD = re.compile(r"(?i)\b([a-z][a-z0-9+.-]*://[^\s:/@]*:)([^\s@/]+)(@)")
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
        if "://" in text:
            text = URL_PASSWORD.sub(lambda m: m.group(1) + REDACTED + m.group(3), text)
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


def _keep_name(match: re.Match[str]) -> str:
    return match.group(1) + REDACTED if _looks_secret(match.group(2)) else match.group(0)


def _looks_secret(value: str) -> bool:
    # Letters and digits both: a key, not a word ("token: embedding") or a number.
    return any(c.isdigit() for c in value) and any(c.isalpha() for c in value)


SECRET_VARIABLE = re.compile(
    r"(API_KEY|TOKEN|SECRET|PASSWORD|PASSWD|CREDENTIALS?|_KEYS?)$|^AWS_", re.IGNORECASE
)
"""Environment variables whose value is a secret by their name."""
_URL_USERINFO_PASSWORD = re.compile(r"^[a-z][a-z0-9+.-]*://[^\s:/@]*:([^\s@/]+)@", re.IGNORECASE)


def secrets_in_environment(environ: Mapping[str, str]) -> dict[str, str]:
    """The secret values of an environment, by variable name: those named like secrets, and
    the password of any URL that holds one (`ARTBOT_DATABASE_URL=postgresql://u:PASSWORD@h`)."""
    found: dict[str, str] = {}
    for name, value in environ.items():
        if SECRET_VARIABLE.search(name):
            found[name] = value
            continue
        password = _URL_USERINFO_PASSWORD.match(value)
        if password is not None:
            found[f"{name} password"] = password.group(1)
    return found


_process_redactor = Redactor({})


def configure_secrets(secrets: Mapping[str, str]) -> None:
    """The secret values (name -> value) that `redact` replaces in this process, from now on."""
    global _process_redactor
    _process_redactor = Redactor(secrets)


def redact(text: str) -> str:
    """`text` without this process's configured secrets, credential shapes or URL passwords."""
    return _process_redactor.text(text)


def redact_data(value: Any) -> Any:
    """`value` with every string in it redacted as `redact` does."""
    return _process_redactor.data(value)
