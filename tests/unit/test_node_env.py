"""The node environment, variable by variable, against SkyPilot 0.14.1's: the documented names, the stage
each is set in, their types and SkyPilot's own examples (tests/fixtures/skypilot_env_reference.json)."""

from __future__ import annotations

import json
import math
from datetime import datetime
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from shared.jobs.node_env import (
    NodePlace,
    StageEnvs,
    cluster_info,
    gpus_per_node,
    job_display_name,
    managed_task_ids,
    node_env,
    setup_gpus_per_node,
)

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
REFERENCE = json.loads((FIXTURES / "skypilot_env_reference.json").read_text())
VARIABLES: dict[str, dict] = REFERENCE["variables"]
GCP_L4 = NodePlace(
    cluster_name="job-0123abcd4567-0", cloud="gcp", region="us-central1", zone="us-central1-a",
    accelerator="L4", accelerator_count=4.0,
)  # fmt: skip
IPS = ["10.128.0.11", "10.128.0.12"]
SUBMITTED = datetime.fromisoformat("2026-03-01T12:30:45.123456+00:00").timestamp()


def envs_of(place: NodePlace = GCP_L4, *, rank: int = 1, group: str | None = None) -> StageEnvs:
    ids = managed_task_ids(
        submitted_at=SUBMITTED, job_name="ddp", task_names=["ddp"], job_id="job-0123abcd4567"
    )
    return node_env(place=place, rank=rank, node_ips=IPS, task_ids=ids, task_index=0, job_group=group)


@pytest.mark.parametrize("name", sorted(VARIABLES))
def test_each_reference_variable_is_set_in_exactly_its_stages(name: str) -> None:
    envs = envs_of(group="rl" if VARIABLES[name].get("only") == "job groups" else None)
    stages = {"setup": envs.setup, "run": envs.run}
    for stage, env in stages.items():
        assert (name in env) == (stage in VARIABLES[name]["stages"]), (name, stage)


@pytest.mark.parametrize("name", sorted(VARIABLES))
def test_each_reference_variable_has_skypilots_type(name: str) -> None:
    envs = envs_of(group="rl")
    kind = VARIABLES[name]["kind"]
    for stage in VARIABLES[name]["stages"]:
        value = (envs.setup if stage == "setup" else envs.run)[name]
        assert isinstance(value, str)
        if kind == "int":
            assert str(int(value)) == value  # "8", never "8.0"
        elif kind == "json":
            assert isinstance(json.loads(value), dict)
        elif kind == "lines":
            assert value and all(line.strip() == line and line for line in value.split("\n"))
        elif kind == "task_id":
            assert value.startswith("sky-managed-")


def test_no_variable_skyless_does_not_set_is_set() -> None:
    envs = envs_of(group="rl")
    for name in REFERENCE["not_set_by_skyless"]:
        assert name not in envs.setup and name not in envs.run


# SKYPILOT_NUM_GPUS_PER_NODE / SKYPILOT_SETUP_NUM_GPUS_PER_NODE


@pytest.mark.parametrize(
    ("accelerator", "count", "run", "setup"),
    [
        ("A100", 8.0, "8", "8"),
        ("L4", 4.0, "4", "4"),
        ("T4", 0.5, "1", "1"),  # a fraction is rounded up
        ("MI25", 0.125, "1", "1"),
        (None, 0.0, "0", "0"),  # SkyPilot's default
        ("tpu-v4-8", 1.0, "0", "1"),  # a TPU is scheduled, not counted as a GPU at run time
        ("Inferentia", 16.0, "0", "16"),
        ("Trainium", 16.0, "0", "16"),
    ],
)
def test_gpus_per_node_is_an_integer_rounded_up(
    accelerator: str | None, count: float, run: str, setup: str
) -> None:
    place = NodePlace("c", "aws", "us-east-1", "us-east-1a", accelerator, count)
    envs = envs_of(place)
    assert envs.run["SKYPILOT_NUM_GPUS_PER_NODE"] == run
    assert envs.setup["SKYPILOT_SETUP_NUM_GPUS_PER_NODE"] == setup


@given(st.floats(min_value=0.01, max_value=64, allow_nan=False))
def test_gpus_per_node_is_the_ceiling_for_any_count(count: float) -> None:
    assert gpus_per_node("H100", count) == math.ceil(count) == setup_gpus_per_node("H100", count)


def test_gpus_per_node_default_matches_the_reference() -> None:
    assert (
        envs_of(NodePlace("c", "aws", "us-east-1", None, None, 0.0)).run["SKYPILOT_NUM_GPUS_PER_NODE"]
        == (VARIABLES["SKYPILOT_NUM_GPUS_PER_NODE"]["example"])
    )


# SKYPILOT_CLUSTER_INFO


def test_cluster_info_has_skypilots_four_keys_in_its_order_and_format() -> None:
    example = VARIABLES["SKYPILOT_CLUSTER_INFO"]["example"]
    place = NodePlace("my-cluster-name", "gcp", "us-central1", "us-central1-a", None, 0.0)
    assert cluster_info(place) == example  # byte for byte: json.dumps with its default separators


