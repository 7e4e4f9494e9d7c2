"""What a turn says in its thread, delivered durably: stored with the turn, carried out later.

effects.py     a thread effect as data: post, ask, offer, retire, update, upload, generate
outbox.py      the outbox store: effects written in the turn's transaction, claimed, settled
outbox_rows.py its table, and an effect as a row of it and back
worker.py      the outbox worker: each thread's effects in order, retried with backoff
carrier.py     one effect carried out in Slack (a post exactly once, even across a crash)
"""
