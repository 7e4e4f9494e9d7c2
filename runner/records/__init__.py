"""The runner's record of its jobs: the SQL store and its migrations, the writes that move a job
through its states, redaction of what is stored, retention, the long polls' wake-ups, and the
one-runner-per-database lock."""
