"""What every artbot program shares in reading its configuration: settings taken from the
environment, checked by pydantic, and every problem explained in one message at start-up.

Imports nothing else of artbot: the bot and the runner both build on it.
"""
