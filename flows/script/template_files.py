"""Where the Jinja2 templates live: templates/ in a checkout, flows/_templates in a wheel."""

from __future__ import annotations

from pathlib import Path


def templates_dir() -> Path:
    """templates/ of a source checkout, or the copy packaged inside flows/ in a wheel."""
    flows_dir = Path(__file__).resolve().parents[1]
    for candidate in (flows_dir.parent / "templates", flows_dir / "_templates"):
        if candidate.is_dir():
            return candidate
    raise FileNotFoundError("artbot's templates/ folder is missing from this installation")
