"""What a wizard turn must do in its thread, as data: post a message, ask a question, retire
old questions, generate the script. The outbox stores these with the turn (bot.outbox); its
worker carries them out."""

from __future__ import annotations

from dataclasses import dataclass

from assistant import Proposal
from bot.blocks import SlackMessage, engine_message
from flows import Answered, Cancelled, Completed, Question, Turn


@dataclass(frozen=True)
class Post:
    """Post a message into the thread."""

    message: SlackMessage


@dataclass(frozen=True)
class Ask:
    """Post a question into the thread and remember it (so it can lose its buttons later); the
    thread's older open questions lose theirs first: one live question per thread."""

    step_id: str
    text: str
    message: SlackMessage


@dataclass(frozen=True)
class Offer:
    """Post the assistant's proposal with Accept / Re-answer buttons and remember it (under
    PROPOSAL_STEP) so it loses its buttons later. Unlike Ask it leaves the open question's
    buttons alone. The stored proposal is what Accept uses when it is too long for a button's
    value."""

    proposal: Proposal
    message: SlackMessage


@dataclass(frozen=True)
class Retire:
    """The thread's open questions for `step_id` (None: any) lose their buttons and show
    `shown`: the question was answered, or what the buttons offered is gone."""

    step_id: str | None
    shown: str


@dataclass(frozen=True)
class Generate:
    """The session is complete: render, check and upload its script, after what the turn said
    (a crash before it is done leaves it to do after the restart)."""


ThreadEffect = Post | Ask | Offer | Retire | Generate


def turn_effects(turn: Turn) -> list[ThreadEffect]:
    """What a turn must do in its thread, in order: answered questions first, then the messages,
    then the script when the session is complete."""
    effects: list[ThreadEffect] = []
    for effect in turn.effects:
        if isinstance(effect, Answered):
            effects.append(Retire(effect.step_id, effect.shown))
        elif isinstance(effect, Cancelled):
            effects.append(Retire(None, "Cancelled"))
    for message in turn.messages:
        slack = engine_message(message)
        if isinstance(message, Question):
            effects.append(Ask(message.step_id, message.text, slack))
        else:
            effects.append(Post(slack))
    if any(isinstance(effect, Completed) for effect in turn.effects):
        effects.append(Generate())
    return effects
