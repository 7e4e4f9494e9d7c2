"""Jobs on this host: the supervisor process, the launch and its preflight, one monitor thread per
job, the job's processes, user and memory, and recovery after a restart."""
