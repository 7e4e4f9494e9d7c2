"""Persistence: where databases are and how they open (`database`), what every SQL store shares
(`sql_store`), the schema's migrations (`migrations`, handed the tables they manage), and the
wizard's sessions (`sessions`).

`database`, `sql_store` and `migrations` import nothing else of artbot, so the runner uses them
without loading the wizard; `sessions` stores `flows` sessions.
"""
