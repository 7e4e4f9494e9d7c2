"""Approved scripts on the GPU runner, told in their wizard's thread.

store.py              the run table and its store (one row per run, with the job's event cursor)
service.py            RunService: approve, submit (retrying while the runner is down), follow events
follower.py           the thread that long-polls the runner for every active run's events
reporter.py           a job's events told in its thread: milestones, warnings, plots, the card
controls.py           the status card's Cancel, Pause and Resume, and a failed run's fixes
flags.py              the script flags a fix changes (GPU memory)
approval.py           who may approve a script (it runs code on the GPU host)
preflight_records.py  what each preflight measured, kept with the thread's script
rerun.py              *Run again with changes* and *Continue with RL*: new wizards from a run
compare.py            two runs side by side: one plot, the answers that differ
display/              what a run shows, pure: the status card and messages, plots, rollouts
trained_model/        a finished run's model: *Try it*, its limits, checkpoints and export
"""
