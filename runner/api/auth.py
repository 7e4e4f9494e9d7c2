"""The bearer token every route but /health needs, as a route dependency."""

from __future__ import annotations

import hmac

from fastapi import Request
from fastapi.responses import JSONResponse


class Unauthorized(Exception):
    """No bearer token, or the wrong one (401)."""


def require_token(request: Request) -> None:
    """Refuse a request without `Authorization: Bearer <the app's token>`."""
    expected: bytes = request.app.state.token
    scheme, _, given = request.headers.get("authorization", "").partition(" ")
    # compare_digest: the time taken does not tell how much of the token was right.
    if scheme.lower() != "bearer" or not hmac.compare_digest(given.strip().encode(), expected):
        raise Unauthorized


async def unauthorized(request: Request, error: Exception) -> JSONResponse:
    """401, naming the scheme the client must use."""
    return JSONResponse(
        {"detail": "missing or wrong bearer token"},
        status_code=401,
        headers={"WWW-Authenticate": "Bearer"},
    )
