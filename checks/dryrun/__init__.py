"""`artbot dryrun`: run an ART training script end to end on a CPU, in seconds.

The script runs, its file unmodified, in a child process, against the real `art` client code with
a stand-in policy (an OpenAI-compatible server on 127.0.0.1 that also plays the RULER
judge) and a stand-in trainer (in place of LocalBackend / ServerlessBackend). The report
says whether it ran to the end, trained something learnable, and ran the user's code.
"""

from checks.dryrun.launch import dryrun_script
from checks.dryrun.report import DryrunReport

__all__ = ["DryrunReport", "dryrun_script"]
