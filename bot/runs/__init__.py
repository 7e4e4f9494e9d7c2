"""Approved scripts on the GPU runner, told in their wizard's thread.

store.py           the run table and its store (one row per run, with the job's event cursor)
service.py         RunService: approve, submit (retrying while the runner is down), follow events
follower.py        the thread that long-polls the runner for every active run's events
reporter.py        a job's events told in its thread: milestones, warnings, plots, the card
cards.py           Block Kit for runs: the status card, success and failure messages, listings
plots.py           reward curves as PNG (matplotlib)
rollout_samples.py a validation's best and worst rollouts, shown in the thread
controls.py        the status card's Cancel, and a failed run's fixes
flags.py           the script flags a fix changes (GPU memory)
approval.py        who may approve a script (it runs code on the GPU host)
rerun.py           *Run again with changes*: a new wizard on a copy of a run's answers
compare.py         two runs side by side: one plot, the answers that differ
tryit.py           `try <prompt>` and *Try it*: the trained model answers in the thread
try_limits.py      what trying may cost: rate limits and a pool of its own
"""
