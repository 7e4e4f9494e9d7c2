"""The stand-in trainer: `art.Backend` implementations that train nothing, on a CPU, at once
(RL through `train`, SFT through `_train_sft`, which `model.train_sft` calls).

They keep LocalBackend's on-disk records (`model.json`, `checkpoints/NNNN/`; `model.log`
adds `history.jsonl` itself), serve the model through the stand-in policy server, check
what a script hands to `train`, and accept exactly the arguments the real backends accept.
"""

from __future__ import annotations

import inspect
import json
import math
import os
import shutil
import time
from collections.abc import AsyncIterator, Iterable
from pathlib import Path
from types import TracebackType
from typing import Any, Self

import art
from art import dev
from art.backend import AnyModel, AnyTrainableModel, Backend
from art.metrics_taxonomy import TRAIN_GRADIENT_STEPS_KEY
from art.trajectories import Trajectory, TrajectoryGroup
from art.types import (
    LocalTrainResult,
    ServerlessTrainResult,
    TrainConfig,
    TrainResult,
    TrainSFTConfig,
)
from art.utils.output_dirs import get_model_dir, get_output_dir_from_model_properties

from checks.dryrun.run_record import TrainedStep
from checks.dryrun.standins.group_checks import check_groups
from checks.dryrun.standins.model_dirs import (
    checkpoint_steps,
    delete_checkpoint_dirs,
    has_validation,
    newest_step,
    write_checkpoint,
)
from checks.dryrun.standins.session import DryrunStepLimit, current_session
from checks.dryrun.standins.sft_checks import ends_with_reply, sft_findings
from checks.dryrun.standins.train_signatures import (
    SERVERLESS_TRAIN_SIGNATURE,
    local_train_signature,
)

INFERENCE_API_KEY = "artbot-dryrun"


