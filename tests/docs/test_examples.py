"""Every command and code example of the README and the documentation, run as a reader would.

One test per page: its blocks run in order, in one working folder with a fresh data folder, and
what a console block exports is set for the page's next blocks, as in one terminal. Console
commands run through bash with `uv run` in this checkout's environment (never synced by them);
the output a block shows must appear, in order, in what the command printed. Slack is the tests'
loopback fake (SLACK_API_URL), and a Python block marked `runner` gets a real runner on loopback
(tests/runner's). What a block cannot run says why (`<!-- docs-test: skip: ... -->`), which
tests/docs/test_docs.py requires.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.docs.blocks import ROOT, Block, blocks_of, documentation_files, shown_in_order
from tests.fakes.slack_api import FakeSlack
from tests.runner.conftest import TOKEN, RunnerFactory, job_environ
from tests.runner.conftest import make_runner as make_runner

PLACEHOLDER_BOT_TOKEN = "xoxb-..."
"""The bot token the pages show, which the fake Slack honours."""
BLOCK_TIMEOUT_S = 300
SERVER_READY_S = 120
SERVER_STOPS_S = 30
WAS_RUN = 90
"""The exit status of a block's script when one of its commands exited otherwise than shown."""
PRIVATE = ("SLACK_", "ARTBOT_", "OPENAI_", "WANDB_", "HF_TOKEN", "PORT", "VIRTUAL_ENV")


@dataclass
class Page:
    """Where a page's blocks run: its working folder, the shell state its blocks share, and what
    each command printed."""

    folder: Path
    environment: dict[str, str]
    make_runner: RunnerFactory

    @property
    def work(self) -> Path:
        return self.folder / "work"

    @property
    def state(self) -> Path:
        """What the page's console blocks exported so far (`export -p`), sourced by the next."""
        return self.folder / "exported.sh"


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def pages_with_examples() -> list[Path]:
    return [
        path for path in documentation_files() if any(block.runnable for block in blocks_of(path))
    ]


@pytest.fixture
def fake_slack() -> Iterator[FakeSlack]:
    fake = FakeSlack(bot_token=PLACEHOLDER_BOT_TOKEN).start()
    yield fake
    fake.stop()


@pytest.mark.parametrize(
    "path", pages_with_examples(), ids=lambda path: str(path.relative_to(ROOT))
)
def test_the_examples_of_a_page_run_as_shown(
    path: Path, tmp_path: Path, fake_slack: FakeSlack, make_runner: RunnerFactory
) -> None:
    page = Page(tmp_path, reader_environment(tmp_path, fake_slack), make_runner)
    like_a_checkout(page.work)
    page.state.write_text("")
    for block in blocks_of(path):
        if block.title is not None:
            file = page.work / block.title
            assert not file.is_symlink(), (
                f"{block.where}: {block.title} is a folder of the checkout"
            )
            file.write_text(block.text, encoding="utf-8")
        elif not block.runnable or block.skip_reason is not None:
            continue
        elif block.language == "python":
            run_python(block, page)
        elif block.marker is not None and block.marker.startswith("server"):
            run_server(block, page)
        else:
            run_shell(block, page)


def like_a_checkout(work: Path) -> None:
    """A working folder where the pages' relative paths (`benchmarks/...`, `manifests/...`) lead
    where they lead in a checkout: a link to each of its folders. What a page writes stays here."""
    work.mkdir()
    for entry in ROOT.iterdir():
        if entry.is_dir() and entry.name != ".git":
            (work / entry.name).symlink_to(entry, target_is_directory=True)


def reader_environment(folder: Path, fake: FakeSlack) -> dict[str, str]:
    """The environment a reader's shell would have: none of this machine's artbot settings or
    secrets, a data folder of the page's own, Slack's Web API at the fake."""
    env = {name: value for name, value in os.environ.items() if not name.startswith(PRIVATE)}
    return env | {
        "XDG_DATA_HOME": str(folder / "data"),
        "UV_PROJECT": str(ROOT),
        "UV_NO_SYNC": "1",  # `uv run` uses the environment as it is: never syncs it mid-test
        "NO_COLOR": "1",
        "SLACK_API_URL": fake.base_url,
    }


# ---- shell blocks -------------------------------------------------------------------------------


