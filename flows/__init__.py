"""The wizards (train-rl, train-sft), pure: a flow is data, one engine advances a session by one
reply.

Adapters (the terminal chat, the Slack bot, storage) import what they need from here, not from
the modules inside: those are the wizard's own business and may move.

    from flows import TRAIN_RL, Reply, Session, advance, begin

    turn = begin(TRAIN_RL, Session.start(TRAIN_RL.id))
    turn = advance(TRAIN_RL, turn.session, Reply(text="static"))

RL after SFT: `begin(TRAIN_RL, rl_session_after_sft(sft_session.answers))` opens a train-rl
wizard whose script forks the finished SFT run's model.
"""

from collections.abc import Mapping

from flows.code.code_calls import CODE_STEPS, CodeCall, CodeCalls, code_calls
from flows.code.tool_schemas import tool_schemas_from_code
from flows.conversation.answers import MAX_ATTACHMENT_BYTES
from flows.conversation.engine import MAX_REPLY_CHARS, advance, begin
from flows.conversation.replay import AnswersError, replay
from flows.conversation.secrets import redact_secrets
from flows.definition.flow import Flow
from flows.definition.questions import shown_answer
from flows.definition.session import Session
from flows.definition.steps import Attachment, Choice, InvalidAnswer, Text, ValuesMenu
from flows.definition.turns import (
    EDIT_MENU,
    Answered,
    Cancelled,
    Completed,
    EditMenu,
    Effect,
    Message,
    Notice,
    OptionView,
    Problem,
    Progress,
    Question,
    Reply,
    Turn,
)
from flows.script.render import RenderError, render_script
from flows.wizards.rl.train_rl import TRAIN_RL, hyperparameters
from flows.wizards.sft.train_sft import TRAIN_SFT, training_rows
from flows.wizards.sft.train_sft import hyperparameters as sft_hyperparameters
from flows.wizards.sft_then_rl import rl_session_after_sft
from flows.wizards.start_from import BACKENDS as BACKEND_NAMES
from flows.wizards.start_from import start_of

FLOWS: Mapping[str, Flow] = {TRAIN_RL.id: TRAIN_RL, TRAIN_SFT.id: TRAIN_SFT}
"""Every flow by its id: the one registry the session store and the adapters look flows up in."""

__all__ = [
    "BACKEND_NAMES",
    "CODE_STEPS",
    "EDIT_MENU",
    "FLOWS",
    "MAX_ATTACHMENT_BYTES",
    "MAX_REPLY_CHARS",
    "TRAIN_RL",
    "TRAIN_SFT",
    "Answered",
    "AnswersError",
    "Attachment",
    "Cancelled",
    "Choice",
    "CodeCall",
    "CodeCalls",
    "Completed",
    "EditMenu",
    "Effect",
    "Flow",
    "InvalidAnswer",
    "Message",
    "Notice",
    "OptionView",
    "Problem",
    "Progress",
    "Question",
    "RenderError",
    "Reply",
    "Session",
    "Text",
    "Turn",
    "ValuesMenu",
    "advance",
    "begin",
    "code_calls",
    "hyperparameters",
    "redact_secrets",
    "render_script",
    "replay",
    "rl_session_after_sft",
    "sft_hyperparameters",
    "shown_answer",
    "start_of",
    "tool_schemas_from_code",
    "training_rows",
]
