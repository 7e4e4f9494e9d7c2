"""The dry run's parts on their own: caps, checks, the stand-in trainer, the verdict, the CLI."""

from __future__ import annotations

import argparse
import ast
import asyncio
import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import openai
import pytest

from checks.dryrun.child.arg_caps import apply_caps, dryrun_caps
from checks.dryrun.child.network_guard import is_loopback
from checks.dryrun.command import add_dryrun_arguments, report_json, run_dryrun_command
from checks.dryrun.launch import dryrun_environment
from checks.dryrun.output_tail import readable_lines
from checks.dryrun.report import DryrunReport, build_report
from checks.dryrun.run_record import Finding, Recorder, RunRecord, TrainedStep
from checks.dryrun.standins.policy_server import PolicyServer
from checks.script_format import formatted_script
from tests.flows.matrix import answers_for

SCRIPT = Path("rl_train.py")


# --- caps -------------------------------------------------------------------------------


def test_caps_shorten_the_generated_scripts_flags_and_say_so() -> None:
    namespace = argparse.Namespace(
        num_steps=50,
        num_epochs=3,
        groups_per_step=8,
        rollouts_per_group=6,
        dataset_size=None,
        val_every=10,
        val_max_groups=None,
        max_turns=150,
        max_concurrent=32,
        learning_rate=1e-5,
    )

    changes = apply_caps(namespace, dryrun_caps(max_steps=3))

    assert vars(namespace) == {
        "num_steps": 3,
        "num_epochs": 1,
        "groups_per_step": 2,
        "rollouts_per_group": 4,
        "dataset_size": 8,  # 3 steps x 2 groups + 2 validation groups
        "val_every": 3,  # so that validation runs within the dry run
        "val_max_groups": 2,
        "max_turns": 20,  # a 150-move game still ends, and reaches its reward
        "max_concurrent": 32,
        "learning_rate": 1e-5,
    }
    assert changes[0] == "--num-steps 50 -> 3"
    assert "--dataset-size None -> 8" in changes
    assert changes[-1] == "--max-turns 150 -> 20"


def test_caps_leave_small_values_never_validate_and_other_scripts_alone() -> None:
    small = argparse.Namespace(
        num_steps=2, groups_per_step=1, dataset_size=4, val_every=0, max_turns=9
    )
    assert apply_caps(small, dryrun_caps(max_steps=3)) == []
    assert vars(small) == {
        "num_steps": 2,
        "groups_per_step": 1,
        "dataset_size": 4,
        "val_every": 0,
        "max_turns": 9,
    }

    unrelated = argparse.Namespace(steps=100, epochs=9)
    assert apply_caps(unrelated, dryrun_caps(max_steps=3)) == []


def test_the_dataset_cap_follows_the_scripts_own_group_count() -> None:
    namespace = argparse.Namespace(groups_per_step=1, val_max_groups=1, dataset_size=1000)
    apply_caps(namespace, dryrun_caps(max_steps=3))
    assert namespace.dataset_size == 4


# --- the verdict ------------------------------------------------------------------------


def record(**fields: object) -> RunRecord:
    defaults: dict[str, object] = {
        "script": str(SCRIPT),
        "gathers": 2,
        "rollouts": 8,
        "reward_min": 0.0,
        "reward_max": 1.0,
        "steps": [TrainedStep(step=1, groups=2, trajectories=8, trainable_groups=1)],
        "finished": True,
        "exit_code": 0,
    }
    return RunRecord.model_validate({**defaults, **fields})


def verdict(run: RunRecord | None, exit_code: int | None = 0) -> DryrunReport:
    return build_report(
        SCRIPT, run, exit_code=exit_code, timeout_s=30, output_tail="", duration_s=1.0
    )


def test_a_clean_record_is_ok() -> None:
    report = verdict(record())
    assert report.ok
    assert report.problems == ()
    assert report.format().splitlines()[0] == "rl_train.py: dry run ok"


def test_each_failure_has_its_plain_words() -> None:
    assert verdict(record(finished=False), exit_code=None).problems == (
        "it timed out after 30 s and was killed: after 1 trained step",
    )
    assert (
        verdict(record(), exit_code=None)
        .problems[0]
        .startswith("it timed out after 30 s and was killed: the script had finished")
    )
    assert verdict(record(uncaught_error="KeyError: 'x'"), exit_code=1).problems == (
        "the script raised KeyError: 'x' (exit code 1)",
    )
    assert verdict(record(), exit_code=3).problems == ("the script exited with code 3",)
    assert (
        verdict(None, exit_code=1)
        .problems[0]
        .startswith("the dry run failed before the script ran")
    )
    assert verdict(record(steps=[])).problems == (
        "it trained zero steps: backend.train(...) never completed",
    )
    untrainable = [TrainedStep(step=1, groups=2, trajectories=8, trainable_groups=0)]
    assert (
        verdict(record(steps=untrainable))
        .problems[0]
        .startswith("it succeeds with nothing trainable")
    )
    metric = Finding(kind="metric_type", severity="problem", message="metric 'x' is str", count=2)
    assert verdict(record(findings=[metric])).problems == ("metric 'x' is str [2 times]",)


