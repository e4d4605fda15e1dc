"""SkyPilot's `~/.sky/config.yaml` (or `SKYPILOT_CONFIG`), read by `skyless plan` as a SkyPilot user's
machine has it, in a fresh HOME: `allowed_clouds` and `<cloud>.labels` applied, every other key said to be
ignored and why, skyless's own config on top, and a bad file named with its field and line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from cli.main import app
from cli.sky_config import apply_sky_config, load_sky_config

TASK = "name: train\nresources:\n  cpus: 4+\nrun: python train.py\n"


@pytest.fixture
def home(sky_home: Path) -> Path:
    return sky_home


@pytest.fixture
def task_file(tmp_path: Path) -> Path:
    path = tmp_path / "train.yaml"
    path.write_text(TASK)
    return path


def sky_config(home: Path, config: dict[str, object]) -> Path:
    path = home / ".sky" / "config.yaml"
    path.write_text(yaml.safe_dump(config))
    return path


def plan(task_file: Path, *args: str) -> tuple[int, dict, str]:
    result = CliRunner().invoke(app, ["plan", str(task_file), "--json", *args], env={"COLUMNS": "200"})
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    return result.exit_code, json.loads(result.stdout), result.stderr


def clouds_of(body: dict) -> set[str]:
    return {candidate["cloud"] for task in body["tasks"] for candidate in task["candidates"]}


def test_without_a_config_file_every_cloud_is_planned_and_nothing_is_said(home: Path, task_file: Path):
    code, body, _ = plan(task_file)
    assert code == 0 and len(clouds_of(body)) > 2
    assert not any("config.yaml" in note for note in body["notes"])


def test_allowed_clouds_limits_the_plan_and_says_so(home: Path, task_file: Path):
    path = sky_config(home, {"allowed_clouds": ["GCP", "azure"]})
    code, body, _ = plan(task_file)
    assert code == 0 and clouds_of(body) == {"gcp", "azure"}, body
    assert f"{path}: allowed_clouds: applied: only gcp, azure considered" in body["notes"]


def test_allowed_clouds_and_the_clouds_flag_must_share_a_cloud(home: Path, task_file: Path):
    sky_config(home, {"allowed_clouds": ["gcp"]})
    code, body, _ = plan(task_file, "--clouds", "gcp,aws")
    assert code == 0 and clouds_of(body) == {"gcp"}
    code, body, _ = plan(task_file, "--clouds", "aws")
    assert code == 2 and body["field"] == "allowed_clouds" and "share" not in body["message"]
    assert "--clouds aws and allowed_clouds [gcp] leave no cloud" in body["message"]


def test_a_cloud_skyless_lacks_is_said_and_the_rest_applies(home: Path, task_file: Path):
    sky_config(home, {"allowed_clouds": ["kubernetes", "aws"]})
    code, body, _ = plan(task_file)
    assert code == 0 and clouds_of(body) == {"aws"}
    assert any("allowed_clouds: kubernetes: read, not applied: skyless has no such cloud" in n
               for n in body["notes"])  # fmt: skip


def test_skypilot_config_names_the_file_instead_of_the_home_one(
    home: Path, task_file: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    sky_config(home, {"allowed_clouds": ["aws"]})
    other = tmp_path / "team.yaml"
    other.write_text("allowed_clouds: [azure]\n")
    monkeypatch.setenv("SKYPILOT_CONFIG", str(other))
    code, body, _ = plan(task_file)
    assert code == 0 and clouds_of(body) == {"azure"}
    monkeypatch.setenv("SKYPILOT_CONFIG", str(tmp_path / "missing.yaml"))
    code, body, _ = plan(task_file)
    assert code == 2 and body["field"] == "SKYPILOT_CONFIG" and "missing.yaml" in body["message"]


def test_a_project_sky_yaml_overrides_the_user_file_as_in_skypilot(
    home: Path, task_file: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    sky_config(home, {"allowed_clouds": ["aws"], "aws": {"labels": {"team": "a"}}})
    (tmp_path / ".sky.yaml").write_text("allowed_clouds: [gcp, aws]\n")  # the working folder's
    config = load_sky_config()
    assert config.allowed_clouds == ["gcp", "aws"] and config.values["aws"]["labels"] == {"team": "a"}
    assert config.sources == (str(home / ".sky" / "config.yaml"), ".sky.yaml")
    user = tmp_path / "user.yaml"
    user.write_text("allowed_clouds: [azure]\n")
    monkeypatch.setenv("SKYPILOT_GLOBAL_CONFIG", str(user))
    (tmp_path / ".sky.yaml").unlink()
    code, body, _ = plan(task_file)
    assert code == 0 and clouds_of(body) == {"azure"}
    monkeypatch.setenv("SKYPILOT_PROJECT_CONFIG", str(tmp_path / "nope.yaml"))
    code, body, _ = plan(task_file)
    assert code == 2 and body["field"] == "SKYPILOT_PROJECT_CONFIG"


def test_skyless_own_config_is_merged_on_top(home: Path, task_file: Path):
    sky_config(home, {"allowed_clouds": ["aws"], "gcp": {"labels": {"team": "a", "cost": "x"}}})
    (home / ".skyless").mkdir()
    (home / ".skyless" / "config.yaml").write_text(
        "allowed_clouds: [gcp]\ngcp:\n  labels: {team: b}\n"
    )  # no api_url: still the local runtime, but SkyPilot's keys come from here first
    config = load_sky_config()
    assert config.allowed_clouds == ["gcp"]
    assert config.values["gcp"]["labels"] == {"team": "b", "cost": "x"}
    code, body, _ = plan(task_file)
    assert code == 0 and clouds_of(body) == {"gcp"}


def test_every_key_read_is_applied_or_said_to_be_ignored(home: Path, task_file: Path):
    config = {
        "allowed_clouds": ["aws"],
        "aws": {"labels": {"team": "ml"}, "vpc_name": "corp", "remote_identity": "LOCAL_CREDENTIALS"},
        "gcp": {"labels": {"team": "ml"}, "prioritize_reservations": True},
        "docker": {"run_options": ["--shm-size=1g"]},
        "jobs": {"controller": {"resources": {"cpus": "4+"}}, "bucket": "s3://mine"},
        "nvidia_gpus": {"disable_ecc": True},
        "kubernetes": {"pod_config": {}},
        "api_server": {"endpoint": "http://x"},
        "admin_policy": "my.Policy",
        "something_new": 1,
    }
    sky_config(home, config)
    code, body, _ = plan(task_file)
    assert code == 0
    said = [note for note in body["notes"] if "config.yaml" in note]
    keys = ("allowed_clouds", "aws.labels", "aws.vpc_name", "aws.remote_identity", "gcp.labels",
            "gcp.prioritize_reservations", "docker.run_options", "jobs.controller", "jobs.bucket",
            "nvidia_gpus.disable_ecc", "kubernetes", "api_server", "admin_policy",
            "something_new")  # fmt: skip
    for key in keys:
        assert any(f": {key}: " in note for note in said), (key, said)
    assert any(": aws.labels: applied to train" in note for note in said)
    assert any(": gcp.labels: read, not applied to train: it runs only on aws" in note for note in said)
    ignored = [note for note in said if "read, not applied" in note]
    assert all(note.split("read, not applied", 1)[1].strip(": ") for note in ignored)  # each says why


def test_cloud_labels_go_on_the_task_only_where_it_can_only_run_there(home: Path):
    sky_config(home, {"aws": {"labels": {"team": "ml", "owner": "config"}}})
    config = load_sky_config()
    pinned = "resources:\n  infra: aws/us-east-1\n  labels: {owner: task}\nrun: x\n"
    applied = apply_sky_config(pinned, "t.yaml", None, config)
    assert yaml.safe_load(applied.text)["resources"]["labels"] == {"team": "ml", "owner": "task"}
    anywhere = "resources:\n  cpus: 2\nrun: x\n"
    applied = apply_sky_config(anywhere, "t.yaml", None, config)
    assert applied.text == anywhere
    assert any("it may run on several clouds" in note for note in applied.notes)
    applied = apply_sky_config(anywhere, "t.yaml", ["aws"], config)  # --clouds aws
    assert yaml.safe_load(applied.text)["resources"]["labels"] == {"team": "ml", "owner": "config"}


def test_a_bad_config_file_is_an_error_naming_the_file_field_and_line(home: Path, task_file: Path):
    path = sky_config(home, {"allowed_clouds": ["awz"]})
    code, body, _ = plan(task_file)
    assert code == 2 and body["file"] == str(path) and body["field"] == "allowed_clouds"
    assert "did you mean 'aws'" in body["message"]
    path.write_text("allowed_clouds: [aws\njobs: {}\n")
    code, body, _ = plan(task_file)
    assert code == 2 and body["file"] == str(path) and body["line"] in (2, 3)
    path.write_text("- aws\n")
    code, body, _ = plan(task_file)
    assert code == 2 and "mapping" in body["message"]


def test_plan_without_json_prints_the_config_notes(home: Path, task_file: Path):
    sky_config(home, {"allowed_clouds": ["gcp"], "aws": {"vpc_name": "corp"}})
    result = CliRunner().invoke(app, ["plan", str(task_file)], env={"COLUMNS": "300"})
    assert result.exit_code == 0
    assert "allowed_clouds: applied: only gcp considered" in result.stdout
    assert "aws.vpc_name: read, not applied: skyless launches into each cloud's default network" in (
        result.stdout
    )
