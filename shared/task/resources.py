"""The `resources:` section of a SkyPilot task file, as written (sky/utils/schemas.py, resources schema)."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import Field, StrictBool, StrictFloat, StrictInt, field_validator, model_validator
from pydantic_core import PydanticCustomError

from shared.task.strict_model import SpecModel
from shared.task.values import (
    AUTOSTOP_DURATION,
    DISK_TIERS,
    FIELD_ALIASES,
    NETWORK_TIERS,
    RECOVERY_STRATEGIES,
    ResourceReadings,
    canonical_cloud,
    parse_accelerators,
    parse_cpus,
    parse_infra,
    parse_memory,
    parse_ports,
    parse_size_gib,
)

Number = StrictInt | StrictFloat
ExitCode = Annotated[StrictInt, Field(ge=0, le=255)]


class AcceleratorArgs(SpecModel):
    runtime_version: str | None = None
    tpu_name: str | None = None
    tpu_vm: StrictBool | None = None
    gcp_queued_resource: StrictBool | None = None


class JobRecovery(SpecModel):
    strategy: str | None = None
    max_restarts_on_errors: Annotated[StrictInt, Field(ge=0)] | None = None
    recover_on_exit_codes: ExitCode | list[ExitCode] | None = None

    @field_validator("strategy")
    @classmethod
    def _known_strategy(cls, value: str | None) -> str | None:
        return None if value is None else _recovery_strategy(value)


class Autostop(SpecModel):
    idle_minutes: Annotated[StrictInt, Field(ge=0)] | None = None
    down: StrictBool | None = None
    wait_for: Literal["jobs_and_ssh", "jobs", "none"] | None = None
    hook: str | None = None
    hook_timeout: Annotated[StrictInt, Field(ge=1)] | None = None


class ResourceVolume(SpecModel):
    disk_size: StrictInt | str | None = None
    disk_tier: str | None = None
    path: str | None = None
    auto_delete: StrictBool | None = None
    storage_type: Literal["network", "instance"] | None = None
    name: str | None = None
    attach_mode: Literal["read_only", "read_write"] | None = None


class DockerLoginConfig(SpecModel):
    username: str
    password: str
    server: str


def _recovery_strategy(value: str) -> str:
    upper = value.strip().upper()
    if upper not in RECOVERY_STRATEGIES:
        raise ValueError(
            f"unknown recovery strategy {value!r}; expected one of {', '.join(RECOVERY_STRATEGIES)}"
        )
    return upper


class ResourceFields(SpecModel, ResourceReadings):
    """One set of resources; `Resources` adds the `any_of` / `ordered` alternatives."""

    infra: str | None = None
    cloud: str | None = None
    region: str | None = None
    zone: str | None = None
    accelerators: str | dict[str, Number | None] | list[str | dict[str, Number | None]] | None = None
    accelerator_args: AcceleratorArgs | None = None
    cpus: str | StrictInt | StrictFloat | None = None
    memory: str | StrictInt | StrictFloat | None = None
    instance_type: str | None = None
    use_spot: StrictBool | None = None
    job_recovery: str | JobRecovery | None = None
    disk_size: StrictInt | str | None = None
    disk_tier: str | None = None
    network_tier: str | None = None
    ephemeral_storage: StrictInt | str | None = None
    local_disk: str | None = None
    volumes: list[ResourceVolume] | None = None
    max_hourly_cost: Annotated[Number, Field(gt=0)] | None = None
    ports: StrictInt | str | list[StrictInt | str] | None = None
    labels: dict[str, str] | None = None
    image_id: str | dict[str, str] | None = None
    autostop: StrictBool | StrictInt | str | Autostop | None = None
    priority: Annotated[StrictInt, Field(ge=-1000, le=1000)] | None = None
    priority_class: str | None = None
    docker_login_config: DockerLoginConfig | None = Field(None, alias="_docker_login_config")
    is_image_managed: StrictBool | None = Field(None, alias="_is_image_managed")
    requires_fuse: StrictBool | None = Field(None, alias="_requires_fuse")
    cluster_config_overrides: dict[str, Any] | None = Field(None, alias="_cluster_config_overrides")
    no_missing_accel_warnings: StrictBool | None = Field(None, alias="_no_missing_accel_warnings")

    @classmethod
    def known_fields(cls) -> list[str]:
        return [*super().known_fields(), *FIELD_ALIASES]

    @model_validator(mode="before")
    @classmethod
    def _aliases(cls, data: Any) -> Any:
        """SkyPilot's `gpus` is another name for `accelerators` (sky/resources.py RESOURCE_CONFIG_ALIASES)."""
        if not isinstance(data, dict) or not FIELD_ALIASES.keys() & data.keys():
            return data
        data = dict(data)
        for alias, canonical in FIELD_ALIASES.items():
            if alias in data:
                if canonical in data:
                    raise PydanticCustomError(
                        "alias_conflict",
                        "'{alias}' and '{canonical}' are both set; they are one field, write it once",
                        {"alias": alias, "canonical": canonical, "at": alias},
                    )
                data[canonical] = data.pop(alias)
        return data

    @field_validator("cloud")
    @classmethod
    def _known_cloud(cls, value: str | None) -> str | None:
        return None if value is None else canonical_cloud(value)

    @field_validator("infra")
    @classmethod
    def _valid_infra(cls, value: str | None) -> str | None:
        if value is not None:
            parse_infra(value)
        return value

    @field_validator("accelerators", mode="before")
    @classmethod
    def _valid_accelerators(cls, value: Any) -> Any:
        parse_accelerators(value)
        return value

    @field_validator("cpus", mode="before")
    @classmethod
    def _valid_cpus(cls, value: Any) -> Any:
        parse_cpus(value)
        return value

    @field_validator("memory", mode="before")
    @classmethod
    def _valid_memory(cls, value: Any) -> Any:
        parse_memory(value)
        return value

    @field_validator("disk_size", "ephemeral_storage", mode="before")
    @classmethod
    def _valid_size(cls, value: Any) -> Any:
        if value is not None:
            parse_size_gib(value)
        return value

    @field_validator("disk_tier")
    @classmethod
    def _known_disk_tier(cls, value: str | None) -> str | None:
        return _one_of(value, DISK_TIERS)

    @field_validator("network_tier")
    @classmethod
    def _known_network_tier(cls, value: str | None) -> str | None:
        return _one_of(value, NETWORK_TIERS)

    @field_validator("ports", mode="before")
    @classmethod
    def _valid_ports(cls, value: Any) -> Any:
        parse_ports(value)
        return value

    @field_validator("job_recovery", mode="before")
    @classmethod
    def _valid_job_recovery(cls, value: Any) -> Any:
        return _recovery_strategy(value) if isinstance(value, str) else value

    @field_validator("autostop", mode="before")
    @classmethod
    def _valid_autostop(cls, value: Any) -> Any:
        if isinstance(value, str) and not AUTOSTOP_DURATION.match(value.strip()):
            raise ValueError(
                f"expected minutes like 10, '30m', '2h', '1d', true/false or a mapping, found {value!r}"
            )
        if isinstance(value, int) and not isinstance(value, bool) and value < 0:
            raise ValueError(f"expected a non-negative number of minutes, found {value!r}")
        return value

    @model_validator(mode="after")
    def _infra_or_cloud_fields(self) -> ResourceFields:
        pinned = [name for name in ("cloud", "region", "zone") if getattr(self, name) is not None]
        if self.infra is not None and pinned:
            raise PydanticCustomError(
                "infra_conflict",
                "'infra' and {pinned} are both set; write the location once, e.g. infra: '{infra}'",
                {
                    "pinned": ", ".join(repr(p) for p in pinned),
                    "infra": self._infra_equivalent(),
                    "at": pinned[0],
                },
            )
        return self

    def _infra_equivalent(self) -> str:
        parts = [self.cloud or "*", self.region or "*", self.zone or "*"]
        while len(parts) > 1 and parts[-1] == "*":
            parts.pop()
        return "/".join(parts)


