"""A process other programs of its user cannot inspect: `prctl(PR_SET_DUMPABLE, 0)`.

`/proc/<pid>/environ` shows the environment a process started with; removing a variable from
`os.environ` later changes the C library's copy, not that memory, so it hides nothing. What does
hide it from code running as the process's own user is the dumpable flag: non-dumpable, the
kernel refuses `/proc/<pid>/environ`, `/proc/<pid>/mem` and ptrace to everyone without
CAP_SYS_PTRACE (root still can). The flag is reset by execve, so children stay inspectable by
their parent. The bot and the runner both make themselves non-dumpable at start-up.

Standard library only (the isolation tests load it under a plain interpreter).
"""

from __future__ import annotations

import ctypes
import sys

PR_SET_DUMPABLE = 4
PR_GET_DUMPABLE = 3


def forbid_inspection() -> bool:
    """Make this process non-dumpable; False where the platform has no prctl (not Linux)."""
    if not sys.platform.startswith("linux"):
        return False
    libc = ctypes.CDLL(None, use_errno=True)
    return libc.prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) == 0


def inspectable() -> bool:
    """Whether other processes of this user may read this one's environment and memory."""
    if not sys.platform.startswith("linux"):
        return True
    libc = ctypes.CDLL(None, use_errno=True)
    return libc.prctl(PR_GET_DUMPABLE, 0, 0, 0, 0) != 0
