"""`artbot serve` as a process: serving, the router and its workers, health, metrics, logs.

serve.py       `artbot serve`: HTTP or Socket Mode under uvicorn, and the background loops
router.py      the front process of `--workers N`: one port, each request to its worker
routing.py     which conversation (team, channel) a request belongs to, read from its body
worker_pool.py HTTP/1.1 to one worker over its Unix socket, a keep-alive pool of connections
workers.py     the worker processes behind the router: started, watched, restarted
shards.py      which worker owns which conversations
work_slots.py  many listener threads wait on Slack, few compute at once
health.py      what /healthz checks
metrics.py     the Prometheus metrics
log_fields.py  structured log lines carrying the Slack ids
hardening.py   what start-up does to keep secrets its own, and the users' code sandbox
"""