def shell_script(block: Block, page: Page, port: int, expected_exit: int) -> str:
    """A bash script running the block's commands one by one: each one's input from a file, its
    output to a file, its exit status recorded; the exports saved after each for the page's
    next blocks (a server's: before it starts)."""
    lines = [f"source {page.state}", f"cd {page.work}", f"export PORT={port}"]
    lines.append(f"export ARTBOT_RUNNER_PORT={port}")
    commands = block.commands() if block.language == "console" else None
    if commands is None:
        (page.folder / "script.sh").write_text(block.text, encoding="utf-8")
        return "\n".join([*lines, f"bash -e {page.folder / 'script.sh'}"])
    last = len(commands) - 1
    for index, command in enumerate(commands):
        typed = page.folder / f"typed-{index}"
        typed.write_text("".join(f"{line}\n" for line in command.typed), encoding="utf-8")
        printed = page.folder / f"printed-{index}"
        wanted = expected_exit if index == last else 0
        if index == last:
            lines.append(f"export -p > {page.state}")
        lines += [
            "{ " + command.text,
            f"}} < {typed} > {printed} 2>&1",
            f"status=$?; echo $status > {page.folder / f'status-{index}'}",
        ]
        if index != last:
            lines.append(f"export -p > {page.state}")
        lines.append(f"[ $status -eq {wanted} ] || exit {WAS_RUN}")
    return "\n".join(lines) + "\n"


def run_shell(block: Block, page: Page) -> None:
    expected_exit = 0
    if block.marker is not None and block.marker.startswith("exit"):
        expected_exit = int(block.marker.split()[1])
    script = shell_script(block, page, free_port(), expected_exit)
    result = subprocess.run(
        ["bash", "-c", script],
        env=page.environment,
        capture_output=True,
        text=True,
        timeout=BLOCK_TIMEOUT_S,
        check=False,
    )
    assert result.returncode == 0, f"{block.where}: {what_happened(block, page)}{result.stderr}"
    check_shown(block, page)


def run_server(block: Block, page: Page) -> None:
    """The block's last command is a server: started on a free port, asked for the marker's path
    until it answers 200, then stopped with SIGTERM, as Ctrl-C or systemd would."""
    path = block.marker.split()[1] if block.marker else "/"
    port = free_port()
    server = subprocess.Popen(
        ["bash", "-c", shell_script(block, page, port, 0)],
        env=page.environment,
        start_new_session=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + SERVER_READY_S
        while not answers(f"http://127.0.0.1:{port}{path}"):
            assert server.poll() is None, f"{block.where}: exited. {what_happened(block, page)}"
            assert time.monotonic() < deadline, f"{block.where}: {path} never answered 200"
            time.sleep(0.2)
    finally:
        stop(server, block)
    check_shown(block, page)


def answers(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=5) as response:
            return response.status == 200
    except (urllib.error.URLError, OSError):
        return False


def stop(server: subprocess.Popen[bytes], block: Block) -> None:
    if server.poll() is not None:
        return
    os.killpg(server.pid, signal.SIGTERM)
    try:
        server.wait(timeout=SERVER_STOPS_S)
    except subprocess.TimeoutExpired:
        os.killpg(server.pid, signal.SIGKILL)
        server.wait(timeout=SERVER_STOPS_S)
        raise AssertionError(f"{block.where}: the server did not stop on SIGTERM") from None


def check_shown(block: Block, page: Page) -> None:
    if block.language != "console":
        return
    for index, command in enumerate(block.commands()):
        printed = (page.folder / f"printed-{index}").read_text(encoding="utf-8", errors="replace")
        missing = shown_in_order(command.shown, printed)
        assert missing is None, (
            f"{block.where}: `{command.text}` did not print {missing!r}; it printed:\n{printed}"
        )


def what_happened(block: Block, page: Page) -> str:
    """Each command's exit status and the end of its output, as far as the block got."""
    told = []
    for index, command in enumerate(block.commands() if block.language == "console" else []):
        status = page.folder / f"status-{index}"
        printed = page.folder / f"printed-{index}"
        if not printed.exists():
            break
        said = status.read_text().strip() if status.exists() else "still running"
        tail = printed.read_text(encoding="utf-8", errors="replace")[-3000:]
        told.append(f"$ {command.text}  -> {said}\n{tail}")
    return "\n".join(told) + "\n"


# ---- python blocks ------------------------------------------------------------------------------


def run_python(block: Block, page: Page) -> None:
    env = dict(page.environment)
    if block.marker == "runner":  # a runner of its own each: one runner per database
        root = page.folder / f"runner-{block.line}"
        root.mkdir()
        environ = job_environ(OPENAI_API_KEY="sk-docs-placeholder-key")
        runner = page.make_runner(root=root, environ=environ)
        env |= {"ARTBOT_RUNNER_URL": runner.base_url, "ARTBOT_RUNNER_TOKEN": TOKEN}
    script = page.folder / f"block-{block.line}.py"
    script.write_text(block.text, encoding="utf-8")
    result = subprocess.run(
        [sys.executable, str(script)],
        cwd=page.work,
        env=env,
        capture_output=True,
        text=True,
        timeout=BLOCK_TIMEOUT_S,
        check=False,
    )
    assert result.returncode == 0, f"{block.where}:\n{result.stdout}{result.stderr}"
