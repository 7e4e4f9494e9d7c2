"""Recognise API keys and tokens in a reply, so that they are never stored or echoed."""

from __future__ import annotations

import re

_NAME = r"(?:[a-z_][a-z0-9_]*|[A-Z_][A-Z0-9_]*)"
_CODE_REFERENCE = rf"(?-i:{_NAME}(?:\.{_NAME})+(?![\w\-/+])|{_NAME}\()"
"""An unquoted value that is code naming the key, not the key: a dotted name in one case per
part (`model.inference_api_key`, `settings.SLACK_BOT_TOKEN`), or a call (`load_api_key(`).
Random keys mix cases and digits; a JWT's dotted parts do too."""

_PATTERNS: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("an OpenAI API key", re.compile(r"\bsk-(?:proj-|svcacct-|admin-)?[A-Za-z0-9_-]{20,}")),
    ("an Anthropic API key", re.compile(r"\bsk-ant-[A-Za-z0-9_-]{20,}")),
    ("a Slack token", re.compile(r"\bxox[abposr]-[A-Za-z0-9-]{10,}")),
    ("a Slack app token", re.compile(r"\bxapp-\d-[A-Za-z0-9-]{10,}")),
    (
        "a GitHub token",
        re.compile(r"\b(?:ghp|gho|ghu|ghs|ghr)_[A-Za-z0-9]{30,}|\bgithub_pat_[A-Za-z0-9_]{40,}"),
    ),
    ("a Hugging Face token", re.compile(r"\bhf_[A-Za-z0-9]{30,}")),
    ("an AWS access key", re.compile(r"\b(?:AKIA|ASIA)[0-9A-Z]{16}\b")),
    ("a Google API key", re.compile(r"\bAIza[0-9A-Za-z_-]{35}")),
    ("a private key", re.compile(r"-----BEGIN (?:RSA |EC |OPENSSH |DSA )?PRIVATE KEY-----")),
    (
        "a Weights & Biases API key",
        re.compile(r"(?i)\bWANDB_API_KEY\s*[=:]\s*['\"]?[0-9a-f]{40}\b"),
    ),
    (
        "an API key assignment",
        re.compile(
            r"\b[A-Za-z0-9_]*(?:API_KEY|SECRET|TOKEN|PASSWORD|api_key|secret|token|password)"
            r"\s*[=:]\s*"
            r"(?:['\"][A-Za-z0-9_\-./+]{16,}"  # a quoted value: a literal
            rf"|(?!os\.|getenv|environ|{_CODE_REFERENCE})[A-Za-z0-9_\-./+]{{16,}})",
            re.IGNORECASE,
        ),
    ),
)


def looks_like_secret(text: str) -> str | None:
    """What kind of secret `text` seems to contain (e.g. "an OpenAI API key"), or None."""
    for kind, pattern in _PATTERNS:
        if pattern.search(text):
            return kind
    return None


REDACTED = "[redacted]"


def redact_secrets(text: str) -> str:
    """`text` with every key- or token-shaped string replaced by [redacted] (before it leaves
    artbot, e.g. for a language model)."""
    for _kind, pattern in _PATTERNS:
        text = pattern.sub(REDACTED, text)
    return text