class StandinBackend(Backend):
    """What both stand-ins share; subclasses only differ in constructor and result type."""

    backend_name = "Backend"

    def __init__(self, path: str | None) -> None:
        self._session = current_session()
        self._path = self._art_path(path)
        os.makedirs(self._path, exist_ok=True)
        self._closed = False
        self._session.unclosed_backends += 1

    def _art_path(self, path: str | None) -> str:
        root = self._session.art_root
        if path is None:
            return str(root)
        resolved = Path(path).expanduser().resolve()
        # A dry run writes nothing outside its working directory.
        if not resolved.is_relative_to(Path.cwd().resolve()):
            self._session.recorder.finding(
                "path_redirected",
                "note",
                f"{self.backend_name}(path={path!r}) was redirected to {root} so that the dry "
                "run writes nothing outside its working directory.",
            )
            return str(root)
        return str(resolved)

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()

    def supports_automatic_train_step_metrics(self) -> bool:
        """Like LocalBackend: `model.log(split="train")` adds `time/step_wall_s`."""
        return True

    async def close(self) -> None:
        if not self._closed:
            self._closed = True
            self._session.unclosed_backends -= 1

    def _model_dir(self, model: AnyModel) -> str:
        return get_model_dir(model=model, art_path=self._path)

    async def register(self, model: AnyModel) -> None:
        model.base_path = self._path
        output_dir = self._model_dir(model)
        os.makedirs(output_dir, exist_ok=True)
        with open(f"{output_dir}/model.json", "w") as f:
            json.dump(model.model_dump(), f, default=str)
        self._session.policy.serve_model(model.name, newest_step(output_dir))
        self._session.recorder.model_registered(output_dir)

    def _model_inference_name(self, model: AnyModel, step: int | None = None) -> str:
        if step is None:
            step = newest_step(self._model_dir(model)) if model.trainable else 0
        return f"{model.name}@{step}"

    async def _get_step(self, model: AnyTrainableModel) -> int:
        return newest_step(self._model_dir(model))

    async def _delete_checkpoint_files(
        self, model: AnyTrainableModel, steps_to_keep: list[int]
    ) -> None:
        model_dir = self._model_dir(model)
        # ART adds the best step to `steps_to_keep` only when history.jsonl has the metric it
        # ranks by; one step alone means the metric was missing (a script without validation
        # that ranks by train/reward keeps two).
        if len(steps_to_keep) == 1 and not has_validation(model_dir):
            self._session.recorder.finding(
                "delete_without_validation",
                "warning",
                "model.delete_checkpoints() found no value of the metric it ranks checkpoints by "
                "(val/reward unless best_checkpoint_metric= says otherwise) in history.jsonl, "
                "so it could only keep the newest checkpoint.",
            )
        delete_checkpoint_dirs(model_dir, steps_to_keep)

    async def _prepare_backend_for_training(
        self, model: AnyTrainableModel, config: dev.OpenAIServerConfig | None = None
    ) -> tuple[str, str]:
        return self._session.policy.base_url, INFERENCE_API_KEY

    async def _experimental_fork_checkpoint(
        self,
        model: AnyModel,
        from_model: str,
        from_project: str | None = None,
        from_s3_bucket: str | None = None,
        not_after_step: int | None = None,
        verbose: bool = False,
        prefix: str | None = None,
    ) -> None:
        """As the real backends fork: copy `from_model`'s newest checkpoint (the newest not after
        `not_after_step`) into `model`'s folder, or fail with their words when it has none. Both
        stand-ins keep checkpoints in this art path, where LocalBackend forks from; the stand-in
        ServerlessBackend's are there in place of W&B's artifacts."""
        if from_s3_bucket is not None:
            raise NotImplementedError(
                "artbot dryrun: the stand-in backends fork from the art path, not from S3."
            )
        from_project = from_project or model.project
        source_dir = get_output_dir_from_model_properties(from_project, from_model, self._path)
        step = self._fork_step(model, source_dir, from_model, from_project, not_after_step)
        model_dir = self._model_dir(model)
        source = os.path.join(source_dir, "checkpoints", f"{step:04d}")
        destination = os.path.join(model_dir, "checkpoints", f"{step:04d}")
        os.makedirs(os.path.dirname(destination), exist_ok=True)
        if os.path.exists(destination):
            shutil.rmtree(destination)
        shutil.copytree(source, destination)
        self._check_fork_base_model(model, source_dir, from_model)
        self._session.policy.serve_model(model.name, newest_step(model_dir))
        self._session.recorder.finding(
            "forked",
            "note",
            f"{self.backend_name}._experimental_fork_checkpoint copied checkpoint {step} of "
            f"{from_project}/{from_model} into {model.project}/{model.name}.",
        )

    def _fork_step(
        self,
        model: AnyModel,
        source_dir: str,
        from_model: str,
        from_project: str,
        not_after_step: int | None,
    ) -> int:
        """The step to fork, or the real backend's error when there is none."""
        raise NotImplementedError

    def _check_fork_base_model(self, model: AnyModel, source_dir: str, from_model: str) -> None:
        """A LoRA checkpoint fits only the base model it was trained on: ART does not check this
        when it forks, the GPU host fails when it loads the checkpoint."""
        try:
            with open(os.path.join(source_dir, "model.json")) as f:
                source_base = json.load(f).get("base_model")
        except (OSError, ValueError, AttributeError):
            return
        base = getattr(model, "base_model", None)
        if isinstance(source_base, str) and base != source_base:
            self._session.recorder.finding(
                "fork_base_model",
                "problem",
                f"{model.name} (base model {base}) was forked from {from_model}, trained from "
                f"{source_base}: its checkpoint fits only that base model.",
            )

    def _train_signature(self) -> inspect.Signature:
        raise NotImplementedError

    def _validate_arguments(self, arguments: dict[str, Any]) -> None:
        # pydantic checks the learning rate's type, as build_rl_train_configs would.
        TrainConfig(learning_rate=arguments["learning_rate"])

    def _result(self, step: int, metrics: dict[str, float], checkpoint: str) -> TrainResult:
        raise NotImplementedError

    async def train(
        self,
        model: AnyTrainableModel,
        trajectory_groups: Iterable[TrajectoryGroup],
        *args: Any,
        **kwargs: Any,
    ) -> TrainResult:
        """Check the groups, write the next checkpoint dir, return LocalBackend-like metrics."""
        bound = self._train_signature().bind(self, model, trajectory_groups, *args, **kwargs)
        bound.apply_defaults()
        self._validate_arguments(dict(bound.arguments))
        session = self._session
        if session.steps_trained >= session.step_limit:
            raise DryrunStepLimit(
                f"artbot dryrun: the stand-in trainer stops at its limit of "
                f"{session.step_limit} steps."
            )
        started = time.monotonic()
        groups = list(trajectory_groups)
        model_dir = self._model_dir(model)
        step = newest_step(model_dir) + 1
        check = check_groups(groups, step=step)
        for finding in check.findings:
            session.recorder.finding(finding.kind, finding.severity, finding.message)
        if check.trainable_groups == 0:
            # The same words the real LocalBackend prints in this case.
            print(
                "Skipping tuning as there is no suitable data. "
                "This can happen when all the trajectories in the same group "
                "have the same reward and thus no advantage to train on."
            )
        checkpoint = write_checkpoint(model_dir, step)
        session.steps_trained += 1
        session.policy.serve_model(model.name, step)
        session.recorder.step_trained(
            TrainedStep(
                step=step,
                groups=check.groups,
                trajectories=check.trajectories,
                trainable_groups=check.trainable_groups,
            )
        )
        metrics = self._metrics(groups, check.trainable_groups, bound.arguments, started)
        print(
            f"[artbot dryrun] stand-in trainer: step {step}, {check.trainable_groups} of "
            f"{check.groups} groups trainable"
        )
        return self._result(step, metrics, checkpoint)

    def _metrics(
        self,
        groups: list[TrajectoryGroup],
        trainable_groups: int,
        arguments: dict[str, Any],
        started: float,
    ) -> dict[str, float]:
        from art._backend_training import aggregate_rl_training_metrics

        valid = [g for g in groups if isinstance(g, TrajectoryGroup)]
        rewards = [t.reward for g in valid for t in g.trajectories if math.isfinite(t.reward)]
        spread = (max(rewards) - min(rewards)) if rewards else 0.0
        # Numbers of the right kind and magnitude; nothing was learned.
        sample = {
            "loss/train": round(0.05 * spread, 6) if trainable_groups else 0.0,
            "loss/grad_norm": round(0.5 * spread, 6) if trainable_groups else 0.0,
            "loss/learning_rate": float(arguments["learning_rate"]),
            TRAIN_GRADIENT_STEPS_KEY: float(1 if trainable_groups else 0),
        }
        return aggregate_rl_training_metrics(
            training_metrics=[sample], trajectory_groups=valid, trainer_started=started
        )

    async def _train_sft(
        self,
        model: AnyTrainableModel,
        trajectories: Iterable[Trajectory],
        config: TrainSFTConfig,
        dev_config: dev.TrainSFTConfig,
        verbose: bool = False,
    ) -> AsyncIterator[dict[str, float]]:
        """Check the examples and the schedule, yield per-batch metrics as the real backends do,
        then save one checkpoint for the call (LocalBackend's UnslothService does)."""
        session = self._session
        if session.steps_trained >= session.step_limit:
            raise DryrunStepLimit(
                f"artbot dryrun: the stand-in trainer stops at its limit of "
                f"{session.step_limit} steps."
            )
        examples = list(trajectories)
        batch_size = 2 if config.batch_size == "auto" else config.batch_size
        batches = math.ceil(len(examples) / batch_size)
        rates = [
            float(rate)
            for rate in (
                config.learning_rate
                if isinstance(config.learning_rate, list)
                else [config.learning_rate] * batches
            )
        ]
        for finding in sft_findings(examples, rates, batches):
            session.recorder.finding(*finding)
        trainable = sum(1 for example in examples if ends_with_reply(example))
        for batch in range(batches):
            yield {
                "loss/train": round(1.0 / (1 + session.steps_trained + batch), 6),
                "loss/learning_rate": float(rates[batch]) if batch < len(rates) else 0.0,
                "loss/grad_norm": 0.5,
                "data/step_num_trajectories": float(len(examples)),
                TRAIN_GRADIENT_STEPS_KEY: float(batches),
            }
        model_dir = self._model_dir(model)
        step = newest_step(model_dir) + 1
        write_checkpoint(model_dir, step)
        session.steps_trained += 1
        session.policy.serve_model(model.name, step)
        session.recorder.step_trained(
            TrainedStep(
                step=step,
                groups=0,
                trajectories=0,
                trainable_groups=0,
                kind="sft",
                examples=trainable,
            )
        )
        print(
            f"[artbot dryrun] stand-in trainer: SFT step {step}, {trainable} of "
            f"{len(examples)} examples end with an assistant reply, {batches} batches"
        )


