"""A bot that is not root (the Docker image's user) sandboxes in a user namespace of its own uid:
the same walls (no network, its own processes, only the mounts it is given), tried for real by
an unprivileged process."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
NOBODY = 65534

pytestmark = pytest.mark.sandbox

# Runs as an unprivileged user: confines a probe and prints what the probe saw, as JSON.
SANDBOXING = textwrap.dedent(
    """
    import json, subprocess, sys, tempfile
    from pathlib import Path
    sys.path.insert(0, {root!r})
    from isolation.sandbox import Sandbox, SandboxLimits, sandbox_environment

    sandbox = Sandbox.for_host()
    scratch = Path(tempfile.mkdtemp())
    probe = '''
    import json, os, socket
    seen = {{"uid": os.getuid(), "pids": sorted(p for p in os.listdir("/proc") if p.isdigit())}}
    try:
        socket.create_connection(("127.0.0.1", {port}), timeout=3)
        seen["connected"] = True
    except OSError:
        seen["connected"] = False
    seen["home_visible"] = os.path.exists({home!r})
    open("written", "w").write("ok")
    print(json.dumps(seen))
    '''
    with sandbox.confine(
        [sys.executable, "-c", probe], cwd=scratch, writable=[scratch],
        read_only=[Path(sys.executable).resolve().parent.parent],
        limits=SandboxLimits(cpu_seconds=10, memory_bytes=1 << 30),
    ) as argv:
        done = subprocess.run(argv, env=sandbox_environment(scratch), capture_output=True,
                              text=True, timeout=60)
    print(json.dumps({{"confined": sandbox.confined, "as_root": sandbox.as_root,
                      "reason": sandbox.reason, "stdout": done.stdout, "stderr": done.stderr,
                      "written": (scratch / "written").exists()}}))
    """
)


def unprivileged_python() -> list[str]:
    """A Python the test can start as a user that is not root."""
    if os.geteuid() != 0:
        return [sys.executable]
    system_python = shutil.which("python3", path="/usr/bin:/usr/local/bin")
    assert system_python, "a system python3 is needed to try the sandbox as a non-root user"
    return [
        "setpriv",
        f"--reuid={NOBODY}",
        f"--regid={NOBODY}",
        "--clear-groups",
        system_python,
    ]


def test_an_unprivileged_bot_sandboxes_in_a_user_namespace() -> None:
    listener = socket.create_server(("127.0.0.1", 0))
    listener.settimeout(0.1)
    port = listener.getsockname()[1]
    home = str(Path.home())
    code = SANDBOXING.format(root=str(ROOT), port=port, home=home)
    try:
        done = subprocess.run(
            [*unprivileged_python(), "-c", code],
            capture_output=True,
            text=True,
            timeout=120,
            cwd="/",
            env={"PATH": "/usr/bin:/bin"},
        )
        assert done.returncode == 0, done.stderr
        outcome = json.loads(done.stdout.strip().splitlines()[-1])
        assert outcome["confined"] and not outcome["as_root"], outcome["reason"]
        seen = json.loads(outcome["stdout"].strip().splitlines()[-1])
        assert seen["uid"] == NOBODY  # the namespace's, whatever the bot's uid outside
        assert seen["pids"] == ["1", "2"]  # bwrap's init and the probe: nothing of the host
        assert seen["connected"] is False
        assert seen["home_visible"] is False
        assert outcome["written"]  # the scratch folder is writable
        with pytest.raises(TimeoutError):
            listener.accept()  # nothing reached the host's loopback
    finally:
        listener.close()
