"""Pydantic models of a SkyPilot task file (sky/utils/schemas.py `get_task_schema`), read as written.

A `Pipeline` is what a task file holds: one task, a chain (`execution: serial`) or a job group
(`execution: parallel`). `Task.resource_choice()` is what the optimizer reads. Models dump to JSON and
validate back unchanged, so the job record can keep the validated task.

Memory written as a ratio (`memory: 2x`) is SkyPilot's: at least 2 GiB per vCPU of the machine chosen.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import (
    ConfigDict,
    Field,
    PrivateAttr,
    StrictBool,
    StrictFloat,
    StrictInt,
    ValidationInfo,
    field_validator,
    model_validator,
)
from pydantic_core import PydanticCustomError

from shared.task.docker_run_options import run_option_words, run_options_value
from shared.task.requests import ResourceChoice, choice_of
from shared.task.resources import Resources
from shared.task.service_spec import ServiceSpec
from shared.task.strict_model import SpecModel
from shared.task.values import DURATION, ENV_NAME, STORAGE_MODES, STORES

Number = StrictInt | StrictFloat
MAX_DATA_GB = 1e12  # a zettabyte: past any real data set, and a float still holds it
MAX_NUM_NODES = 10_000  # skyless's own bound (SkyPilot has none): beyond it no cloud launches one cluster


class GitWorkdir(SpecModel):
    url: str
    ref: str | None = None


class MountCachedConfig(SpecModel):
    transfers: StrictInt | None = None
    buffer_size: str | None = None
    vfs_cache_max_size: str | None = None
    vfs_cache_max_age: str | None = None
    vfs_read_ahead: str | None = None
    vfs_read_chunk_size: str | None = None
    vfs_read_chunk_streams: StrictInt | None = None
    vfs_write_back: str | None = None
    read_only: StrictBool | None = None


class MountConfig(SpecModel):
    read_only: StrictBool | None = None
    hf_mount_args: str | list[str] | None = None  # newer SkyPilot: one shell token per item


class StorageConfig(SpecModel):
    disk_size: StrictInt | str | None = None
    disk_tier: str | None = None
    storage_type: str | None = None
    attach_mode: str | None = None
    mount_cached: MountCachedConfig | None = None
    mount: MountConfig | None = None


class StorageObject(SpecModel):
    """A bucket in `file_mounts`: `{name, source, store, mode, persistent, ...}`."""

    _what = "storage field"
    name: str | None = None
    source: str | list[str] | None = None
    store: str | None = None
    persistent: StrictBool | None = None
    mode: str | None = None
    mount_options: str | None = None
    type: str | None = None
    config: StorageConfig | None = None
    is_sky_managed: StrictBool | None = Field(None, alias="_is_sky_managed")
    bucket_sub_path: str | None = Field(None, alias="_bucket_sub_path")
    force_delete: StrictBool | None = Field(None, alias="_force_delete")

    @field_validator("store")
    @classmethod
    def _known_store(cls, value: str | None) -> str | None:
        return _upper_one_of(value, STORES)

    @field_validator("mode")
    @classmethod
    def _known_mode(cls, value: str | None) -> str | None:
        return _upper_one_of(value, STORAGE_MODES)

    def launch_problem(self) -> str | None:
        """What stops this storage object from being mounted, checked at launch as SkyPilot does
        (its dry run plans a mount whose `name` is still a placeholder)."""
        if not self.name and not self.source:
            return "a storage object needs a 'name' or a 'source' (this one names no bucket)"
        return None


def _upper_one_of(value: str | None, allowed: tuple[str, ...]) -> str | None:
    if value is None:
        return None
    if value.upper() not in allowed:
        raise ValueError(f"expected one of {', '.join(allowed)}, found {value!r}")
    return value.upper()


class JobOptions(SpecModel):
    wait_for_scheduling_timeout: Annotated[StrictInt, Field(ge=1)] | str | None = None

    @field_validator("wait_for_scheduling_timeout")
    @classmethod
    def _duration(cls, value: int | str | None) -> int | str | None:
        if isinstance(value, str) and not DURATION.match(value.strip()):
            raise ValueError(f"expected '<int>[s|m|h|d|w]' such as '2h', found {value!r}")
        return value


class Hook(SpecModel):
    run: str
    events: list[Literal["stop", "preemption", "down"]] | None = None
    timeout: Annotated[StrictInt, Field(ge=1)] | None = None


class TaskConfig(SpecModel):
    """`config:`, a per-task override of ~/.sky/config.yaml; the per-cloud sections are kept as written.
    Keys this list lacks are kept too: SkyPilot's client lets them through for its server to judge."""

    model_config = ConfigDict(strict=True, extra="allow", populate_by_name=True)
    _what = "config section"

    @model_validator(mode="before")
    @classmethod
    def _reject_unknown_fields(cls, data: Any) -> Any:
        return data

    docker: dict[str, Any] | None = None
    nvidia_gpus: dict[str, Any] | None = None
    active_workspace: str | None = None
    gcp: dict[str, Any] | None = None
    azure: dict[str, Any] | None = None
    kubernetes: dict[str, Any] | None = None
    ssh: dict[str, Any] | None = None
    slurm: dict[str, Any] | None = None
    vast: dict[str, Any] | None = None
    hooks: Annotated[list[Hook], Field(max_length=32)] | None = None

    @field_validator("docker")
    @classmethod
    def _run_options(cls, value: dict[str, Any] | None) -> dict[str, Any] | None:
        try:
            run_option_words(run_options_value({"docker": value}) or [])
        except ValueError as error:
            problem = {"problem": str(error), "at": "run_options"}
            raise PydanticCustomError("run_options", "{problem}", problem) from None
        return value