class StandinLocalBackend(StandinBackend):
    """Stands in for `art.local.LocalBackend`, with its constructor signature."""

    backend_name = "LocalBackend"
    _signature: inspect.Signature | None = None

    def __init__(
        self,
        *,
        in_process: bool = False,
        path: str | None = None,
        gpu_cost_per_hour_usd: float | None = None,
    ) -> None:
        super().__init__(path)
        self._in_process = in_process
        self._gpu_cost_per_hour_usd = gpu_cost_per_hour_usd

    def _train_signature(self) -> inspect.Signature:
        if StandinLocalBackend._signature is None:
            StandinLocalBackend._signature = local_train_signature()
        return StandinLocalBackend._signature

    def _validate_arguments(self, arguments: dict[str, Any]) -> None:
        # The checks LocalBackend.train makes before it touches a GPU.
        if arguments.get("loss_fn") not in {"cispo", "ppo"}:
            raise ValueError("LocalBackend only supports loss_fn='cispo' or 'ppo'.")
        if arguments.get("loss_fn_config") is not None:
            raise ValueError("LocalBackend requires loss_fn_config=None.")
        if arguments.get("adam_params") is not None:
            raise ValueError("LocalBackend requires adam_params=None.")
        super()._validate_arguments(arguments)

    def _result(self, step: int, metrics: dict[str, float], checkpoint: str) -> TrainResult:
        return LocalTrainResult(step=step, metrics=metrics, checkpoint_path=checkpoint)

    def _fork_step(
        self,
        model: AnyModel,
        source_dir: str,
        from_model: str,
        from_project: str,
        not_after_step: int | None,
    ) -> int:
        # LocalBackend's checks and errors, word for word.
        checkpoint_base_dir = os.path.join(source_dir, "checkpoints")
        if not os.path.exists(checkpoint_base_dir):
            raise FileNotFoundError(
                f"No checkpoints found for model {from_model} in project {from_project}"
            )
        available_steps = checkpoint_steps(source_dir)
        if not available_steps:
            raise FileNotFoundError(f"No checkpoint directories found for model {from_model}")
        if not_after_step is None:
            return available_steps[-1]
        valid_steps = [s for s in available_steps if s <= not_after_step]
        if not valid_steps:
            raise ValueError(
                f"No checkpoints found not after step {not_after_step}. "
                f"Available steps: {available_steps}"
            )
        return valid_steps[-1]


