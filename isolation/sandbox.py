"""The one way artbot runs untrusted code on the bot host: inside Linux namespaces made by
bubblewrap (`bwrap`), as a uid that is not the bot's, with rlimits and a fresh environment.

What a sandboxed process gets:
- its own network namespace (loopback only, nothing outside it: not the bot, not the database,
  not the internet), PID namespace (it sees only its own processes; the whole tree dies with the
  sandbox), IPC and UTS namespaces, and a new session (no terminal to inject into);
- a mount namespace built from nothing: the system's `/usr` and the Python environments it needs
  read-only, the caller's read-only paths, the caller's writable folders, an empty `/tmp`, a
  fresh `/proc` and a minimal `/dev`; nothing else of the host (no home, no data folder, no
  database file, no `/etc/passwd`);
- as root: a uid of its own from a pool (so two sandboxes cannot touch each other's processes),
  no capabilities, `no_new_privs`; as another user: a user namespace (the host sees the bot's
  uid, the process sees only its mounts);
- rlimits: CPU seconds, address space, processes, file size, open files, no core dumps.

Standard library only, and nothing of ours: every layer that runs user code uses it.

    sandbox = Sandbox.for_host()
    if sandbox.confined:
        with sandbox.confine(["python3", "-c", "print(1)"], cwd=scratch, writable=[scratch],
                             limits=SandboxLimits(cpu_seconds=5, memory_bytes=512 << 20)) as argv:
            subprocess.run(argv, env=sandbox_environment(scratch), start_new_session=True)
"""

from __future__ import annotations

import contextlib
import fcntl
import functools
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

UID_POOL_BASE = 990_000
"""As root, each sandbox runs as one uid of UID_POOL_BASE .. + UID_POOL_SIZE - 1 (no account
needs to exist); override with ARTBOT_SANDBOX_UID_BASE."""
UID_POOL_SIZE = 64
SYSTEM_PATHS = ("/usr",)
SYSTEM_LINKS = ("/bin", "/lib", "/lib32", "/lib64", "/sbin", "/libx32")
# Host files a program may need that say nothing about the host's secrets.
ETC_FILES = ("/etc/ld.so.cache", "/etc/localtime", "/etc/mime.types", "/etc/nsswitch.conf")
ETC_FOLDERS = ("/etc/ssl", "/etc/ca-certificates", "/etc/alternatives", "/etc/fonts")
SANDBOX_PATH = "/usr/local/bin:/usr/bin:/bin"
SANDBOX_HOSTNAME = "artbot-sandbox"
PROBE_TIMEOUT_S = 20.0


def uid_pool_base(environ: Mapping[str, str]) -> int:
    """The first uid of the sandboxes' pool: ARTBOT_SANDBOX_UID_BASE, else UID_POOL_BASE;
    ValueError (saying what is wrong) for anything but a whole number that leaves room for the
    pool above the system's accounts and below the largest uid."""
    text = environ.get("ARTBOT_SANDBOX_UID_BASE", str(UID_POOL_BASE)).strip()
    highest = 2**32 - 2 - UID_POOL_SIZE  # 2**32 - 1 is the kernel's "no uid"
    if not text.isdigit() or not 1000 <= int(text) <= highest:
        raise ValueError(
            f"ARTBOT_SANDBOX_UID_BASE must be a whole number from 1000 to {highest:,} "
            f"(the first of {UID_POOL_SIZE} uids kept for sandboxes), not {text[:40]!r}"
        )
    return int(text)


class SandboxUnavailable(RuntimeError):
    """This host cannot run untrusted code confined (the message says why)."""


@dataclass(frozen=True)
class SandboxLimits:
    """What one sandboxed run may use. Processes count threads too (RLIMIT_NPROC)."""

    cpu_seconds: int
    memory_bytes: int
    processes: int = 128
    file_bytes: int = 64 * 1024 * 1024
    open_files: int = 512


