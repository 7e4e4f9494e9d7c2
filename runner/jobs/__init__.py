"""Running jobs, whatever runs them: the service (the use cases the API calls), the queue over GPU
slots, validation of a submission, the executors' interface, how a job ended and why it failed."""
