"""What a turn says in its thread, delivered durably: stored with the turn, carried out later.

effects.py  a thread effect as data: post, ask, offer, retire, update, upload, generate
outbox.py   the outbox store: effects written in the turn's transaction, claimed, settled
worker.py   the outbox worker: delivers each thread's effects in order, retrying with backoff
"""