def test_swallowed_exceptions_beside_good_rollouts_are_a_warning() -> None:
    report = verdict(record(rollout_exceptions=2, first_error="Traceback ...\nValueError: bad\n"))

    assert report.ok
    assert report.warnings[0].startswith("2 of 10 rollouts raised and were swallowed")
    assert "first error:" in report.format()
    assert "ValueError: bad" in report.format()


def test_the_report_serializes_to_json() -> None:
    data = json.loads(report_json(verdict(record())))
    assert (data["ok"], data["verdict"]) == (True, "ok")
    assert data["script"] == "rl_train.py"
    assert data["steps_trained"] == 1


# --- group checks -------------------------------------------------------------------------


def test_non_numeric_metrics_bad_metadata_and_nan_rewards_are_problems() -> None:
    import art

    from checks.dryrun.standins.group_checks import check_groups

    def trajectory(reward: float) -> art.Trajectory:
        return art.Trajectory(
            messages_and_choices=[
                {"role": "user", "content": "hi"},
                {"role": "assistant", "content": "hello"},
            ],
            reward=reward,
        )

    bad = trajectory(float("nan"))
    bad.metrics["label"] = "good"  # type: ignore[assignment]  # mutation skips pydantic
    bad.metadata["tags"] = ["a"]  # type: ignore[assignment]
    check = check_groups([art.TrajectoryGroup([bad, trajectory(1.0)])], step=4)

    kinds = [finding.kind for finding in check.findings]
    assert kinds == ["no_choice", "metric_type", "metadata_type", "reward_not_finite", "no_choice"]
    assert check.findings[1].message.startswith(
        "metric 'label' is str 'good' (step 4, group 1, trajectory 1)"
    )
    assert (check.groups, check.trajectories) == (1, 2)


# --- the stand-in trainer, in this process -------------------------------------------------


@pytest.fixture
def session(tmp_path: Path) -> Iterator[PolicyServer]:
    from checks.dryrun.standins.session import DryrunSession, install_session

    with PolicyServer(seed=1) as policy:
        recorder = Recorder(tmp_path / "record.json", script="s.py", argv=[])
        install_session(DryrunSession(policy, recorder, step_limit=2, art_root=tmp_path / ".art"))
        yield policy
        install_session(None)


def test_the_standin_local_backend_keeps_local_backends_records(
    session: PolicyServer, tmp_path: Path
) -> None:
    import art

    from checks.dryrun.standins.session import DryrunStepLimit
    from checks.dryrun.standins.standin_backend import StandinLocalBackend

    async def scenario() -> None:
        backend = StandinLocalBackend(path=None, in_process=True)
        model = art.TrainableModel(name="m", project="p", base_model="Qwen/Qwen3-14B")
        await model.register(backend)
        model_dir = tmp_path / ".art" / "p" / "models" / "m"
        assert model.base_path == str(tmp_path / ".art")
        assert json.loads((model_dir / "model.json").read_text())["base_model"] == "Qwen/Qwen3-14B"
        assert (model.inference_base_url, model.get_inference_name()) == (session.base_url, "m@0")
        assert await model.get_step() == 0

        client = model.openai_client()
        messages: art.Messages = [{"role": "user", "content": "Say red or blue."}]

        async def rollout(reward: float) -> art.Trajectory:
            response = await client.chat.completions.create(
                model=model.get_inference_name(), messages=messages
            )
            return art.Trajectory(
                messages_and_choices=[*messages, response.choices[0]], reward=reward
            )

        groups = [art.TrajectoryGroup([await rollout(0.0), await rollout(1.0)])]

        with pytest.raises(TypeError, match="learning_rat"):
            await backend.train(model, groups, learning_rat=1e-5)
        with pytest.raises(ValueError, match="loss_fn"):
            await backend.train(model, groups, learning_rate=1e-5, loss_fn="grpo")

        result = await backend.train(model, groups, learning_rate=1e-5)
        assert isinstance(result, art.LocalTrainResult)
        assert result.step == 1
        assert result.checkpoint_path == str(model_dir / "checkpoints" / "0001")
        assert result.metrics["loss/learning_rate"] == 1e-5
        assert result.metrics["data/step_num_groups_trainable"] == 1
        assert await model.get_step() == 1
        assert model.get_inference_name() == "m@1"

        await backend.train(model, groups, learning_rate=1e-5)
        await backend._delete_checkpoint_files(model, [2])
        assert sorted(p.name for p in (model_dir / "checkpoints").iterdir()) == ["0002"]
        # The hard cap (2 here): a clean stop that no `except Exception` swallows.
        with pytest.raises(DryrunStepLimit):
            await backend.train(model, groups, learning_rate=1e-5)
        await backend.close()

    asyncio.run(scenario())


def test_the_standin_policy_refuses_the_bare_model_name(session: PolicyServer) -> None:
    client = openai.OpenAI(base_url=session.base_url, api_key="x", max_retries=0)
    session.serve_model("m", 0)
    with pytest.raises(openai.NotFoundError):
        client.chat.completions.create(model="m", messages=[{"role": "user", "content": "hi"}])


