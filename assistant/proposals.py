"""What the assistant offers the user to accept: a reading of a free reply, or a draft of code.
Either is a reply the engine accepted in a trial run; it counts only once the user accepts it
and it goes through the engine exactly as if typed."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Literal

from flows import Answered, Flow, Reply, Session, advance

ProposalKind = Literal["reading", "draft"]


@dataclass(frozen=True)
class Proposal:
    """An answer the assistant read from a reply (a reading) or wrote at a code question (a
    draft), waiting for the user's yes."""

    step_id: str
    reply_text: str
    """Sent through the engine as if typed, once accepted (a draft: its code)."""
    shown: str
    """The answer as the engine shows it back (a draft: what it is, e.g. `reward logic`)."""
    reason: str
    kind: ProposalKind = "reading"

    @property
    def is_draft(self) -> bool:
        return self.kind == "draft"

    @property
    def text(self) -> str:
        """What the user is asked to confirm (a draft: with its code)."""
        reason = f"\n{self.reason}" if self.reason else ""
        if self.is_draft:
            return f"{self.headline}{reason}\n```\n{self.reply_text.rstrip()}\n```\nUse it?"
        return f"I read that as: *{self.shown}*.{reason}\nUse it?"

    @property
    def headline(self) -> str:
        """A draft's first line: what it is and how long."""
        lines = len(self.reply_text.strip().splitlines())
        return f"A draft of the *{self.shown}* ({lines} line{'s' if lines != 1 else ''}):"

    def to_json(self) -> str:
        """The proposal as an edge carries it until the user decides (a Slack button's value
        holds at most 2,000 characters: a longer one is kept server-side)."""
        return json.dumps(
            {
                "step": self.step_id,
                "text": self.reply_text,
                "shown": self.shown,
                "why": self.reason,
                "kind": self.kind,
            }
        )

    @classmethod
    def from_json(cls, text: str) -> Proposal:
        """The proposal `to_json` wrote (a reading when it names no kind, as before drafts);
        ValueError for anything else (a forged value)."""
        data = json.loads(text)
        fields = ("step", "text", "shown", "why")
        if not isinstance(data, dict) or any(not isinstance(data.get(f), str) for f in fields):
            raise ValueError("not a proposal")
        kind = data.get("kind", "reading")
        if kind not in ("reading", "draft"):
            raise ValueError("not a proposal")
        return cls(
            data["step"],
            data["text"],
            data["shown"],
            data["why"],
            "draft" if kind == "draft" else "reading",
        )

    def as_reply(self) -> Reply:
        """The accepted proposal, as the reply the engine receives (refused as stale if the
        question has moved on meanwhile)."""
        return Reply(text=self.reply_text, step_id=self.step_id)


def trial(flow: Flow, session: Session, step_id: str, value: str, reason: str) -> Proposal | None:
    """`value` as a proposal if the engine, given it as a typed reply, answers `step_id` with it."""
    trial = advance(flow, session, Reply(text=value, step_id=step_id))
    answered = next(
        (e for e in trial.effects if isinstance(e, Answered) and e.step_id == step_id), None
    )
    if answered is None:
        return None
    return Proposal(step_id, value, answered.shown, reason)