@dataclass(frozen=True)
class Sandbox:
    """How this host runs untrusted code: `confined` (bubblewrap) or not, and why not.

    Unconfined, code runs under the rlimits only, and only where the operator allowed it
    (`may_run`): the terminal, where the code is the user's own, or an explicit opt-out.
    Callers that would run code check `may_run` first, and say `refusal` when it is False.
    """

    confined: bool
    reason: str
    """Why not confined (empty when confined); shown at start-up, in /healthz and threads."""
    may_run: bool = True
    bwrap: str | None = None
    as_root: bool = False
    uid_base: int = UID_POOL_BASE

    @classmethod
    def for_host(
        cls, *, allow_unconfined: bool = False, environ: Mapping[str, str] | None = None
    ) -> Sandbox:
        """The sandbox this host can make (probed once per process); where it can make none,
        an unconfined one that says why, and runs code only if `allow_unconfined`."""
        env = os.environ if environ is None else environ
        try:
            uid_base = uid_pool_base(env)
        except ValueError as error:
            # A misconfigured pool runs nothing, not even where unconfined code is allowed.
            return cls(confined=False, reason=str(error), may_run=False)
        try:
            bwrap = _probe(uid_base)
        except SandboxUnavailable as error:
            return cls(
                confined=False, reason=str(error), may_run=allow_unconfined, uid_base=uid_base
            )
        return cls(
            confined=True, reason="", bwrap=bwrap, as_root=os.geteuid() == 0, uid_base=uid_base
        )

    @property
    def refusal(self) -> str:
        """Why code is not run here, for the person whose code it is."""
        return f"this host cannot sandbox untrusted code ({self.reason}), so artbot does not run it"

    def can_read(self, folder: Path) -> bool:
        """Whether sandboxed code, bound to `folder`, can list and read it (as root the sandbox
        runs as another uid, which a folder of mode 0700 keeps out)."""
        if not (self.confined and self.as_root):
            return True
        return folder.stat().st_mode & 0o005 == 0o005

    @property
    def description(self) -> str:
        """One line for start-up logs and /healthz: confined, opted out, or refused."""
        if self.confined:
            who = "a pooled uid of its own" if self.as_root else "a user namespace of the bot's uid"
            return f"untrusted code runs in bubblewrap namespaces ({who}, no network)"
        if self.may_run:
            return f"OFF, users' code runs unsandboxed (operator opt-out): {self.reason}"
        return f"unavailable, so users' code is not run: {self.reason}"

    @contextlib.contextmanager
    def confine(
        self,
        argv: Sequence[str],
        *,
        cwd: Path,
        limits: SandboxLimits,
        read_only: Iterable[Path] = (),
        writable: Iterable[Path] = (),
        read_only_at: Mapping[Path, Path] | None = None,
    ) -> Iterator[list[str]]:
        """The command line that runs `argv` confined, valid while the context is open (it
        holds the sandbox's uid). `read_only` and `writable` paths are seen where they are;
        `read_only_at` maps a place in the sandbox to the host path seen there. Unconfined:
        `argv` under the rlimits only."""
        limited = [*_prlimit(limits), *argv]
        if not self.confined:
            yield limited
            return
        assert self.bwrap is not None
        writable_paths = [Path(p) for p in writable]
        with contextlib.ExitStack() as stack:
            uid = stack.enter_context(_leased_uid(self.uid_base)) if self.as_root else None
            etc = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="artbot-etc-")))
            _write_etc(etc, uid if uid is not None else 65534)
            if uid is not None:
                stack.enter_context(_owned_by(writable_paths, uid))
            yield [
                self.bwrap,
                *_namespaces(as_root=self.as_root),
                *_mounts(etc, [Path(p) for p in read_only], writable_paths, read_only_at or {}),
                "--chdir",
                str(cwd),
                "--",
                *_prlimit(limits),
                *(_drop_to(uid) if uid is not None else ()),
                *argv,
            ]


