"""Where the Jinja2 templates live: templates/ in a checkout, flows/_templates in a wheel."""

from __future__ import annotations

from pathlib import Path


def templates_dir() -> Path:
    """templates/ of a source checkout, or the copy packaged inside flows/ in a wheel."""
    here = Path(__file__).resolve().parent
    for candidate in (here.parent / "templates", here / "_templates"):
        if candidate.is_dir():
            return candidate
    raise FileNotFoundError("artbot's templates/ folder is missing from this installation")
