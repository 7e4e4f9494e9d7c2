"""Advancing a session by one reply: the engine, reading replies into answers (parsers and
validators), the words that work on any question, the values menu, secrets kept out of the
state, and replaying a file of answers."""
