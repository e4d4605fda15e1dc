"""`skyless plan` through typer's CliRunner: the tables, --json, flags, and exit codes for user mistakes."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner

from cli.main import app
from cli.plan_commands import JSON_CANDIDATES
from shared.catalog.model import write_offerings_csv
from shared.catalog.offering import Offering

SHARED_CATALOG = Path(__file__).resolve().parents[3] / "shared" / "catalog" / "skypilot" / "v8"


def run(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(app, ["plan", *args], env={"COLUMNS": "200"})
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    return result.exit_code, result.stdout, result.stderr


@pytest.fixture
def task_file(tmp_path: Path) -> Path:
    path = tmp_path / "train.yaml"
    path.write_text(
        "name: train\nresources:\n  accelerators: {A100: 8, H100: 8}\nnum_nodes: 2\nrun: python train.py\n"
    )
    return path


@pytest.fixture(autouse=True)
def empty_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """No catalog imported by the user: the built-in catalog only."""
    monkeypatch.setenv("SKYLESS_HOME", str(tmp_path / "home"))
    from shared.catalog.model import reset_default_catalog

    reset_default_catalog()
    yield
    reset_default_catalog()  # the next module must not plan with this test's imported catalog


def test_table_shows_the_chosen_plan_and_the_best_of_each_cloud(task_file: Path) -> None:
    code, out, _ = run(str(task_file))
    assert code == 0
    assert "Chosen plan" in out and "Best per cloud for train (2 node(s))" in out
    for cloud in ("aws", "gcp", "azure", "lambda"):
        assert f"│ {cloud}" in out
    # two nodes: RunPod has no multi-node clusters (as in SkyPilot), and the plan says so
    assert "runpod: no candidate: A100:8 in runpod: not offered on runpod" in out
    assert "H100:8 in runpod: runpod runs no multi-node clusters (num_nodes: 2)" in out
    assert out.count("✔") == 1
    assert "Estimated total: $" in out


def test_json_has_each_task_with_the_chosen_candidate_first(task_file: Path) -> None:
    code, out, _ = run(str(task_file), "--json")
    body = json.loads(out)
    assert code == 0
    assert body["objective"] == "cost" and body["candidates_cap"] == JSON_CANDIDATES
    [task] = body["tasks"]
    assert task["name"] == "train" and task["num_nodes"] == 2
    assert task["candidates"][0] == task["chosen"]
    assert len(task["candidates"]) == JSON_CANDIDATES and task["candidates_truncated"] is True
    prices = [c["hourly_price"] for c in task["candidates"]]
    assert prices == sorted(prices)
    chosen = task["chosen"]
    assert set(chosen) >= {"cloud", "region", "zone", "instance_type", "accelerators", "spot", "hourly_price"}
    assert list(chosen["accelerators"].values()) == [8]
    assert body["total_cost"] == pytest.approx(2 * chosen["hourly_price"])


def test_clouds_flag_limits_the_plan(task_file: Path) -> None:
    code, out, _ = run(str(task_file), "--json", "--clouds", "gcp, AWS")
    assert code == 0
    assert {c["cloud"] for c in json.loads(out)["tasks"][0]["candidates"]} <= {"gcp", "aws"}


def test_unknown_cloud_in_clouds_flag_is_a_user_error(task_file: Path) -> None:
    code, out, _ = run(str(task_file), "--json", "--clouds", "gpc")
    assert code == 2
    error = json.loads(out)
    assert error["field"] == "--clouds" and "gpc" in error["message"]


def test_minimize_time_prefers_the_faster_accelerator(task_file: Path) -> None:
    code, out, _ = run(str(task_file), "--json", "--minimize", "time")
    assert code == 0
    body = json.loads(out)
    assert body["objective"] == "time"
    assert "H100" in body["tasks"][0]["chosen"]["accelerators"]


def test_bad_minimize_is_rejected_without_a_traceback(task_file: Path) -> None:
    code, _, err = run(str(task_file), "--minimize", "speed")
    assert code == 2
    assert "--minimize: must be cost or time" in err and "Traceback" not in err


def test_env_override_gives_a_required_env_its_value(tmp_path: Path) -> None:
    path = tmp_path / "env.yaml"
    path.write_text("envs:\n  DATA: null\nresources:\n  cpus: 4+\nrun: echo $DATA\n")
    code, out, _ = run(str(path), "--json")
    assert code == 2 and json.loads(out)["field"] == "envs.DATA"
    code, out, _ = run(str(path), "--json", "--env", "DATA=s3://bucket")
    assert code == 0, out
    assert json.loads(out)["tasks"][0]["chosen"]["vcpus"] >= 4


def test_env_without_value_is_a_user_error(task_file: Path) -> None:
    code, _, err = run(str(task_file), "--env", "NOVALUE")
    assert code == 2 and "--env: expected K=V" in err


def test_nothing_fits_exits_2_with_the_error_object(tmp_path: Path) -> None:
    path = tmp_path / "a100x3.yaml"
    path.write_text("resources:\n  accelerators: A100:3\nrun: echo\n")
    code, out, _ = run(str(path), "--json")
    assert code == 2
    error = json.loads(out)
    assert error["error"] == "NoOfferingError" and error["file"] == str(path)
    assert "A100:3 exists only as A100:1, 2, 4, 8" in error["message"]


def test_invalid_task_file_names_file_line_and_field(tmp_path: Path) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text("resources:\n  cpus: lots\nrun: echo\n")
    code, out, _ = run(str(path), "--json")
    error = json.loads(out)
    assert code == 2 and error["error"] == "TaskFileError"
    assert error["file"] == str(path) and error["line"] == 2 and "cpus" in error["field"]


def test_missing_file_is_a_user_error_on_stderr(tmp_path: Path) -> None:
    code, out, err = run(str(tmp_path / "nope.yaml"))
    assert code == 2 and out == "" and "no such task file" in err


def test_catalog_flag_plans_against_an_imported_skypilot_folder(task_file: Path) -> None:
    if not SHARED_CATALOG.is_dir():
        pytest.skip("no ../shared/catalog here")
    code, out, _ = run(str(task_file), "--json", "--catalog", str(SHARED_CATALOG))
    assert code == 0
    clouds = {c["cloud"] for c in json.loads(out)["tasks"][0]["candidates"]}
    assert clouds <= {"gcp", "azure", "lambda", "vast"}  # that folder has no AWS or RunPod


def test_catalog_flag_with_a_bad_folder_is_a_user_error(task_file: Path, tmp_path: Path) -> None:
    code, out, _ = run(str(task_file), "--json", "--catalog", str(tmp_path / "missing"))
    assert code == 2
    assert json.loads(out)["error"] == "CatalogError"


def test_pipeline_prints_one_row_per_task_and_the_egress(tmp_path: Path) -> None:
    offerings = [
        Offering("gcp", "us-central1", "us-central1-a", "a2-highgpu-1g", "A100", 1, None, 12, 85, 3.0, None),
        Offering("lambda", "us-tx-1", None, "gpu_1x_l4", "L4", 1, None, 8, 32, 0.5, None),
        Offering("gcp", "us-central1", "us-central1-a", "g2-standard-4", "L4", 1, None, 4, 16, 0.9, None),
    ]
    home = tmp_path / "home" / "catalog"
    write_offerings_csv(home / "all.csv", offerings)
    path = tmp_path / "chain.yaml"
    path.write_text(
        "name: chain\n---\nname: train\nresources:\n  accelerators: A100:1\noutputs:\n  gs://b/ckpt: 2\n"
        "run: echo\n---\nname: serve\nresources:\n  accelerators: L4:1\nnum_nodes: 4\nrun: echo\n"
    )
    code, out, _ = run(str(path), "--json", "--clouds", "gcp,lambda")
    body = json.loads(out)
    assert code == 0, out
    assert [t["chosen"]["cloud"] for t in body["tasks"]] == ["gcp", "lambda"]
    assert body["egress_cost"] == pytest.approx(2 * 0.12)
    code, table, _ = run(str(path), "--clouds", "gcp,lambda")
    assert "Egress (data moved between clouds): $0.24" in table
