"""Dry-run tests stay on loopback: litellm must not fetch its cost map at import."""

import os

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
