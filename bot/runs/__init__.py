"""Approved scripts on the GPU runner, told in their wizard's thread.

store.py    the run table and its store (one row per run, with the job's event cursor)
service.py  RunService: approve, submit (retrying while the runner is down), Cancel, the fixes
notifier.py a job's events into the thread: milestones, warnings, plots, the result, the card
cards.py    Block Kit for runs: the status card, success and failure messages, listings
flags.py    the script flags a fix button changes (GPU memory)
follower.py the thread that polls the runner for every active run
"""
