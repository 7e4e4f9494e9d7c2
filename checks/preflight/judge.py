"""RULER's judge calls, as the forwarder sees them: which requests are the judge's, and whether
a reply is one RULER can read.

ART's `ruler` (art/rewards/ruler.py) sends one request per group whose last user message holds
a `<trajectory id="N">` block per rollout, and reads the reply's content with
`Response.model_validate_json`, expecting one score per block; anything else raises, and the
generated scripts' `ruler_score_group(..., swallow_exceptions=True)` leaves the group out. The
models below are RULER's own, so a reply counted malformed here is one RULER could not read.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ValidationError

from checks.dryrun.standins.policy_replies import judge_trajectory_ids

EXCERPT_CHARS = 200


class TrajectoryScore(BaseModel):
    trajectory_id: str
    explanation: str
    score: float


class Response(BaseModel):
    scores: list[TrajectoryScore]


def judged_ids(request: dict[str, Any]) -> list[str]:
    """The trajectory ids a RULER judge request asks scores for (empty: not a judge request)."""
    return judge_trajectory_ids(request)


def reply_content(payload: dict[str, Any]) -> str | None:
    """The first choice's text content, or None when the reply has none."""
    choices = payload.get("choices")
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
        return None
    message = choices[0].get("message")
    content = message.get("content") if isinstance(message, dict) else None
    return content if isinstance(content, str) else None


def read_verdict(ids: list[str], payload: dict[str, Any]) -> tuple[list[float], str | None]:
    """The scores in a judge's reply to a request for `ids`, or why RULER could not read it."""
    content = reply_content(payload) or "{}"  # as RULER: no content reads as "{}"
    try:
        parsed = Response.model_validate_json(content)
    except ValidationError as error:
        first = error.errors()[0]
        where = ".".join(str(part) for part in first["loc"]) or "the reply"
        return [], f"{where}: {first['msg']}"
    if len(parsed.scores) != len(ids):
        return [], f"{len(parsed.scores)} scores for {len(ids)} trajectories"
    return [s.score for s in parsed.scores], None


def excerpt(payload: dict[str, Any]) -> str:
    """The start of the reply's content, on one line, for the report."""
    content = reply_content(payload)
    if content is None:
        return "(no content)"
    flat = " ".join(content.split())
    return flat if len(flat) <= EXCERPT_CHARS else flat[:EXCERPT_CHARS] + "…"