def test_cluster_info_carries_the_zone_the_plan_chose() -> None:
    info = json.loads(envs_of().run["SKYPILOT_CLUSTER_INFO"])
    assert info == {"cluster_name": "job-0123abcd4567-0", "cloud": "GCP", "region": "us-central1",
                    "zone": "us-central1-a"}  # fmt: skip
    assert envs_of().setup["SKYPILOT_CLUSTER_INFO"] == envs_of().run["SKYPILOT_CLUSTER_INFO"]


@pytest.mark.parametrize(
    ("cloud", "shown"),
    [("aws", "AWS"), ("gcp", "GCP"), ("azure", "Azure"), ("lambda", "Lambda"), ("runpod", "RunPod")],
)
def test_cluster_info_names_the_cloud_as_skypilot_does(cloud: str, shown: str) -> None:
    assert json.loads(cluster_info(NodePlace("c", cloud, "r", None, None, 0.0)))["cloud"] == shown


def test_cluster_info_of_a_zoneless_place_has_a_null_zone() -> None:
    assert '"zone": null' in cluster_info(NodePlace("c", "lambda", "us-east-1", None, None, 0.0))


# SKYPILOT_TASK_ID / SKYPILOT_TASK_IDS


def test_task_id_reproduces_skypilots_documented_pipeline_example() -> None:
    spec = VARIABLES["SKYPILOT_TASK_ID"]
    example = spec["example_of"]
    ids = managed_task_ids(
        submitted_at=datetime.fromisoformat(example["submitted"]).timestamp(),
        job_name=example["job_name"],
        task_names=example["task_names"],
        job_id=example["job_id"],
    )
    assert ids[example["task_index"]] == spec["example"]
    assert ids[0] == "sky-managed-2022-10-06-05-17-09-750781_pipeline_train_8-0"


def test_task_id_of_a_single_task_job_has_no_task_name() -> None:
    (task_id,) = managed_task_ids(submitted_at=SUBMITTED, job_name="my-job-name", task_names=["my-job-name"],
                                  job_id="job-0123abcd4567")  # fmt: skip
    assert task_id == "sky-managed-2026-03-01-12-30-45-123456_my-job-name_job-0123abcd4567-0"
    assert task_id.split("_", 1)[0] == "sky-managed-2026-03-01-12-30-45-123456"  # ${SKYPILOT_TASK_ID%%_*}


def test_task_id_names_an_unnamed_task_of_a_pipeline_as_skypilot_fills_it_in() -> None:
    ids = managed_task_ids(submitted_at=SUBMITTED, job_name="p", task_names=["a", None], job_id="job-1")
    assert ids[1].endswith("_p_p-1_job-1-1")


def test_task_ids_lists_every_task_of_the_job_in_order_in_both_stages() -> None:
    ids = managed_task_ids(submitted_at=SUBMITTED, job_name="p", task_names=["train", "eval"], job_id="job-1")
    envs = node_env(place=GCP_L4, rank=0, node_ips=IPS, task_ids=ids, task_index=1)
    for env in (envs.setup, envs.run):
        assert env["SKYPILOT_TASK_IDS"].split("\n") == ids
        assert env["SKYPILOT_TASK_ID"] == ids[1]


def test_an_unnamed_job_gets_skypilots_generated_name_shape() -> None:
    assert job_display_name("train", "job-0123abcd4567", "u-1") == "train"
    assert job_display_name(None, "job-0123abcd4567", "u-ab12") == "sky-0123-u-ab12"


# ranks, IPs, node counts


def test_node_rank_and_ips_in_rank_order_for_run_and_setup() -> None:
    envs = envs_of(rank=1)
    assert envs.run["SKYPILOT_NODE_RANK"] == "1" and envs.setup["SKYPILOT_SETUP_NODE_RANK"] == "1"
    assert envs.run["SKYPILOT_NODE_IPS"] == "10.128.0.11\n10.128.0.12"
    assert envs.setup["SKYPILOT_SETUP_NODE_IPS"] == envs.run["SKYPILOT_NODE_IPS"]


def test_num_nodes_is_the_number_of_ip_lines_in_both_stages() -> None:
    envs = envs_of()
    for env in (envs.setup, envs.run):
        assert env["SKYPILOT_NUM_NODES"] == "2" == str(len(IPS))


# SKYPILOT_JOB_RANK / SKYPILOT_JOBGROUP_NAME


def test_job_rank_is_zero_without_num_jobs() -> None:
    envs = envs_of()
    assert (
        envs.setup["SKYPILOT_JOB_RANK"]
        == envs.run["SKYPILOT_JOB_RANK"]
        == VARIABLES["SKYPILOT_JOB_RANK"]["example"]
    )


def test_jobgroup_name_only_in_a_job_group() -> None:
    assert "SKYPILOT_JOBGROUP_NAME" not in envs_of().run
    grouped = envs_of(group="rlhf-experiment")
    assert (
        grouped.run["SKYPILOT_JOBGROUP_NAME"] == grouped.setup["SKYPILOT_JOBGROUP_NAME"] == "rlhf-experiment"
    )
