"""The runner's HTTP API (FastAPI): thin routes over JobService, a bearer token on every route but
/health, domain errors mapped to status codes in one place, and a cap on request bodies."""

from runner.api.app import create_app, wrap

__all__ = ["create_app", "wrap"]
