"""What a job's files say while it runs: ART's records on disk (steps, metrics, checkpoints),
what the job prints (progress lines, warnings, tracebacks, the completion banner) and its capped
log, the best and worst validation rollouts, and the watch that turns them into events."""