# --- environment, network, output ---------------------------------------------------------


def test_the_child_environment_never_carries_real_secrets(tmp_path: Path) -> None:
    env = dryrun_environment(
        {
            "OPENAI_API_KEY": "sk-real",
            "WANDB_API_KEY": "real-wandb",
            "ANTHROPIC_API_KEY": "real-anthropic",
            "HF_TOKEN": "hf_real",
            "OPENAI_BASE_URL": "https://api.openai.com/v1",
            "ARTBOT_DATABASE_URL": "postgresql://artbot:real-db-password@db/artbot",
            "SLACK_SIGNING_SECRET": "real-signing-secret",
            "PATH": "/opt/bot-only/bin:/usr/bin",
        },
        record_path=tmp_path / "record.json",
        max_steps=3,
    )

    assert "real" not in " ".join(env.values())
    assert env["OPENAI_API_KEY"].startswith("sk-")
    assert len(env["WANDB_API_KEY"]) == 40
    # Named like secrets: there (scripts check that keys are set), as placeholders.
    assert env["HF_TOKEN"] == env["SLACK_SIGNING_SECRET"] == "artbot-dryrun-placeholder"
    # Any judge's key passes the script's check: the judge is stood in.
    assert env["ANTHROPIC_API_KEY"] and env["GEMINI_API_KEY"]
    # Nothing else of the parent's environment comes through, not even its PATH.
    assert "OPENAI_BASE_URL" not in env and "ARTBOT_DATABASE_URL" not in env
    assert "bot-only" not in env["PATH"]
    assert env["LITELLM_LOCAL_MODEL_COST_MAP"] == "True"


def test_every_judge_key_a_script_asks_for_is_given_a_placeholder(tmp_path: Path) -> None:
    answers = answers_for("single", "ruler", "dataset", "local", False, ruler_rubric="")
    script = ast.parse(formatted_script(answers))
    [table] = [
        node.value
        for node in script.body
        if isinstance(node, ast.Assign)
        and any(isinstance(t, ast.Name) and t.id == "JUDGE_KEY_ENV" for t in node.targets)
    ]
    asked = set(ast.literal_eval(table).values())

    env = dryrun_environment({}, record_path=tmp_path / "record.json", max_steps=3)

    # The script stops at start-up without its judge's key, whichever provider: the dry run
    # stands the judge in, so each is there, a placeholder.
    assert "ANTHROPIC_API_KEY" in asked
    assert {name: bool(env.get(name)) for name in asked} == dict.fromkeys(asked, True)


def test_loopback_is_the_only_reachable_place() -> None:
    assert all(is_loopback(h) for h in ("127.0.0.1", "localhost", "::1", None, "127.8.0.1"))
    assert not any(is_loopback(h) for h in ("api.openai.com", "10.0.0.1", "8.8.8.8"))


def test_the_network_guard_blocks_a_connection_with_a_clear_error() -> None:
    code = (
        "import socket\n"
        "from checks.dryrun.child.network_guard import install_network_guard\n"
        "install_network_guard(lambda target: print('blocked', target))\n"
        "try:\n"
        "    socket.create_connection(('api.openai.com', 443), timeout=2)\n"
        "except OSError as error:\n"
        "    print(type(error).__name__, error)\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True
    )

    assert result.stdout.splitlines() == [
        "blocked api.openai.com:443",
        "NetworkBlockedError artbot dryrun blocks network access to api.openai.com:443: a dry "
        "run makes no external call (the policy and the RULER judge are served on 127.0.0.1)",
    ]


def test_the_output_tail_shows_each_progress_bar_once() -> None:
    text = (
        "step 1\n"
        "train:   0%|          | 0/8 [00:00<?, ?it/s]\x1b[A\r"
        "train:  50%|#####     | 4/8\rtrain: 100%|##########| 8/8\n"
        "\n"
        "train: 100%|##########| 8/8 done\n"
        "done\n"
    )
    assert readable_lines(text) == ["step 1", "train: 100%|##########| 8/8 done", "done"]


# --- the command --------------------------------------------------------------------------


def test_the_command_parses_its_options_before_the_script_and_passes_the_rest() -> None:
    parser = argparse.ArgumentParser()
    add_dryrun_arguments(parser)

    args = parser.parse_args(["--max-steps", "2", "rl_train.py", "--num-steps", "9", "--json"])

    assert args.dryrun_max_steps == 2
    assert args.dryrun_script == Path("rl_train.py")
    assert args.dryrun_args == ["--num-steps", "9", "--json"]
    assert args.dryrun_timeout == 300.0
    assert args.dryrun_json is False


def test_the_command_exits_2_for_a_missing_script(capsys: pytest.CaptureFixture[str]) -> None:
    parser = argparse.ArgumentParser()
    add_dryrun_arguments(parser)

    assert run_dryrun_command(parser.parse_args(["no_such_script.py"])) == 2
    assert "no such script: no_such_script.py" in capsys.readouterr().err
