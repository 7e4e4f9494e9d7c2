"""The assistant: a language model (through the `openai` package, against any
OpenAI-compatible server) in front of the wizard's engine. It answers questions, proposes a
reading of free text, tool schemas from tool code and drafts of code (`draft`, tried in a sandbox
first); the engine validates every proposal and the user confirms it before it counts. Off
unless `ARTBOT_LLM_MODEL` is set.

    assistant = assistant_from_environment(os.environ)   # None: no model configured
    assisted = assistant.respond(TRAIN_RL, session, reply, user="U1")
"""

from __future__ import annotations

from collections.abc import Mapping

from assistant.budget import Budget
from assistant.conversation import (
    Assistant,
    Assisted,
    is_question,
    read_confirmation,
)
from assistant.drafts import DRAFT_WORD, JSON_DRAFTS, not_configured
from assistant.model import (
    ChatModel,
    Completion,
    ModelUnavailable,
    OpenAIChatModel,
    StreamingChatModel,
    TextSink,
)
from assistant.proposals import Proposal
from assistant.sandbox import Limits
from assistant.settings import AssistantSettings, load_assistant_settings
from config.from_environment import SettingsError
from isolation.sandbox import Sandbox

__all__ = [
    "DRAFT_WORD",
    "JSON_DRAFTS",
    "Assistant",
    "AssistantSettings",
    "Assisted",
    "Budget",
    "ChatModel",
    "Completion",
    "Limits",
    "ModelUnavailable",
    "OpenAIChatModel",
    "Proposal",
    "SettingsError",
    "StreamingChatModel",
    "TextSink",
    "assistant_for",
    "assistant_from_environment",
    "is_question",
    "load_assistant_settings",
    "not_configured",
    "read_confirmation",
]


def assistant_for(settings: AssistantSettings, code_sandbox: Sandbox | None = None) -> Assistant:
    """The assistant these settings describe, talking to its model over the `openai` client;
    its drafts are tried in `code_sandbox` (None: this host's, which runs nothing unconfined)."""
    model = OpenAIChatModel.connect(
        settings.model,
        base_url=settings.base_url,
        api_key=settings.key(),
        timeout_s=settings.timeout_s,
    )
    return Assistant(
        model,
        Budget(settings.requests_per_minute, settings.tokens_per_day),
        code_sandbox=code_sandbox,
    )


def assistant_from_environment(
    env: Mapping[str, str], code_sandbox: Sandbox | None = None
) -> Assistant | None:
    """The configured assistant, or None when `ARTBOT_LLM_MODEL` is not set. Raises
    SettingsError naming every problem."""
    settings = load_assistant_settings(env)
    return assistant_for(settings, code_sandbox) if settings is not None else None
