"""The escape corpus: hostile code, run for real in the sandbox, as a user's script in the dry run
and as a model's draft in the draft trial. Every attempt must fail, nothing secret may come back,
nothing may be left running, and the host must be as it was.

The "bot" here is a real process holding canary secrets in its environment, beside a database
file that holds a canary too (world-readable, so that only the sandbox's view of the files keeps
it out); a TCP listener on 127.0.0.1 counts every connection that reaches it.
"""

from __future__ import annotations

import secrets
import socket
import subprocess
import sys
import textwrap
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from assistant.sandbox import Limits, run_sandboxed
from checks.dryrun import dryrun_script
from flows import CodeCall, CodeCalls
from isolation.sandbox import Sandbox

pytestmark = pytest.mark.sandbox

CANARY = f"canary-{secrets.token_hex(12)}"
MARKER = f"artbot-escape-{secrets.token_hex(6)}"
"""In the command line of every process an attack starts: how leftovers are found."""


@dataclass(frozen=True)
class Host:
    """What the attacks aim at."""

    bot_pid: int
    database: Path
    outside: Path  # a file the attack tries to create, in a folder anyone may write to
    port: int


class Listener:
    """A TCP server on loopback that only counts who reached it."""

    def __init__(self) -> None:
        self.server = socket.create_server(("127.0.0.1", 0))
        self.port = self.server.getsockname()[1]
        self.accepted: list[socket.socket] = []
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                connection, _ = self.server.accept()
            except OSError:
                return
            self.accepted.append(connection)

    def close(self) -> None:
        self.server.close()


@pytest.fixture(scope="module")
def host(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Host]:
    sandbox = Sandbox.for_host()
    assert sandbox.confined, f"the sandbox is needed for these tests: {sandbox.reason}"
    folder = Path(tmp_path_factory.mktemp("bot-host"))
    folder.chmod(0o777)
    database = folder / "artbot.db"
    database.write_text(f"slack_bots: xoxb-{CANARY}\n")
    database.chmod(0o644)
    bot = subprocess.Popen(
        [sys.executable, "-c", "import time; time.sleep(3600)"],
        env={
            "PATH": "/usr/bin:/bin",
            "SLACK_SIGNING_SECRET": CANARY,
            "ARTBOT_RUNNER_TOKEN": CANARY,
            "ARTBOT_DATABASE_URL": f"postgresql://artbot:{CANARY}@db/artbot",
        },
    )
    listener = Listener()
    try:
        yield Host(bot.pid, database, folder / "written-from-the-sandbox", listener.port)
    finally:
        bot.kill()
        bot.wait()
        listener.close()
    assert not listener.accepted, "an attack reached the listener on the host's loopback"


@pytest.fixture(autouse=True)
def canaries_in_this_process(monkeypatch: pytest.MonkeyPatch) -> None:
    """The process that starts the sandbox holds the secrets too, as `artbot serve` does."""
    monkeypatch.setenv("ARTBOT_RUNNER_TOKEN", CANARY)
    monkeypatch.setenv("SLACK_CLIENT_SECRET", CANARY)
    monkeypatch.setenv("ARTBOT_DATABASE_URL", f"postgresql://artbot:{CANARY}@db/artbot")


