"""The API's assembly: the FastAPI app over one JobService and token, its routes and error
answers, and the body limit it is served behind."""

from __future__ import annotations

from fastapi import FastAPI

from runner.api import model_routes, routes
from runner.api.body_limit import ASGIApp, BodyLimit
from runner.api.errors import add_error_handlers
from runner.api.metrics import RunnerMetrics
from runner.jobs.service import JobService


def create_app(service: JobService, token: str) -> FastAPI:
    """The API over `service`; requests must bear `token`."""
    app = FastAPI(
        title="artbot runner",
        summary="Runs approved ART training scripts on this GPU host and reports their progress.",
        version=service.health().version,
        openapi_url=None,  # served by a route, behind the token
        docs_url=None,
        redoc_url=None,
    )
    app.state.service = service
    app.state.metrics = RunnerMetrics(service)
    app.state.token = token.encode()
    add_error_handlers(app)
    app.include_router(routes.public)
    app.include_router(routes.protected)
    app.include_router(routes.jobs)
    app.include_router(model_routes.models)
    app.include_router(model_routes.downloads)  # no token: a signed link is its own key
    return app


def wrap(app: FastAPI) -> ASGIApp:
    """The app as served: behind the body size limit."""
    return BodyLimit(app)
