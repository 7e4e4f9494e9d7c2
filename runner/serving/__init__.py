"""Serving a succeeded job's trained model for a while, so that the bot's `try` can call it."""
