"""The task a job keeps, read back without the pydantic models: plain dataclasses over what submit stored.

Submit validates a task file through the models (shared.task.spec) and stores their JSON dump
(shared.jobs.task_records). Building those models' validators costs a cold optimize or provision function
more than its whole plan; the stored form is already valid, so the steps after submit read it here and
check nothing. Untrusted text (task files, API bodies) goes through the models, always.

Each record mirrors the model of the same role under the same attribute names (aliased fields, such as
`_is_sky_managed`, read from their alias, as stored), with the same defaults and the same methods the
control plane calls on it. `model_fields_set` answers as the model's does: the fields the stored JSON
holds. Records are plain (no generated equality: defining it costs a cold start more than it serves).
Sections no step after submit reads as objects (`service`, `config`, `job`, `autostop`,
`accelerator_args`, `volumes`, `workdir`, ...) are kept as their stored JSON. tests/unit/test_stored_task.py
reads every example and fixture both ways and finds them equal.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, TypeVar

from shared.task.requests import ResourceChoice, choice_of
from shared.task.values import ResourceReadings

Record = TypeVar("Record")


def _alias(name: str) -> dict[str, str]:
    return {"alias": name}


def _as(reader: Any) -> dict[str, Any]:
    return {"read": reader}


def read_record(cls: type[Record], data: dict[str, Any]) -> Record:
    """`cls` from its stored JSON: each field from its name (or alias), nested records read as declared."""
    values: dict[str, Any] = {}
    present: set[str] = set()
    for spec in dataclasses.fields(cls):  # type: ignore[arg-type]
        if not spec.init:
            continue
        key = spec.metadata.get("alias", spec.name)
        if key not in data:
            continue
        present.add(spec.name)
        value = data[key]
        reader = spec.metadata.get("read")
        values[spec.name] = reader(value) if reader is not None and value is not None else value
    record = cls(**values)
    object.__setattr__(record, "stored", data)
    object.__setattr__(record, "model_fields_set", frozenset(present))
    return record


@dataclass(eq=False)
class StoredJobRecovery:
    strategy: str | None = None
    max_restarts_on_errors: int | None = None
    recover_on_exit_codes: int | list[int] | None = None
    stored: dict[str, Any] = field(default_factory=dict, init=False, repr=False, compare=False)
    model_fields_set: frozenset[str] = field(default=frozenset(), init=False, repr=False, compare=False)


def _job_recovery(value: Any) -> Any:
    return read_record(StoredJobRecovery, value) if isinstance(value, dict) else value


@dataclass(eq=False)
class StoredResourceFields(ResourceReadings):
    """One set of resources (shared.task.resources.ResourceFields)."""

    infra: str | None = None
    cloud: str | None = None
    region: str | None = None
    zone: str | None = None
    accelerators: Any = None
    accelerator_args: dict[str, Any] | None = None
    cpus: str | int | float | None = None
    memory: str | int | float | None = None
    instance_type: str | None = None
    use_spot: bool | None = None
    job_recovery: str | StoredJobRecovery | None = field(default=None, metadata=_as(_job_recovery))
    disk_size: int | str | None = None
    disk_tier: str | None = None
    network_tier: str | None = None
    ephemeral_storage: int | str | None = None
    local_disk: str | None = None
    volumes: list[dict[str, Any]] | None = None
    max_hourly_cost: float | None = None
    ports: int | str | list[int | str] | None = None
    labels: dict[str, str] | None = None
    image_id: str | dict[str, str] | None = None
    autostop: Any = None
    priority: int | None = None
    priority_class: str | None = None
    docker_login_config: dict[str, Any] | None = field(default=None, metadata=_alias("_docker_login_config"))
    is_image_managed: bool | None = field(default=None, metadata=_alias("_is_image_managed"))
    requires_fuse: bool | None = field(default=None, metadata=_alias("_requires_fuse"))
    cluster_config_overrides: dict[str, Any] | None = field(
        default=None, metadata=_alias("_cluster_config_overrides")
    )
    no_missing_accel_warnings: bool | None = field(
        default=None, metadata=_alias("_no_missing_accel_warnings")
    )
    stored: dict[str, Any] = field(default_factory=dict, init=False, repr=False, compare=False)
    model_fields_set: frozenset[str] = field(default=frozenset(), init=False, repr=False, compare=False)


def _alternatives(value: list[dict[str, Any]]) -> list[StoredResourceFields]:
    return [read_record(StoredResourceFields, item) for item in value]


def _without_nulls(data: dict[str, Any]) -> dict[str, Any]:
    return {key: value for key, value in data.items() if value is not None}


@dataclass(eq=False)
class StoredResources(StoredResourceFields):
    """`resources:` with its `any_of` / `ordered` alternatives (shared.task.resources.Resources)."""

    any_of: list[StoredResourceFields] | None = field(default=None, metadata=_as(_alternatives))
    ordered: list[StoredResourceFields] | None = field(default=None, metadata=_as(_alternatives))

    def alternatives(self) -> list[StoredResourceFields]:
        return [fields for _, fields in self.sourced_alternatives()]

    def sourced_alternatives(self) -> list[tuple[tuple[str | int, ...], StoredResourceFields]]:
        """Each alternative with the shared fields filled in, as the model merges them."""
        items = self.any_of or self.ordered
        kind = "any_of" if self.any_of else "ordered"
        base = _without_nulls({k: v for k, v in self.stored.items() if k not in ("any_of", "ordered")})
        if not items:
            return [(("resources",), read_record(StoredResourceFields, base))]
        merged: list[tuple[tuple[str | int, ...], StoredResourceFields]] = []
        for position, item in enumerate(items):
            own = _without_nulls(item.stored)
            fields = {**base, **own}
            if "infra" in own:
                for key in ("cloud", "region", "zone"):
                    fields.pop(key, None)
            elif {"cloud", "region", "zone"} & set(own):
                fields.pop("infra", None)
            merged.append((("resources", kind, position), read_record(StoredResourceFields, fields)))
        return merged


@dataclass(eq=False)
class StoredMountCached:
    transfers: int | None = None
    buffer_size: str | None = None
    vfs_cache_max_size: str | None = None
    vfs_cache_max_age: str | None = None
    vfs_read_ahead: str | None = None
    vfs_read_chunk_size: str | None = None
    vfs_read_chunk_streams: int | None = None
    vfs_write_back: str | None = None
    read_only: bool | None = None
    stored: dict[str, Any] = field(default_factory=dict, init=False, repr=False, compare=False)
    model_fields_set: frozenset[str] = field(default=frozenset(), init=False, repr=False, compare=False)


@dataclass(eq=False)
class StoredMount:
    read_only: bool | None = None
    hf_mount_args: str | list[str] | None = None
    stored: dict[str, Any] = field(default_factory=dict, init=False, repr=False, compare=False)
    model_fields_set: frozenset[str] = field(default=frozenset(), init=False, repr=False, compare=False)


@dataclass(eq=False)
class StoredStorageConfig:
    disk_size: int | str | None = None
    disk_tier: str | None = None
    storage_type: str | None = None
    attach_mode: str | None = None
    mount_cached: StoredMountCached | None = field(
        default=None, metadata=_as(lambda v: read_record(StoredMountCached, v))
    )
    mount: StoredMount | None = field(default=None, metadata=_as(lambda v: read_record(StoredMount, v)))
    stored: dict[str, Any] = field(default_factory=dict, init=False, repr=False, compare=False)
    model_fields_set: frozenset[str] = field(default=frozenset(), init=False, repr=False, compare=False)


@dataclass(eq=False)
class StoredStorageObject:
    """A bucket in `file_mounts` (shared.task.spec.StorageObject)."""

    name: str | None = None
    source: str | list[str] | None = None
    store: str | None = None
    persistent: bool | None = None
    mode: str | None = None
    mount_options: str | None = None
    type: str | None = None
    config: StoredStorageConfig | None = field(
        default=None, metadata=_as(lambda v: read_record(StoredStorageConfig, v))
    )
    is_sky_managed: bool | None = field(default=None, metadata=_alias("_is_sky_managed"))
    bucket_sub_path: str | None = field(default=None, metadata=_alias("_bucket_sub_path"))
    force_delete: bool | None = field(default=None, metadata=_alias("_force_delete"))
    stored: dict[str, Any] = field(default_factory=dict, init=False, repr=False, compare=False)
    model_fields_set: frozenset[str] = field(default=frozenset(), init=False, repr=False, compare=False)


def _file_mounts(value: dict[str, Any]) -> dict[str, str | StoredStorageObject]:
    return {
        path: read_record(StoredStorageObject, source) if isinstance(source, dict) else source
        for path, source in value.items()
    }


@dataclass(eq=False)
class StoredTask:
    """One task (shared.task.spec.Task)."""

    name: str | None = None
    workdir: str | dict[str, Any] | None = None
    event_callback: str | None = None
    num_nodes: int = 1
    job: dict[str, Any] | None = None
    resources: StoredResources = field(
        default_factory=StoredResources, metadata=_as(lambda v: read_record(StoredResources, v))
    )
    file_mounts: dict[str, str | StoredStorageObject] | None = field(default=None, metadata=_as(_file_mounts))
    service: dict[str, Any] | None = None
    pool: dict[str, Any] | None = None
    setup: str | None = None
    run: str | None = None
    envs: dict[str, str] = field(default_factory=dict)
    secrets: dict[str, str] = field(default_factory=dict)
    managed_secrets: Any = None
    inputs: dict[str, float] | None = None
    outputs: dict[str, float] | None = None
    file_mounts_mapping: dict[str, Any] | None = None
    config: dict[str, Any] | None = None
    volumes: dict[str, Any] | None = None
    volume_mounts: list[dict[str, Any]] | None = None
    api_server_access: bool | None = None
    metadata: dict[str, Any] | None = field(default=None, metadata=_alias("_metadata"))
    stored: dict[str, Any] = field(default_factory=dict, init=False, repr=False, compare=False)
    model_fields_set: frozenset[str] = field(default=frozenset(), init=False, repr=False, compare=False)

    @property
    def inputs_gb(self) -> float:
        return float(next(iter(self.inputs.values()))) if self.inputs else 0.0

    @property
    def outputs_gb(self) -> float:
        return float(next(iter(self.outputs.values()))) if self.outputs else 0.0

    def resource_choice(self) -> ResourceChoice:
        return choice_of(self.resources)


@dataclass(eq=False)
class StoredPipeline:
    """The tasks of one job's file (shared.task.spec.Pipeline)."""

    tasks: list[StoredTask] = field(
        default_factory=list, metadata=_as(lambda v: [read_record(StoredTask, t) for t in v])
    )
    name: str | None = None
    execution: str = "serial"
    primary_tasks: list[str] | None = None
    termination_delay: int | str | dict[str, int | str] | None = None
    inter_connection: Any = None
    ignored_header_fields: list[str] | None = None
    stored: dict[str, Any] = field(default_factory=dict, init=False, repr=False, compare=False)
    model_fields_set: frozenset[str] = field(default=frozenset(), init=False, repr=False, compare=False)

    @property
    def deferred_secrets(self) -> dict[int, list[str]]:
        """None once stored: submit kept every secret's value apart (runs/<job>/secrets.json)."""
        return {}


def read_stored_pipeline(data: dict[str, Any]) -> StoredPipeline:
    """The pipeline of a job's stored JSON (shared.jobs.task_records.pipeline_json), unchecked."""
    return read_record(StoredPipeline, data)
