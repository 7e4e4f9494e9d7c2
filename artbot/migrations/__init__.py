"""artbot's Alembic migrations: `env.py`, the revision template and `versions/`; run through `artbot.db`."""
