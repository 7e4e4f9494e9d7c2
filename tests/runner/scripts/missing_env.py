"""Exits as a generated script does when a variable it needs is not set."""

import os
import sys

if not os.environ.get("OPENAI_API_KEY"):
    sys.exit(
        "Missing environment variables:\n"
        "  OPENAI_API_KEY: RULER's judge (openai/gpt-5.4) needs it\n"
        "Set them, or put them in a .env file next to this script, and run again."
    )
print("has the key")
