"""The task-file fields skyless reads (they are valid SkyPilot) but does not act on, said plainly.

Every note names the field and what happens instead, so `plan`, `launch`, `status` and an upload's
report can tell a user which part of their file has no effect here. A field listed here is one a
SkyPilot user may rely on; anything skyless does act on (resources it plans with, what the clouds and
the node agent receive) is not listed.
"""

from __future__ import annotations

from typing import Any

from shared.task.container_image import runs_in_a_container
from shared.task.docker_run_options import RUN_OPTIONS_FIELD, run_options_value

# Task-level fields: field -> what skyless does instead.
TASK_FIELDS: dict[str, str] = {
    "service": "not run: the task runs as one job, not a SkyServe service (no replicas, no load balancer)",
    "pool": "not run: skyless has no worker pools; the task runs as one job",
    "event_callback": "not run: skyless reports job events through `skyless notify` (Slack, email) instead",
    "config": "not applied: SkyPilot's per-task config ({keys}) has no skyless equivalent",
    "volumes": "not mounted: skyless has no named volumes",
    "volume_mounts": "not mounted: skyless has no named volumes",
    "managed_secrets": "not fetched: skyless has no server-side secret store; give values with `secrets`",
    "api_server_access": "not granted: a task cannot call the skyless API",
    "job": "not applied: skyless waits for capacity up to its own retry limit",
    "file_mounts_mapping": "ignored: a SkyPilot-internal field",
    "metadata": "ignored: a SkyPilot-internal field",
}
# Resources fields (any alternative): field -> what skyless does instead.
RESOURCE_FIELDS: dict[str, str] = {
    "autostop": "not applied: there are no long-lived clusters; a job's nodes are torn down when it ends",
    "disk_tier": "not applied: the OS disk is each cloud's default disk type",
    "network_tier": "not applied: no InfiniBand/EFA/GPUDirect networking is set up",
    "volumes": "not attached: skyless attaches no extra disks",
    "local_disk": "not used: machines are not chosen by their local disks",
    "ephemeral_storage": "not applied: a Kubernetes-only setting",
    "priority": "not used: skyless has no job priorities",
    "priority_class": "not used: a Kubernetes-only setting",
    "accelerator_args": "not applied: TPU VMs get the default runtime version, and TPU nodes are not made",
    "docker_login_config": "ignored: a SkyPilot-internal field",
    "is_image_managed": "ignored: a SkyPilot-internal field",
    "requires_fuse": "ignored: a SkyPilot-internal field",
    "cluster_config_overrides": "ignored: a SkyPilot-internal field",
}
_ALIASES = {"metadata": "_metadata", "docker_login_config": "_docker_login_config",
            "is_image_managed": "_is_image_managed", "requires_fuse": "_requires_fuse",
            "cluster_config_overrides": "_cluster_config_overrides"}  # fmt: skip


def unsupported_notes(task: Any) -> list[str]:
    """One plain sentence per field `task` sets that skyless does not act on, in file order of kind."""
    notes: list[str] = []
    for name, effect in TASK_FIELDS.items():
        value = getattr(task, name, None)
        if value is None:
            continue
        if name == "config":
            notes += _config_notes(task, value.model_dump(exclude_none=True), effect)
            continue
        notes.append(f"{_ALIASES.get(name, name)}: read, {effect}")
    resources = task.resources
    alternatives = [resources, *(resources.any_of or ()), *(resources.ordered or ())]
    for name, effect in RESOURCE_FIELDS.items():
        if any(getattr(alternative, name, None) is not None for alternative in alternatives):
            notes.append(f"resources.{_ALIASES.get(name, name)}: read, {effect}")
    return notes


def _config_notes(task: Any, config: dict[str, Any], effect: str) -> list[str]:
    """`config.docker.run_options` is applied to a task's container (shared.task.docker_run_options); the
    note names every other key, and the run options of a task that runs in no container."""
    notes = []
    keys = [key for key in config if key != "docker"]
    keys += [f"docker.{key}" for key in config.get("docker") or {} if key != "run_options"]
    if keys or not config:
        notes.append(f"config: read, {effect.format(keys=', '.join(keys) or 'empty')}")
    if run_options_value(config) is not None and not runs_in_a_container(task):
        notes.append(
            f"{RUN_OPTIONS_FIELD}: read, not applied: the task runs on its machine's own OS (it names no "
            "image_id: docker:...)"
        )
    return notes


def pipeline_notes(pipeline: Any) -> list[str]:
    """Every task's unsupported-field notes, each prefixed with its task's name (or number), after the
    job-group header fields that are ignored."""
    header = [
        f"job group header: {name}: read, ignored (SkyPilot 0.14.1 also ignores header fields it does not "
        "know, with a warning)"
        for name in getattr(pipeline, "ignored_header_fields", None) or ()
    ]
    return header + [
        f"{task.name or f'task #{i + 1}'}: {note}"
        for i, task in enumerate(pipeline.tasks)
        for note in unsupported_notes(task)
    ]
