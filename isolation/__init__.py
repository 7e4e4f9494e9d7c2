"""What keeps untrusted code and secrets apart: the OS sandbox users' code runs in, the redaction of
secrets from all artbot shows, sends or logs, and the process made non-dumpable."""
