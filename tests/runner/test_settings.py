"""Runner settings: defaults, and startup stopped with every problem listed."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from runner.api.server import build_service
from runner.jobs.gpu import default_slots, parse_gpus, parse_slots
from runner.settings import SettingsError, load_settings

TOKEN = "a-token-of-enough-length"


def test_defaults() -> None:
    settings = load_settings({"ARTBOT_RUNNER_TOKEN": TOKEN, "XDG_DATA_HOME": "/ignored-here"})
    assert settings.command == "uv run --script {script}"
    assert settings.cancel_grace_s == 30
    assert settings.slots is None  # ask nvidia-smi
    assert settings.resolved_database_url.endswith("/artbot/runner.db")
    assert settings.secret_names == []
    assert settings.host == "127.0.0.1"
    assert TOKEN not in repr(settings) and TOKEN not in str(settings.model_dump())


def test_every_problem_is_listed() -> None:
    with pytest.raises(SettingsError) as error:
        load_settings(
            {
                "ARTBOT_RUNNER_GPU_SLOTS": "0,x",
                "ARTBOT_RUNNER_COMMAND": "uv run {scrpt}",
                "ARTBOT_RUNNER_JOB_SECRETS": "OPENAI_API_KEY, wandb-key",
                "ARTBOT_RUNNER_CANCEL_GRACE_S": "-1",
                "ARTBOT_RUNNER_LOG_MAX_BYTES": "10",
            }
        )
    message = str(error.value)
    assert message.startswith("Cannot start the runner:")
    for expected in [
        "ARTBOT_RUNNER_TOKEN: missing (the bearer token",
        "ARTBOT_RUNNER_GPU_SLOTS: 'x' is not a GPU index",
        "ARTBOT_RUNNER_COMMAND: unknown placeholder {scrpt}",
        "ARTBOT_RUNNER_JOB_SECRETS: not environment variable names: wandb-key",
        "ARTBOT_RUNNER_CANCEL_GRACE_S:",
        "ARTBOT_RUNNER_LOG_MAX_BYTES:",
    ]:
        assert expected in message


def test_a_short_token_is_refused_without_being_repeated() -> None:
    with pytest.raises(SettingsError) as error:
        load_settings({"ARTBOT_RUNNER_TOKEN": "short-secret"})
    assert "at least 16 characters" in str(error.value)
    assert "short-secret" not in str(error.value)


def test_the_command_needs_the_script() -> None:
    with pytest.raises(SettingsError, match="must contain"):
        load_settings({"ARTBOT_RUNNER_TOKEN": TOKEN, "ARTBOT_RUNNER_COMMAND": "python train.py"})


def test_the_command_is_split_into_arguments_without_a_shell(tmp_path: Path) -> None:
    settings = load_settings(
        {
            "ARTBOT_RUNNER_TOKEN": TOKEN,
            "ARTBOT_RUNNER_COMMAND": "{python} -u '{script}' --flag 'a b; rm -rf /'",
        }
    )
    script = tmp_path / "my script.py"
    assert settings.command_argv(script, tmp_path) == [
        sys.executable,
        "-u",
        str(script),
        "--flag",
        "a b; rm -rf /",
    ]


@pytest.mark.parametrize(("value", "expected"), [("none", None), ("", None), ("3600", 3600.0)])
def test_max_runtime(value: str, expected: float | None) -> None:
    assert (
        load_settings(
            {"ARTBOT_RUNNER_TOKEN": TOKEN, "ARTBOT_RUNNER_MAX_RUNTIME_S": value}
        ).max_runtime_s
        == expected
    )


@pytest.mark.parametrize(
    ("text", "slots"),
    [
        ("0,1", [(0,), (1,)]),
        (" 2 , 3 ", [(2,), (3,)]),
        ("0+1,2+3", [(0, 1), (2, 3)]),
        ("none", []),
        ("", []),
    ],
)
def test_slots(text: str, slots: list[tuple[int, ...]]) -> None:
    assert parse_slots(text) == slots


@pytest.mark.parametrize(
    ("variable", "value", "words"),
    [
        ("MAX_RUNTIME_S", "inf", "finite number"),
        ("MAX_RUNTIME_S", "nan", "finite number"),
        ("MAX_RUNTIME_S", "0", 'say "none" for no limit'),
        ("MAX_RUNTIME_S", "-5", "greater than or equal to 1"),
        ("MAX_RUNTIME_S", "1e12", "less than or equal to 31622400"),
        ("MAX_RUNTIME_S", "soon", "valid number"),
        ("CANCEL_GRACE_S", "inf", "finite number"),
        ("POLL_INTERVAL_S", "1e-9", "greater than or equal to 0.01"),
        ("LOG_MAX_BYTES", str(2**50), "less than or equal to"),
        ("JOB_SECRETS", "OPENAI_API_KEY,ARTBOT_RUNNER_TOKEN", "never go to jobs"),
    ],
)
def test_values_out_of_their_real_range_stop_startup(variable: str, value: str, words: str) -> None:
    with pytest.raises(SettingsError) as error:
        load_settings({"ARTBOT_RUNNER_TOKEN": TOKEN, f"ARTBOT_RUNNER_{variable}": value})
    assert f"ARTBOT_RUNNER_{variable}:" in str(error.value)
    assert words in str(error.value)


@pytest.mark.parametrize(
    ("text", "words"), [("0,0", "two slots"), ("-1", "0 or more"), ("gpu0", "not a GPU index")]
)
def test_bad_slots(text: str, words: str) -> None:
    with pytest.raises(ValueError, match=words):
        parse_slots(text)


def test_nvidia_smi_output_is_parsed() -> None:
    gpus = parse_gpus(
        "0, GPU-aaa, NVIDIA H100 80GB HBM3, 81559, 1200, 80359, 3\n"
        "1, GPU-bbb, NVIDIA H100 80GB HBM3, 81559, [N/A], [N/A], [N/A]\n",
        "GPU-aaa, 1234, /usr/bin/python3, 1100\nGPU-aaa, 99, name, with, commas, 100\n",
    )
    assert [g.index for g in gpus] == [0, 1]
    assert gpus[0].memory_free_mib == 80359 and gpus[0].utilization_pct == 3
    assert [(p.pid, p.name, p.used_mib) for p in gpus[0].processes] == [
        (1234, "/usr/bin/python3", 1100),
        (99, "name,with,commas", 100),
    ]
    assert gpus[1].memory_free_mib == 81559 and gpus[1].utilization_pct is None
    assert default_slots(list(reversed(gpus))) == [(0,), (1,)]


def test_the_ray_executor_needs_the_address_of_rays_job_api() -> None:
    assert load_settings({"ARTBOT_RUNNER_TOKEN": TOKEN}).executor == "local"
    with pytest.raises(SettingsError) as missing:
        load_settings({"ARTBOT_RUNNER_TOKEN": TOKEN, "ARTBOT_RUNNER_EXECUTOR": "ray"})
    assert "needs ARTBOT_RUNNER_RAY_ADDRESS" in str(missing.value)
    with pytest.raises(SettingsError) as bad:
        load_settings(
            {
                "ARTBOT_RUNNER_TOKEN": TOKEN,
                "ARTBOT_RUNNER_EXECUTOR": "ray",
                "ARTBOT_RUNNER_RAY_ADDRESS": "127.0.0.1 8265",
            }
        )
    assert "ARTBOT_RUNNER_RAY_ADDRESS" in str(bad.value) and "http://" in str(bad.value)
    with pytest.raises(SettingsError) as unknown:
        load_settings({"ARTBOT_RUNNER_TOKEN": TOKEN, "ARTBOT_RUNNER_EXECUTOR": "slurm"})
    assert "ARTBOT_RUNNER_EXECUTOR" in str(unknown.value)
    settings = load_settings(
        {
            "ARTBOT_RUNNER_TOKEN": TOKEN,
            "ARTBOT_RUNNER_EXECUTOR": "ray",
            "ARTBOT_RUNNER_RAY_ADDRESS": "http://10.0.0.5:8265/",
        }
    )
    assert settings.ray_address == "http://10.0.0.5:8265"
    assert settings.ray_gpus_per_job == 1 and settings.ray_python == "python3"


def test_without_the_ray_extra_the_runner_says_how_to_install_it(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    # As if Ray were not installed: importing it fails the way a missing package does.
    monkeypatch.setitem(sys.modules, "ray.job_submission", None)
    settings = load_settings(
        {
            "ARTBOT_RUNNER_TOKEN": TOKEN,
            "ARTBOT_RUNNER_DATABASE_URL": f"sqlite:///{tmp_path / 'runner.db'}",
            "ARTBOT_RUNNER_WORKDIR": str(tmp_path / "jobs"),
            "ARTBOT_RUNNER_GPU_SLOTS": "none",
            "ARTBOT_RUNNER_EXECUTOR": "ray",
            "ARTBOT_RUNNER_RAY_ADDRESS": "http://127.0.0.1:9",
        }
    )
    with pytest.raises(SettingsError) as error:
        build_service(settings, environ={})
    message = str(error.value)
    assert "ARTBOT_RUNNER_EXECUTOR" in message and "uv sync --extra ray" in message
    # The database was let go: a runner with the local executor can start on it now.
    local = build_service(settings.model_copy(update={"executor": "local"}), environ={})
    local.stop()
    local.store.close()
