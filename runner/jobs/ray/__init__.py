"""Jobs on a Ray cluster through its Job Submission API: the executor that follows them, the API
client, and the wrapper each Ray job runs."""
