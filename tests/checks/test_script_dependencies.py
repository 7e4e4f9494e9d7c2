"""Every rendered script's PEP 723 block resolves against the registry for Python 3.11.

One `uv pip compile` per distinct block (not per variant): 76 variants share three blocks.
Nothing is installed. The registry must be reachable: these tests fail, never skip, without it.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from collections import defaultdict
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from checks.script_format import formatted_script
from checks.script_metadata import ScriptDependencies, script_dependencies
from tests.checks.test_generated_scripts import extra_variants
from tests.flows.matrix import answers_for, matrix, variant_id

PYTHON_VERSION = "3.11"
# The GPU hosts the scripts run on.
PLATFORM = "x86_64-unknown-linux-gnu"
COMPILE_TIMEOUT_S = 600


def dependency_blocks(data_dir: Path) -> dict[ScriptDependencies, list[str]]:
    """Each distinct `# /// script` block of the rendered variants, with the variants using it."""
    variants = {variant_id(cell): answers_for(*cell) for cell in matrix()}
    variants.update(extra_variants(data_dir))
    blocks: dict[ScriptDependencies, list[str]] = defaultdict(list)
    for name, answers in variants.items():
        block = script_dependencies(formatted_script(answers))
        assert block is not None, f"{name}: no `# /// script` block"
        blocks[block].append(name)
    return blocks


def uv_command() -> str:
    found = shutil.which("uv")
    if found is None:
        pytest.fail("uv is not on PATH: it is needed to resolve the scripts' dependencies")
    return found


def compile_block(uv: str, block: ScriptDependencies, folder: Path) -> str:
    """`uv pip compile` of `block`: the pinned resolution, or a failure naming the cause."""
    requirements = folder / f"{block.digest()[:16]}.in"
    requirements.write_text(block.requirements_text())
    environment = dict(os.environ)
    # A slow or flaky registry gets time and retries rather than failing the build.
    environment.setdefault("UV_HTTP_TIMEOUT", "120")
    environment.setdefault("UV_HTTP_RETRIES", "5")
    command = [
        uv,
        "pip",
        "compile",
        "--python-version",
        PYTHON_VERSION,
        "--python-platform",
        PLATFORM,
        "--no-header",
        "--no-annotate",
        "--quiet",
        str(requirements),
    ]
    try:
        done = subprocess.run(
            command,
            capture_output=True,
            text=True,
            env=environment,
            timeout=COMPILE_TIMEOUT_S,
            check=False,
        )
    except subprocess.TimeoutExpired:
        pytest.fail(f"uv pip compile took over {COMPILE_TIMEOUT_S} s: is the registry reachable?")
    if done.returncode != 0:
        pytest.fail(
            f"the block {list(block.dependencies)} does not resolve for Python {PYTHON_VERSION} "
            f"(uv pip compile exit {done.returncode}; when the cause is the network, the "
            f"registry (PyPI or UV_INDEX_URL) is unreachable):\n{done.stderr.strip()}"
        )
    return done.stdout


def pinned_names(resolution: str) -> set[str]:
    """The package names in a `uv pip compile` output, normalized."""
    names = set()
    for line in resolution.splitlines():
        match = re.match(r"^([A-Za-z0-9._-]+)(\[[^\]]*\])?==", line)
        if match:
            names.add(re.sub(r"[-_.]+", "-", match.group(1)).lower())
    return names


@pytest.mark.registry
def test_every_dependency_block_resolves_for_python_3_11(tmp_path: Path) -> None:
    blocks = dependency_blocks(tmp_path)
    # LocalBackend and ServerlessBackend, each with and without HTTP tools (httpx).
    assert len(blocks) == 4, [list(block.dependencies) for block in blocks]
    uv = uv_command()
    with ThreadPoolExecutor(max_workers=len(blocks)) as pool:
        resolutions = dict(
            zip(blocks, pool.map(lambda b: compile_block(uv, b, tmp_path), blocks), strict=True)
        )
    for block, resolution in resolutions.items():
        names = pinned_names(resolution)
        assert "openpipe-art" in names, resolution
        # ART imports wandb in model.log whenever WANDB_API_KEY is set (always, for
        # ServerlessBackend, whose train() also asks for the W&B run).
        assert "wandb" in names, (
            f"{blocks[block][0]} and {len(blocks[block]) - 1} more: the block "
            f"{list(block.dependencies)} does not bring wandb"
        )


def test_an_unreachable_registry_fails_the_test_with_the_cause(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Port 9 on loopback (discard) refuses: no network beyond loopback is touched.
    monkeypatch.setenv("UV_INDEX_URL", "http://127.0.0.1:9/simple")
    monkeypatch.setenv("UV_HTTP_RETRIES", "0")
    monkeypatch.setenv("UV_NO_CACHE", "1")
    block = ScriptDependencies(">=3.11", ("artbot-no-such-package-for-tests==1.0",))
    with pytest.raises(
        pytest.fail.Exception, match=r"(?s)registry .* is unreachable.*127\.0\.0\.1"
    ):
        compile_block(uv_command(), block, tmp_path)
