"""Jobs cannot read the runner's environment: as an unprivileged job user (when the runner may
switch users), and as the runner's own user once the runner is non-dumpable."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from runner.schemas import EventType
from runner.settings import SettingsError, load_settings
from tests.runner.conftest import TOKEN, RunnerFactory

REPO_ROOT = Path(__file__).resolve().parents[2]
SYSTEM_PYTHON = shutil.which("python3", path="/usr/bin:/bin")
NOBODY = 65534
as_root = pytest.mark.skipif(os.geteuid() != 0, reason="switching users needs root")

# Run as an ordinary user: makes itself non-dumpable (or not), then asks a child of the same user
# to read its environment from /proc.
PROBE = """
import subprocess, sys
sys.path.insert(0, {repo!r})
from isolation.inspection import forbid_inspection, inspectable
if sys.argv[1] == "hardened":
    assert forbid_inspection() and not inspectable()
reader = "import os\\ntry:\\n open('/proc/%d/environ','rb').read(); print('readable')\\n" \\
    "except OSError as e:\\n print('denied', e.errno)"
subprocess.run([sys.executable, "-c", reader % __import__("os").getpid()], check=True)
"""


@pytest.fixture
def shared_dir() -> Iterator[Path]:
    """A folder another user can reach (pytest's tmp_path is root's alone)."""
    path = Path(tempfile.mkdtemp(prefix="artbot-isolation-"))
    path.chmod(0o755)
    yield path
    shutil.rmtree(path, ignore_errors=True)


@pytest.mark.skipif(SYSTEM_PYTHON is None, reason="no python3 in /usr/bin")
@pytest.mark.parametrize(("mode", "expected"), [("plain", "readable"), ("hardened", "denied 13")])
def test_a_non_dumpable_runner_hides_its_environment_from_its_own_user(
    mode: str, expected: str
) -> None:
    assert SYSTEM_PYTHON is not None
    # As root, /proc is open whatever the flag: the probe runs as an ordinary user.
    user = {"user": NOBODY, "group": NOBODY, "extra_groups": []} if os.geteuid() == 0 else {}
    done = subprocess.run(
        [SYSTEM_PYTHON, "-I", "-c", PROBE.format(repo=str(REPO_ROOT)), mode],
        env={"PATH": "/usr/bin:/bin", "RUNNER_SECRET": "must-stay-inside"},
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
        **user,  # pyright: ignore[reportArgumentType]
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == expected


@as_root
@pytest.mark.skipif(SYSTEM_PYTHON is None, reason="no python3 in /usr/bin")
def test_jobs_run_as_the_configured_user_and_cannot_read_the_runner(
    make_runner: RunnerFactory, shared_dir: Path
) -> None:
    runner = make_runner(
        root=shared_dir,
        job_user="nobody",
        command=f"{SYSTEM_PYTHON} {{script}}",
    )
    job_id = runner.submit("who_am_i.py")
    assert runner.follow(job_id)[-1].type is EventType.succeeded
    who = json.loads((runner.run_dir(job_id) / "who.json").read_text())
    assert who["uid"] == NOBODY
    assert who["home"] != os.environ.get("HOME")
    assert who["runner"].startswith("denied")
    # The runner's records for the job stay the runner's.
    assert (runner.settings.resolved_workdir / job_id / ".runner" / "exit.json").stat().st_uid == 0


def test_a_job_user_that_does_not_exist_or_is_root_stops_startup() -> None:
    for name, words in [("no-such-user-here", "no user"), ("root", "unprivileged")]:
        with pytest.raises(SettingsError) as error:
            load_settings({"ARTBOT_RUNNER_TOKEN": TOKEN, "ARTBOT_RUNNER_JOB_USER": name})
        assert "ARTBOT_RUNNER_JOB_USER:" in str(error.value) and words in str(error.value)
