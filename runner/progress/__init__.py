"""What a job's files say while it runs: ART's records on disk (steps, metrics, checkpoints), the
capped output log, the best and worst validation rollouts, and the watch that turns them into
events."""