class StandinServerlessBackend(StandinBackend):
    """Stands in for `art.ServerlessBackend`, with its constructor signature."""

    backend_name = "ServerlessBackend"

    def __init__(self, *, api_key: str | None = None, base_url: str | None = None) -> None:
        if api_key is None and os.environ.get("WANDB_API_KEY") is None:
            # The real client's check, word for word.
            raise ValueError(
                "The api_key client option must be set either by passing api_key to the "
                "client or by setting the WANDB_API_KEY environment variable"
            )
        super().__init__(None)
        self._base_url = base_url

    async def register(self, model: AnyModel) -> None:
        if not isinstance(model, art.TrainableModel):
            print("Registering a non-trainable model with the Serverless backend is not supported.")
            return
        # What the W&B service fills in on the real backend.
        model.entity = model.entity or "artbot-dryrun"
        model.id = model.id or f"dryrun-{model.project}-{model.name}"
        model.run_id = model.run_id or f"dryrun-{model.name}"
        await super().register(model)

    async def delete(self, model: AnyModel) -> None:
        """Forget the model's checkpoints."""
        shutil.rmtree(self._model_dir(model), ignore_errors=True)

    def _train_signature(self) -> inspect.Signature:
        return SERVERLESS_TRAIN_SIGNATURE

    async def train(
        self,
        model: AnyTrainableModel,
        trajectory_groups: Iterable[TrajectoryGroup],
        *args: Any,
        **kwargs: Any,
    ) -> TrainResult:
        """Train as the stand-in does, then ask for the W&B run as the real one always does."""
        result = await super().train(model, trajectory_groups, *args, **kwargs)
        model._get_wandb_run()  # ServerlessBackend records provenance on it after each step
        return result

    def _fork_step(
        self,
        model: AnyModel,
        source_dir: str,
        from_model: str,
        from_project: str,
        not_after_step: int | None,
    ) -> int:
        # ServerlessBackend's checks and errors, word for word, in their order: the source's
        # artifacts first, then the destination's W&B entity, which register sets.
        steps = [
            s for s in checkpoint_steps(source_dir) if not_after_step is None or s <= not_after_step
        ]
        if not steps:
            if not_after_step is not None:
                raise ValueError(
                    f"No checkpoints found not after step {not_after_step} for model {from_model}"
                )
            raise ValueError(f"No checkpoints found for model {from_model}")
        assert model.entity is not None, "Model entity is required"
        return steps[-1]

    def _result(self, step: int, metrics: dict[str, float], checkpoint: str) -> TrainResult:
        model_name = Path(checkpoint).parents[1].name
        return ServerlessTrainResult(
            step=step, metrics=metrics, artifact_name=f"{model_name}:step{step}"
        )