# Each attack is a body that ends with `outcome` set: "BLOCKED ..." when the attempt failed,
# anything else when it got through. Placeholders: {pid}, {database}, {outside}, {port}, {marker}.
CONNECT = "import socket; socket.create_connection(('127.0.0.1', {port}), timeout=3)"
LATER = (
    # What a left-behind process tries once the sandbox is gone.
    "import socket, time; time.sleep(2); "
    "open('{outside}', 'w').write('late'); "
    "socket.create_connection(('127.0.0.1', {port}), timeout=3)"
)
ATTACKS: dict[str, str] = {
    "read the bot's environment": """
        try:
            outcome = "LEAKED " + open("/proc/{pid}/environ", "rb").read().decode(errors="replace")
        except OSError as error:
            outcome = f"BLOCKED {{type(error).__name__}}"
    """,
    "read the bot's database file": """
        try:
            outcome = "LEAKED " + open("{database}").read()
        except OSError as error:
            outcome = f"BLOCKED {{type(error).__name__}}"
    """,
    "read the runner token from the environment": """
        import os
        found = {{k: v for k, v in os.environ.items() if "{canary}" in v}}
        outcome = f"LEAKED {{found}}" if found else "BLOCKED: no secret in os.environ"
    """,
    "write outside the scratch folder": """
        try:
            open("{outside}", "w").write("written")
            outcome = "WROTE {outside}"
        except OSError as error:
            outcome = f"BLOCKED {{type(error).__name__}}"
    """,
    "connect to 127.0.0.1 by socket": """
        import socket
        try:
            socket.create_connection(("127.0.0.1", {port}), timeout=3)
            outcome = "CONNECTED"
        except OSError as error:
            outcome = f"BLOCKED {{type(error).__name__}}"
    """,
    "connect to 127.0.0.1 by _socket": """
        import _socket
        try:
            raw = _socket.socket(_socket.AF_INET, _socket.SOCK_STREAM)
            raw.settimeout(3)
            raw.connect(("127.0.0.1", {port}))
            outcome = "CONNECTED"
        except OSError as error:
            outcome = f"BLOCKED {{type(error).__name__}}"
    """,
    "connect to 127.0.0.1 from a subprocess": """
        import subprocess, sys
        try:
            done = subprocess.run([sys.executable, "-c", "{connect}", "{marker}"], timeout=10)
            outcome = "CONNECTED" if done.returncode == 0 else f"BLOCKED exit {{done.returncode}}"
        except (OSError, subprocess.SubprocessError) as error:
            outcome = f"BLOCKED {{type(error).__name__}}"
    """,
    "start a detached process by _posixsubprocess.fork_exec": """
        import _posixsubprocess, os, sys
        exe = sys.executable.encode()
        read_end, write_end = os.pipe()
        try:
            _posixsubprocess.fork_exec(
                [exe, b"-c", "{later}".encode(), b"{marker}"], [exe], True, (write_end,),
                None, None, -1, -1, -1, -1, -1, -1, read_end, write_end, True, True, -1,
                None, None, None, -1, None, False,
            )
            outcome = "BLOCKED: started, and must die with the sandbox"
        except (OSError, TypeError) as error:
            outcome = f"BLOCKED {{type(error).__name__}}"
    """,
    "os.fork a child that outlives the parent": """
        import os
        try:
            if os.fork() == 0:
                os.setsid()
                os.execv(sys.executable, [sys.executable, "-c", "{later}", "{marker}"])
            outcome = "BLOCKED: forked, and the child must die with the sandbox"
        except OSError as error:
            outcome = f"BLOCKED {{type(error).__name__}}"
    """,
    "a bounded fork bomb": """
        import os, time
        children = 0
        try:
            for _ in range(5000):
                if os.fork() == 0:
                    time.sleep(60)
                    os._exit(0)
                children += 1
            outcome = f"FORKED {{children}} children"
        except OSError as error:
            outcome = f"BLOCKED after {{children}} children: {{type(error).__name__}}"
    """,
    "allocate 4 GB": """
        try:
            hoard = bytearray(4 * 1024**3)
            outcome = f"ALLOCATED {{len(hoard)}}"
        except MemoryError:
            outcome = "BLOCKED MemoryError"
    """,
    "leave a detached grandchild": """
        import os, sys
        if os.fork() == 0:
            os.setsid()
            if os.fork() == 0:
                os.execv(sys.executable, [sys.executable, "-c", "{later}", "{marker}"])
            os._exit(0)
        os.wait()
        outcome = "BLOCKED: the grandchild must die with the sandbox"
    """,
}


def attack_body(name: str, host: Host) -> str:
    fields = {
        "pid": host.bot_pid,
        "database": host.database,
        "outside": host.outside,
        "port": host.port,
        "marker": MARKER,
        "canary": CANARY,
        "connect": CONNECT.format(port=host.port),
        "later": LATER.format(outside=host.outside, port=host.port),
    }
    return "import sys\n" + textwrap.dedent(ATTACKS[name]).format(**fields)


def assert_contained(host: Host, shown: str) -> None:
    """Nothing secret in what the sandbox gave back; the host as it was; nothing left running."""
    assert CANARY not in shown
    assert not host.outside.exists(), "the sandbox wrote outside its scratch folder"
    assert leftovers() == [], "a process the attack started outlived the sandbox"


def leftovers() -> list[str]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                command = (entry / "cmdline").read_bytes()
            except OSError:
                continue
            if MARKER.encode() in command:
                found.append(command.decode(errors="replace"))
    return found


@pytest.mark.parametrize("name", sorted(ATTACKS))
def test_hostile_user_code_in_the_dry_run_is_contained(
    name: str, host: Host, tmp_path: Path
) -> None:
    script = tmp_path / "hostile.py"
    script.write_text(attack_body(name, host) + "\nprint('OUTCOME', outcome, flush=True)\n")

    report = dryrun_script(script, timeout_s=60, workdir=tmp_path / "work")

    shown = report.format()
    assert_contained(host, shown)
    assert "OUTCOME BLOCKED" in report.output_tail, shown


@pytest.mark.parametrize("name", sorted(ATTACKS))
def test_a_hostile_draft_is_contained(name: str, host: Host) -> None:
    body = textwrap.indent(attack_body(name, host), "    ")
    code = f"def compute_reward(scenario, answer):\n{body}\n    raise ValueError(outcome)\n"
    calls = CodeCalls(
        {"draft": code},
        (CodeCall("draft", "compute_reward(scenario, answer)", "number", "compute_reward"),),
        ({"answer": "4"},),
    )

    report = run_sandboxed(calls, Limits(wall_seconds=20), Sandbox.for_host())

    assert report.problem is not None
    assert_contained(host, report.problem)
    # Refused by the sandbox (the child's audit hook or the kernel), or its error said it failed.
    assert "BLOCKED" in report.problem or "the sandbox" in report.problem, report.problem


def test_code_that_sleeps_forever_is_killed_with_everything_it_started(
    host: Host, tmp_path: Path
) -> None:
    script = tmp_path / "sleeper.py"
    script.write_text(
        attack_body("leave a detached grandchild", host) + "\nimport time\ntime.sleep(10**6)\n"
    )

    report = dryrun_script(script, timeout_s=20, workdir=tmp_path / "work")

    assert report.exit_code is None and "timed out" in report.format()
    assert_contained(host, report.format())
