"""The SkyPilot environment of a node's `setup` and `run`, as SkyPilot 0.14.1 gives it to a managed job.

Pure: the API computes both stages' variables per node (`agent_reports.agent_config`) and the agent only
lays them over the task's own `envs`/`secrets` (SkyPilot's variables win, as they do in SkyPilot).

What SkyPilot sets, and where (sky/backends/cloud_vm_ray_backend.py `_setup`/`_skypilot_predefined_env_vars`,
sky/backends/task_codegen.py, sky/jobs/controller.py; every launch detaches its setup):

- both stages: SKYPILOT_TASK_ID, SKYPILOT_TASK_IDS, SKYPILOT_JOB_RANK, SKYPILOT_CLUSTER_INFO,
  SKYPILOT_NUM_NODES, and SKYPILOT_JOBGROUP_NAME when the job is a job group;
- setup only: SKYPILOT_SETUP_NODE_RANK, SKYPILOT_SETUP_NODE_IPS, SKYPILOT_SETUP_NUM_GPUS_PER_NODE;
- run only: SKYPILOT_NODE_RANK, SKYPILOT_NODE_IPS, SKYPILOT_NUM_GPUS_PER_NODE.
- a job group's tasks also get every task's address (`job_group_env`, both stages).

Not set by skyless (undocumented by SkyPilot, or with no skyless meaning): SKYPILOT_USER (the launching
user's name), SKYPILOT_MANAGED_JOB_ID and SKYPILOT_ROOT_JOB_ID (SkyPilot's integer job ids; skyless job ids
are strings), SKYPILOT_INTERNAL_JOB_ID, SKYPILOT_NUM_JOBS (`--num-jobs`), SKYPILOT_SERVE_* (services).
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass
from datetime import UTC, datetime

# str(cloud) in SkyPilot (each cloud class's _REPR), which is what SKYPILOT_CLUSTER_INFO's "cloud" holds.
SKYPILOT_CLOUD_NAMES = {
    "aws": "AWS",
    "gcp": "GCP",
    "azure": "Azure",
    "lambda": "Lambda",
    "runpod": "RunPod",
    "kubernetes": "Kubernetes",
    "oci": "OCI",
    "ibm": "IBM",
    "nebius": "Nebius",
    "paperspace": "Paperspace",
    "fluidstack": "Fluidstack",
    "cudo": "Cudo",
    "vast": "Vast",
    "do": "DO",
    "scp": "SCP",
    "vsphere": "vSphere",
}
# Accelerators SkyPilot schedules but does not count as GPUs in SKYPILOT_NUM_GPUS_PER_NODE
# (sky/utils/accelerator_registry.py: _SCHEDULABLE_NON_GPU_ACCELERATORS, matched as substrings).
NON_GPU_ACCELERATORS = ("tpu", "inferentia", "trainium")
TIMESTAMP_FORMAT = "%Y-%m-%d-%H-%M-%S-%f"


@dataclass(frozen=True)
class NodePlace:
    """Where a node runs: its cluster and the hardware the plan chose for it."""

    cluster_name: str
    cloud: str
    region: str
    zone: str | None
    accelerator: str | None
    accelerator_count: float


@dataclass(frozen=True)
class StageEnvs:
    setup: dict[str, str]
    run: dict[str, str]


def gpus_per_node(accelerator: str | None, count: float) -> int:
    """SKYPILOT_NUM_GPUS_PER_NODE: the accelerator count rounded up; 0 with no GPU (TPUs are not GPUs)."""
    if not accelerator or any(name in accelerator.lower() for name in NON_GPU_ACCELERATORS):
        return 0
    return math.ceil(count)


def setup_gpus_per_node(accelerator: str | None, count: float) -> int:
    """SKYPILOT_SETUP_NUM_GPUS_PER_NODE: the accelerator count rounded up, whatever the accelerator."""
    return math.ceil(count) if accelerator else 0


def cluster_info(place: NodePlace) -> str:
    """SKYPILOT_CLUSTER_INFO: `json.dumps` of exactly these four keys, in this order (a zone-less place
    gives `"zone": null`, as SkyPilot does for clouds without zones)."""
    cloud = SKYPILOT_CLOUD_NAMES.get(place.cloud.lower(), place.cloud)
    return json.dumps(
        {"cluster_name": place.cluster_name, "cloud": cloud, "region": place.region, "zone": place.zone}
    )


def job_display_name(name: str | None, job_id: str, owner: str) -> str:
    """The managed job's name (SkyPilot's DAG name): the file's `name`, else the first task's, else
    `sky-<4 hex>-<user>` as SkyPilot generates (here from the job id, so every node agrees)."""
    if name:
        return name
    suffix = re.sub(r"^[\d-]+|-+$", "", re.sub(r"[^a-z0-9_-]", "", owner.lower()))
    token = re.sub(r"[^0-9a-f]", "", job_id.removeprefix("job-"))[:4] or "0000"
    return f"sky-{token}-{suffix}" if suffix else f"sky-{token}"


def managed_task_ids(
    *,
    submitted_at: float,
    job_name: str,
    task_names: list[str | None],
    job_id: str,
) -> list[str]:
    """SKYPILOT_TASK_ID of each task of a job, in SkyPilot's managed-job format
    `sky-managed-<submit time>_<job name>[_<task name>]_<job id>-<task index>` (the task name appears
    when the job has several tasks; an unnamed one is `<job name>-<index>`, as SkyPilot fills it in).
    The same on every attempt, as SkyPilot's managed jobs: a recovered task finds its checkpoints again.
    """
    stamp = datetime.fromtimestamp(submitted_at, UTC).strftime(TIMESTAMP_FORMAT)
    ids = []
    for index, task_name in enumerate(task_names):
        name = job_name if len(task_names) == 1 else f"{job_name}_{task_name or f'{job_name}-{index}'}"
        ids.append(f"sky-managed-{stamp}_{name}_{job_id}-{index}")
    return ids


def node_env(
    *,
    place: NodePlace,
    rank: int,
    node_ips: list[str],
    task_ids: list[str],
    task_index: int,
    job_group: str | None = None,
) -> StageEnvs:
    """Both stages' SkyPilot variables for the node of rank `rank` (node_ips in rank order)."""
    ips = "\n".join(node_ips)
    common = {
        "SKYPILOT_TASK_ID": task_ids[task_index],
        "SKYPILOT_TASK_IDS": "\n".join(task_ids),
        "SKYPILOT_JOB_RANK": "0",
        "SKYPILOT_CLUSTER_INFO": cluster_info(place),
        "SKYPILOT_NUM_NODES": str(len(node_ips)),
    }
    if job_group is not None:
        common["SKYPILOT_JOBGROUP_NAME"] = job_group
    setup = {
        **common,
        "SKYPILOT_SETUP_NODE_RANK": str(rank),
        "SKYPILOT_SETUP_NODE_IPS": ips,
        "SKYPILOT_SETUP_NUM_GPUS_PER_NODE": str(
            setup_gpus_per_node(place.accelerator, place.accelerator_count)
        ),
    }
    run = {
        **common,
        "SKYPILOT_NODE_RANK": str(rank),
        "SKYPILOT_NODE_IPS": ips,
        "SKYPILOT_NUM_GPUS_PER_NODE": str(gpus_per_node(place.accelerator, place.accelerator_count)),
    }
    return StageEnvs(setup=setup, run=run)


def job_group_env(group: str, tasks: list[tuple[str, list[str]]]) -> dict[str, str]:
    """How a job group's tasks reach each other: `tasks` is every task's name and its nodes' IPs by rank.

    SkyPilot names task nodes `<task>-<rank>.<group>` (sky/jobs/job_group_networking.py, written into each
    node's /etc/hosts) and, in its first job-group releases, `SKYPILOT_JOBGROUP_HOST_<TASK>` (the task name
    upper-cased, `-` as `_`) held the head node's name. skyless sets that variable to the head node's IP,
    which works where no hosts file can be written (the local cloud), and `SKYLESS_JOBGROUP_HOSTS`, the
    hosts-file lines `<ip> <task>-<rank>.<group>` the node agent adds to /etc/hosts on a VM."""
    env: dict[str, str] = {}
    lines: list[str] = []
    for name, ips in tasks:
        if ips:
            env[f"SKYPILOT_JOBGROUP_HOST_{name.upper().replace('-', '_')}"] = ips[0]
        lines.extend(f"{ip} {name}-{rank}.{group}" for rank, ip in enumerate(ips))
    env["SKYLESS_JOBGROUP_HOSTS"] = "\n".join(lines)
    return env