class SecretMount(SpecModel):
    mount_path: str


class Task(SpecModel):
    name: str | None = None
    workdir: str | GitWorkdir | None = None
    event_callback: str | None = None
    num_nodes: Annotated[StrictInt, Field(ge=1, le=MAX_NUM_NODES)] = 1
    job: JobOptions | None = None
    resources: Resources = Field(default_factory=Resources)
    file_mounts: dict[str, str | StorageObject] | None = None
    service: ServiceSpec | None = None
    pool: dict[str, Any] | None = None
    setup: str | None = None
    run: str | None = None
    envs: dict[str, str] = Field(default_factory=dict)
    secrets: dict[str, str] = Field(default_factory=dict)
    managed_secrets: list[str | dict[str, SecretMount]] | dict[str, SecretMount] | None = None
    inputs: dict[str, Number] | None = None
    outputs: dict[str, Number] | None = None
    file_mounts_mapping: dict[str, Any] | None = None
    config: TaskConfig | None = None
    volumes: dict[str, Any] | None = None  # SkyPilot validates volumes apart (`sky volumes apply`)
    volume_mounts: list[dict[str, Any]] | None = None
    api_server_access: StrictBool | None = None
    metadata: dict[str, Any] | None = Field(None, alias="_metadata")

    @field_validator("envs", "secrets", mode="before")
    @classmethod
    def _values_as_strings(cls, value: Any, info: ValidationInfo) -> Any:
        # SkyPilot turns `PORT: 8080` into "8080"; nulls are the loader's business (it knows the overrides).
        if (
            info.field_name == "secrets"
            and isinstance(value, list)
            and all(isinstance(i, str) for i in value)
        ):
            value = dict.fromkeys(value)
        if not isinstance(value, dict):
            return value
        for key in value:
            if not isinstance(key, str) or not ENV_NAME.match(key):
                raise ValueError(f"{key!r} is not a valid environment variable name")
        return {k: v if isinstance(v, str) or v is None else _env_text(v) for k, v in value.items()}

    @field_validator("managed_secrets")
    @classmethod
    def _one_mount(cls, value: Any) -> Any:
        mappings = [value] if isinstance(value, dict) else [v for v in value or [] if isinstance(v, dict)]
        for mapping in mappings:
            if len(mapping) != 1:
                raise ValueError(f"expected exactly one secret in the mapping form, found {len(mapping)}")
        return value

    @field_validator("inputs", "outputs")
    @classmethod
    def _exactly_one(cls, value: dict[str, float] | None) -> dict[str, float] | None:
        if value is not None:
            if len(value) != 1:
                raise ValueError(
                    f"expected exactly one entry {{<cloud URI>: <size in GB>}}, found {len(value)}"
                )
            if any(size < 0 for size in value.values()):
                raise ValueError("the size in GB cannot be negative")
            if any(size > MAX_DATA_GB for size in value.values()):
                raise ValueError(f"the size in GB must be at most {MAX_DATA_GB:.0e}")
        return value

    @property
    def inputs_gb(self) -> float:
        return float(next(iter(self.inputs.values()))) if self.inputs else 0.0

    @property
    def outputs_gb(self) -> float:
        return float(next(iter(self.outputs.values()))) if self.outputs else 0.0

    @property
    def unsupported(self) -> list[str]:
        """The fields this task sets that skyless reads but does not act on, one sentence each."""
        from shared.task.unsupported_fields import unsupported_notes

        notes = unsupported_notes(self)
        for path, source in (self.file_mounts or {}).items():
            if isinstance(source, StorageObject) and (source.mode or "MOUNT") == "MOUNT":
                notes.append(
                    f"file_mounts.{path}: MOUNT on the local cloud is a copy written back every 5 s and when "
                    "the node lets go (as MOUNT_CACHED); other nodes' writes show at the next attempt"
                )
        return notes

    def resource_choice(self) -> ResourceChoice:
        """One `ResourceRequest` per alternative (any_of/ordered, times accelerator alternatives)."""
        return choice_of(self.resources)


def _env_text(value: Any) -> Any:
    return str(value) if isinstance(value, int | float | bool) else value


class Pipeline(SpecModel):
    """The tasks of one file: run one after another (`serial`) or together as a job group (`parallel`)."""

    name: str | None = None
    execution: Literal["serial", "parallel"] = "serial"
    tasks: Annotated[list[Task], Field(min_length=1)]
    primary_tasks: list[str] | None = None
    termination_delay: StrictInt | str | dict[str, StrictInt | str] | None = None
    inter_connection: Any = None
    ignored_header_fields: list[str] | None = None  # job-group header keys SkyPilot warns about and ignores
    # Null secrets left for launch to fill (only when loaded for planning): task index -> names.
    _deferred_secrets: dict[int, list[str]] = PrivateAttr(default_factory=dict)

    @property
    def deferred_secrets(self) -> dict[int, list[str]]:
        return self._deferred_secrets

    @deferred_secrets.setter
    def deferred_secrets(self, value: dict[int, list[str]]) -> None:
        self._deferred_secrets = value