def sandbox_environment(home: Path, extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """A fresh environment for a sandboxed process: nothing of the bot's, only `extra`."""
    env = {
        "PATH": SANDBOX_PATH,
        "HOME": str(home),
        "TMPDIR": "/tmp",
        "LANG": "C.UTF-8",
        "LC_ALL": "C.UTF-8",
    }
    env.update(extra or {})
    return env


def python_paths(python: str = sys.executable) -> list[Path]:
    """What the interpreter `python` needs read-only: its venv (if it is one) and the base
    install its executable links to."""
    paths = {Path(os.path.realpath(python)).parent.parent}
    environment = Path(python).absolute().parent.parent
    if (environment / "pyvenv.cfg").is_file():
        paths.add(environment)
        home = _venv_home(environment / "pyvenv.cfg")
        if home is not None:
            paths.add(home.parent)
    return sorted(p for p in paths if p.exists())


def _venv_home(config: Path) -> Path | None:
    for line in config.read_text(encoding="utf-8", errors="replace").splitlines():
        name, _, value = line.partition("=")
        if name.strip() == "home" and value.strip():
            return Path(value.strip())
    return None


def _namespaces(*, as_root: bool) -> list[str]:
    common = [
        "--unshare-pid",
        "--unshare-net",
        "--unshare-ipc",
        "--unshare-uts",
        "--unshare-cgroup-try",
        "--hostname",
        SANDBOX_HOSTNAME,
        "--die-with-parent",
        "--new-session",
    ]
    if as_root:
        return common  # privileged bwrap: setpriv inside drops the uid and every capability
    return ["--unshare-user", "--uid", "65534", "--gid", "65534", *common, "--cap-drop", "ALL"]


def _mounts(
    etc: Path, read_only: list[Path], writable: list[Path], read_only_at: Mapping[Path, Path]
) -> list[str]:
    args: list[str] = []
    for path in SYSTEM_PATHS:
        args += ["--ro-bind", path, path]
    for link in SYSTEM_LINKS:
        if os.path.islink(link):
            args += ["--symlink", os.readlink(link), link]
        elif os.path.isdir(link):
            args += ["--ro-bind", link, link]
    for path in ETC_FILES + ETC_FOLDERS:
        args += ["--ro-bind-try", path, path]
    for name in ("passwd", "group", "hosts", "hostname"):
        args += ["--ro-bind", str(etc / name), f"/etc/{name}"]
    args += ["--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp"]
    bound_read_only = _outermost(read_only)
    bound_writable = [Path(os.path.realpath(p)) for p in writable]
    # bwrap makes missing mount points' parents 0700, which the dropped uid cannot enter.
    for folder in _parents_to_make([*bound_read_only, *bound_writable, *read_only_at]):
        args += ["--perms", "0755", "--dir", str(folder)]
    for path in bound_read_only:
        args += ["--ro-bind", str(path), str(path)]
    for place, source in read_only_at.items():
        args += ["--ro-bind", str(source), str(place)]
    for path in bound_writable:  # last: a writable folder inside a read-only one stays writable
        args += ["--bind", str(path), str(path)]
    return args


def _parents_to_make(mounts: list[Path]) -> list[Path]:
    """The folders above `mounts` that the sandbox's root lacks, outermost first."""
    present = [Path(p) for p in ("/usr", "/etc", "/proc", "/dev")]
    needed: set[Path] = set()
    for mount in mounts:
        for parent in mount.parents:
            if parent == Path("/") or parent == Path("/tmp"):
                continue
            if any(parent.is_relative_to(other) for other in [*present, *mounts]):
                continue
            needed.add(parent)
    return sorted(needed, key=lambda p: len(p.parts))


def _outermost(paths: Iterable[Path]) -> list[Path]:
    """Paths that exist, resolved, without those inside another one of them."""
    resolved = sorted({Path(os.path.realpath(p)) for p in paths if os.path.exists(p)})
    kept: list[Path] = []
    for path in resolved:
        if not any(path.is_relative_to(outer) for outer in kept):
            kept.append(path)
    return kept


def _prlimit(limits: SandboxLimits) -> list[str]:
    return [
        "prlimit",
        f"--cpu={limits.cpu_seconds}",
        f"--as={limits.memory_bytes}",
        f"--nproc={limits.processes}",
        f"--fsize={limits.file_bytes}",
        f"--nofile={limits.open_files}",
        "--core=0",
        "--",
    ]


def _drop_to(uid: int) -> list[str]:
    return [
        "setpriv",
        f"--reuid={uid}",
        f"--regid={uid}",
        "--clear-groups",
        "--no-new-privs",
        "--inh-caps=-all",
        "--bounding-set=-all",
        "--",
    ]


def _write_etc(folder: Path, uid: int) -> None:
    (folder / "passwd").write_text(f"sandbox:x:{uid}:{uid}:artbot sandbox:/tmp:/bin/sh\n")
    (folder / "group").write_text(f"sandbox:x:{uid}:\n")
    (folder / "hosts").write_text("127.0.0.1 localhost\n::1 localhost ip6-localhost\n")
    (folder / "hostname").write_text(SANDBOX_HOSTNAME + "\n")
    for file in folder.iterdir():
        file.chmod(0o644)
    folder.chmod(0o755)


@contextlib.contextmanager
def _leased_uid(base: int) -> Iterator[int]:
    """One uid of the pool, held (flock) until the context ends, across processes."""
    folder = Path(tempfile.gettempdir(), "artbot-sandbox-uids")
    folder.mkdir(mode=0o700, exist_ok=True)
    while True:
        for uid in range(base, base + UID_POOL_SIZE):
            handle = (folder / f"{uid}.lock").open("a")
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                handle.close()
                continue
            try:
                _kill_leftovers(uid)
                yield uid
            finally:
                _kill_leftovers(uid)
                fcntl.flock(handle, fcntl.LOCK_UN)
                handle.close()
            return
        # Every uid is in use: wait for one (callers bound their own concurrency).
        with (folder / f"{base}.lock").open("a") as handle:
            fcntl.flock(handle, fcntl.LOCK_EX)
            fcntl.flock(handle, fcntl.LOCK_UN)


def _kill_leftovers(uid: int) -> None:
    """Kill any process still running as `uid` (a sandbox's tree outlives nothing)."""
    with contextlib.suppress(OSError):
        for entry in os.scandir("/proc"):
            if not entry.name.isdigit():
                continue
            with contextlib.suppress(OSError):
                if entry.stat().st_uid == uid:
                    os.kill(int(entry.name), 9)


@contextlib.contextmanager
def _owned_by(folders: list[Path], uid: int) -> Iterator[None]:
    """The writable folders owned by the sandbox's uid while it runs, then given back."""
    owners = {folder: (folder.stat().st_uid, folder.stat().st_gid) for folder in folders}
    for folder in folders:
        _chown_tree(folder, uid, uid)
    try:
        yield
    finally:
        for folder, (owner, group) in owners.items():
            _chown_tree(folder, owner, group)


def _chown_tree(folder: Path, uid: int, gid: int) -> None:
    with contextlib.suppress(OSError):
        os.chown(folder, uid, gid)
    for root, dirs, files in os.walk(folder):
        for name in dirs + files:
            with contextlib.suppress(OSError):
                os.chown(os.path.join(root, name), uid, gid, follow_symlinks=False)


@functools.cache
def _probe(uid_base: int) -> str:
    """bwrap's path, once a confined `true` ran; SandboxUnavailable with the reason if not."""
    if not sys.platform.startswith("linux"):
        raise SandboxUnavailable(f"namespaces need Linux (this is {sys.platform})")
    bwrap = shutil.which("bwrap")
    if bwrap is None:
        raise SandboxUnavailable(
            "bubblewrap is not installed (Debian/Ubuntu: apt install bubblewrap)"
        )
    for tool in ("prlimit", "setpriv"):
        if shutil.which(tool) is None:
            raise SandboxUnavailable(f"{tool} (util-linux) is not installed")
    sandbox = Sandbox(
        confined=True, reason="", bwrap=bwrap, as_root=os.geteuid() == 0, uid_base=uid_base
    )
    with (
        tempfile.TemporaryDirectory(prefix="artbot-sandbox-probe-") as scratch,
        sandbox.confine(
            ["/bin/sh", "-c", "echo probe > probe && cat probe"],
            cwd=Path(scratch),
            limits=SandboxLimits(cpu_seconds=5, memory_bytes=256 * 1024 * 1024),
            writable=[Path(scratch)],
        ) as argv,
    ):
        try:
            done = subprocess.run(
                argv,
                env=sandbox_environment(Path(scratch)),
                capture_output=True,
                text=True,
                timeout=PROBE_TIMEOUT_S,
                stdin=subprocess.DEVNULL,
                check=False,
            )
        except (OSError, subprocess.TimeoutExpired) as error:
            raise SandboxUnavailable(f"bubblewrap could not start: {error}") from error
    if done.returncode != 0 or done.stdout.strip() != "probe":
        detail = (done.stderr.strip().splitlines() or [f"exit {done.returncode}"])[-1]
        raise SandboxUnavailable(
            f"bubblewrap cannot make namespaces here ({detail}); in a container, allow user "
            "namespaces (e.g. a seccomp profile that permits unshare/clone)"
        )
    return bwrap