def _one_of(value: str | None, allowed: tuple[str, ...]) -> str | None:
    if value is None:
        return None
    if value.lower() not in allowed:
        raise ValueError(f"expected one of {', '.join(allowed)}, found {value!r}")
    return value.lower()


class Resources(ResourceFields):
    """`resources:` with optional alternatives; the fields beside `any_of`/`ordered` are their defaults."""

    any_of: list[ResourceFields] | None = None
    ordered: list[ResourceFields] | None = None

    @model_validator(mode="after")
    def _one_kind_of_alternatives(self) -> Resources:
        if self.any_of is not None and self.ordered is not None:
            raise PydanticCustomError(
                "alternatives_conflict",
                "'any_of' and 'ordered' cannot both be set; use one list of alternatives",
                {"at": "ordered"},
            )
        for name in ("any_of", "ordered"):
            items = getattr(self, name)
            if items is not None and not items:
                raise ValueError(f"'{name}' needs at least one alternative")
        return self

    def alternatives(self) -> list[ResourceFields]:
        """Each alternative with the shared fields filled in (SkyPilot's override semantics)."""
        return [fields for _, fields in self.sourced_alternatives()]

    def sourced_alternatives(self) -> list[tuple[tuple[str | int, ...], ResourceFields]]:
        """`alternatives()`, each with where it was written (`("resources", "any_of", 1)`)."""
        items = self.any_of or self.ordered
        kind = "any_of" if self.any_of else "ordered"
        base = self.model_dump(exclude={"any_of", "ordered"}, exclude_none=True, by_alias=True)
        if not items:
            return [(("resources",), ResourceFields.model_validate(base))]
        merged: list[tuple[tuple[str | int, ...], ResourceFields]] = []
        for position, item in enumerate(items):
            own = item.model_dump(exclude_none=True, by_alias=True)
            fields = {**base, **own}
            if "infra" in own:
                for key in ("cloud", "region", "zone"):
                    fields.pop(key, None)
            elif {"cloud", "region", "zone"} & set(own):
                fields.pop("infra", None)
            merged.append((("resources", kind, position), ResourceFields.model_validate(fields)))
        return merged
