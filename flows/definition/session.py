"""A wizard session's state: plain, immutable and JSON-serializable, so any store can keep it."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any, Literal

SessionStatus = Literal["active", "complete", "cancelled"]
STATUSES: tuple[SessionStatus, ...] = ("active", "complete", "cancelled")


@dataclass(frozen=True)
class Session:
    """Where one conversation stands. The engine returns a new Session; it never mutates one."""

    flow: str
    answers: Mapping[str, Any] = field(default_factory=dict)
    history: tuple[str, ...] = ()
    """Answered step ids, oldest first: what `back` walks."""
    previous: Mapping[str, Any] = field(default_factory=dict)
    """Answers taken back by `back` or `edit`, offered again with `keep`."""
    prefill: Mapping[str, str] = field(default_factory=dict)
    """Text the user gave up front (e.g. after /train-rl), proposed for confirmation."""
    failures: Mapping[str, int] = field(default_factory=dict)
    pending_field: str | None = None
    """On a ValuesMenu step: the field whose new value is being asked."""
    draft: Mapping[str, Any] = field(default_factory=dict)
    """On a ValuesMenu step: the values changed so far, stored as the answer on `done`."""
    shown_notes: frozenset[str] = frozenset()
    advice: Mapping[str, Mapping[str, str]] = field(default_factory=dict)
    """Recommendations for questions ahead (the assistant's): step id -> {"value", "reason"}.
    A question with advice shows that option as recommended, with the reason; never an answer."""
    status: SessionStatus = "active"
    revision: int = 0
    """Increases with every change; stores use it to refuse a stale write."""

    @classmethod
    def start(cls, flow: str, prefill: Mapping[str, str] | None = None) -> Session:
        return cls(flow=flow, prefill=dict(prefill or {}))

    def changed(self, **changes: Any) -> Session:
        """A copy with `changes` applied and the revision bumped."""
        return replace(self, revision=self.revision + 1, **changes)

    def to_json(self) -> str:
        """The session as JSON; answers keep their keys in the order given (a scenario's or a
        tool schema's fields are printed into the script as the user wrote them)."""
        data: dict[str, Any] = {
            "flow": self.flow,
            "answers": dict(self.answers),
            "history": list(self.history),
            "previous": dict(self.previous),
            "prefill": dict(self.prefill),
            "failures": dict(self.failures),
            "pending_field": self.pending_field,
            "draft": dict(self.draft),
            "shown_notes": sorted(self.shown_notes),
            "status": self.status,
            "revision": self.revision,
        }
        if self.advice:  # sessions without advice read as they did before it existed
            data["advice"] = {step: dict(advice) for step, advice in self.advice.items()}
        return json.dumps(data)

    @classmethod
    def from_json(cls, text: str) -> Session:
        data = json.loads(text)
        status = data.get("status", "active")
        if status not in STATUSES:
            raise ValueError(f"unknown session status {status!r}")
        return cls(
            flow=str(data["flow"]),
            answers=dict(data.get("answers", {})),
            history=tuple(data.get("history", ())),
            previous=dict(data.get("previous", {})),
            prefill={str(k): str(v) for k, v in data.get("prefill", {}).items()},
            failures={str(k): int(v) for k, v in data.get("failures", {}).items()},
            pending_field=data.get("pending_field"),
            draft=dict(data.get("draft", {})),
            shown_notes=frozenset(data.get("shown_notes", ())),
            advice={
                str(step): {"value": str(a["value"]), "reason": str(a.get("reason", ""))}
                for step, a in data.get("advice", {}).items()
            },
            status=status,
            revision=int(data.get("revision", 0)),
        )
