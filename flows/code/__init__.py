"""Code the user gives on purpose, read and never run: where it sits in the script, its entry
points and the calls the script makes to them, tool schemas, and the third-party packages it
imports."""
