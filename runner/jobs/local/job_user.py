"""The unprivileged user jobs run as (ARTBOT_RUNNER_JOB_USER), when the runner may switch users.

The supervisor stays the runner's user (root): it writes the job's log and exit status where the
job cannot rewrite them, and starts the command as the job user, with that user's groups only.
The job's working folder is handed to that user; HOME, USER and LOGNAME are that user's.
"""

from __future__ import annotations

import os
import pwd
from dataclasses import dataclass
from pathlib import Path

CAP_SETGID = 6
CAP_SETUID = 7


@dataclass(frozen=True)
class JobUser:
    name: str
    uid: int
    gid: int
    home: str

    @classmethod
    def named(cls, name: str) -> JobUser:
        """The user called `name`; ValueError when there is none, or it is root."""
        try:
            entry = pwd.getpwnam(name)
        except KeyError:
            raise ValueError(f"no user {name!r} on this host") from None
        if entry.pw_uid == 0:
            raise ValueError("must be an unprivileged user, not root")
        return cls(entry.pw_name, entry.pw_uid, entry.pw_gid, entry.pw_dir)

    def env(self) -> dict[str, str]:
        """The variables that say who the job runs as."""
        return {"HOME": self.home, "USER": self.name, "LOGNAME": self.name}

    def give(self, folder: Path) -> None:
        """Hand `folder` and what is in it to the job user (a resumed job's folder included)."""
        for path in (folder, *folder.rglob("*")):
            if ".runner" in path.relative_to(folder).parts:
                continue  # the runner's own records stay the runner's
            if path.lstat().st_uid != self.uid:  # a resumed job's records are its already
                os.chown(path, self.uid, self.gid, follow_symlinks=False)


def can_switch_users() -> bool:
    """Whether this process may start others as another user (root, or CAP_SETUID+CAP_SETGID)."""
    if os.geteuid() == 0:
        return True
    try:
        status = Path("/proc/self/status").read_text()
    except OSError:
        return False
    for line in status.splitlines():
        if line.startswith("CapEff:"):
            effective = int(line.split()[1], 16)
            return bool(effective >> CAP_SETUID & 1 and effective >> CAP_SETGID & 1)
    return False
