"""The stand-in backends fork a checkpoint as ART 0.5.18's do (`_experimental_fork_checkpoint`):
the same parameters, the newest checkpoint of the source model copied from the art path, and the
real backends' errors, in their words and order, when there is nothing to fork."""

from __future__ import annotations

import asyncio
import inspect
import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import art
import art.serverless.backend
import pytest

from checks.dryrun.run_record import Recorder
from checks.dryrun.standins.policy_server import PolicyServer
from checks.dryrun.standins.session import DryrunSession, install_session
from checks.dryrun.standins.standin_backend import StandinLocalBackend, StandinServerlessBackend
from checks.dryrun.standins.train_signatures import local_backend_signature

BASE = "OpenPipe/Qwen3-14B-Instruct"


@pytest.fixture
def recorder(tmp_path: Path) -> Iterator[Recorder]:
    with PolicyServer(seed=1) as policy:
        recorder = Recorder(tmp_path / "record.json", script="s.py", argv=[])
        install_session(DryrunSession(policy, recorder, step_limit=2, art_root=tmp_path / ".art"))
        yield recorder
        install_session(None)


def sft_model(art_root: Path, steps: list[int], base_model: str = BASE) -> Path:
    """A model folder as ART's SFT leaves it: model.json, and a checkpoint folder per step."""
    model_dir = art_root / "sft" / "models" / "tuned"
    model_dir.mkdir(parents=True)
    (model_dir / "model.json").write_text(json.dumps({"name": "tuned", "base_model": base_model}))
    for step in steps:
        checkpoint = model_dir / "checkpoints" / f"{step:04d}"
        checkpoint.mkdir(parents=True)
        (checkpoint / "adapter_config.json").write_text(json.dumps({"step": step}))
    return model_dir


def run(coroutine: Callable[[], Any]) -> Any:
    return asyncio.run(coroutine())


def parameters(signature: inspect.Signature) -> list[tuple[str, Any]]:
    return [(p.name, p.default) for p in signature.parameters.values()]


def test_the_standins_fork_takes_the_real_backends_parameters() -> None:
    standin = inspect.signature(StandinLocalBackend._experimental_fork_checkpoint)
    assert parameters(standin) == parameters(
        local_backend_signature("_experimental_fork_checkpoint")
    )
    real = art.serverless.backend.ServerlessBackend._experimental_fork_checkpoint
    assert parameters(standin) == parameters(inspect.signature(real))


def test_local_forks_the_newest_checkpoint_of_the_source_in_the_art_path(
    recorder: Recorder, tmp_path: Path
) -> None:
    art_root = tmp_path / ".art"
    sft_model(art_root, [1, 2, 3])

    async def scenario() -> None:
        backend = StandinLocalBackend()
        model = art.TrainableModel(name="rl", project="rl-project", base_model=BASE)
        await backend._experimental_fork_checkpoint(model, from_model="tuned", from_project="sft")
        assert await backend._get_step(model) == 3
        await model.register(backend)
        assert await model.get_step() == 3 and model.get_inference_name() == "rl@3"
        other = art.TrainableModel(name="rl-2", project="rl-project", base_model=BASE)
        await backend._experimental_fork_checkpoint(
            other, from_model="tuned", from_project="sft", not_after_step=2
        )
        assert await backend._get_step(other) == 2

    run(scenario)
    forked = art_root / "rl-project" / "models" / "rl" / "checkpoints"
    assert [p.name for p in forked.iterdir()] == ["0003"]
    assert json.loads((forked / "0003" / "adapter_config.json").read_text()) == {"step": 3}
    assert [f.message for f in recorder.record.findings] == [
        "LocalBackend._experimental_fork_checkpoint copied checkpoint 3 of sft/tuned into "
        "rl-project/rl."
    ]


def test_local_fails_as_local_backend_does_when_there_is_nothing_to_fork(
    recorder: Recorder, tmp_path: Path
) -> None:
    backend = StandinLocalBackend()
    model = art.TrainableModel(name="rl", project="sft", base_model=BASE)

    def fork(**kwargs: Any) -> None:
        run(lambda: backend._experimental_fork_checkpoint(model, from_model="tuned", **kwargs))

    # from_project defaults to the model's own project, as ART's does.
    with pytest.raises(
        FileNotFoundError, match=r"^No checkpoints found for model tuned in project sft$"
    ):
        fork()
    model_dir = sft_model(tmp_path / ".art", [])
    (model_dir / "checkpoints").mkdir()
    with pytest.raises(
        FileNotFoundError, match=r"^No checkpoint directories found for model tuned$"
    ):
        fork()
    (model_dir / "checkpoints" / "0004").mkdir()
    with pytest.raises(ValueError, match=r"not after step 3\. Available steps: \[4\]"):
        fork(not_after_step=3)
    with pytest.raises(NotImplementedError, match="not from S3"):
        fork(from_s3_bucket="bucket")


def test_serverless_fails_as_serverless_backend_does(
    recorder: Recorder, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("WANDB_API_KEY", "not-a-key")
    backend = StandinServerlessBackend()
    model = art.TrainableModel(name="rl", project="rl-project", base_model=BASE)

    def fork() -> None:
        run(lambda: backend._experimental_fork_checkpoint(model, "tuned", from_project="sft"))

    with pytest.raises(ValueError, match=r"^No checkpoints found for model tuned$"):
        fork()
    sft_model(tmp_path / ".art", [2])
    # Before register the model has no W&B entity, which ServerlessBackend's fork needs.
    with pytest.raises(AssertionError, match="Model entity is required"):
        fork()
    run(lambda: model.register(backend))
    fork()
    assert run(model.get_step) == 2


def test_a_fork_onto_another_base_model_is_a_problem(recorder: Recorder, tmp_path: Path) -> None:
    sft_model(tmp_path / ".art", [1], base_model="meta-llama/Llama-3.1-8B-Instruct")
    backend = StandinLocalBackend()
    model = art.TrainableModel(name="rl", project="sft", base_model=BASE)
    run(lambda: backend._experimental_fork_checkpoint(model, from_model="tuned"))
    [problem] = [f for f in recorder.record.findings if f.severity == "problem"]
    assert problem.message == (
        f"rl (base model {BASE}) was forked from tuned, trained from "
        "meta-llama/Llama-3.1-8B-Instruct: its checkpoint fits only that base model."
    )
