"""Prints its secrets every way a careless script might, then fails with one in the message."""

import os
import sys
import warnings

key = os.environ["OPENAI_API_KEY"]
wandb = os.environ["WANDB_API_KEY"]
print(f"debug: OPENAI_API_KEY={key} WANDB_API_KEY={wandb}", flush=True)
warnings.warn(f"the judge rejected key {key}", UserWarning, stacklevel=1)
print("hub login with hf_" + "A1b2C3d4E5" * 4, file=sys.stderr, flush=True)
print("slack said: invalid_auth for xoxb-" + "1234567890-" * 3 + "abcdef", flush=True)
print(
    "wandb: Appending key for api.wandb.ai to your netrc file: "
    + "0123456789abcdef" * 2
    + "01234567",
    flush=True,
)
raise RuntimeError(f"authentication failed with {key}")
