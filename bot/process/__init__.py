"""`artbot serve` as a process: serving, the router and its workers, health, metrics, logs.

serve.py      `artbot serve`: HTTP or Socket Mode under uvicorn, the background loops
router.py     the front process of `--workers N`: one port, requests to the worker owning them
workers.py    the worker processes behind the router: started, watched, restarted
shards.py     which worker owns which conversations
work_slots.py many listener threads wait on Slack, few compute at once
health.py     what /healthz checks
metrics.py    the Prometheus metrics
log_fields.py structured log lines carrying the Slack ids
hardening.py  what start-up does to keep secrets its own, and the users' code sandbox
"""
