"""`sky launch`'s resource overrides (`--gpus`, `--cpus`, `--memory`, `--num-nodes`, `--use-spot`,
`--infra`/`--cloud`/`--region`/`--zone`, `--instance-type`) applied to a task file as SkyPilot applies them.

SkyPilot (sky/client/cli: `_make_task_or_dag_from_entrypoint_with_overrides`) overrides the resources of
a one-task file, every `any_of`/`ordered` alternative included (`Resources.copy(**overrides)`), and
ignores resource overrides for a file of several tasks, with a warning. A location override replaces the
whole location: `--infra aws` leaves no region from the file; `--region`/`--zone` alone keep the cloud.

The override is made on the file's own YAML (comments and layout are not kept): the result is task-file
text, which `plan` plans and `launch` submits as it would the file itself.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any

import yaml

from shared.errors import UserError
from shared.task.positions import load_documents
from shared.task.values import (
    FIELD_ALIASES,
    canonical_cloud,
    parse_accelerators,
    parse_cpus,
    parse_infra,
    parse_memory,
)

_LOCATION_KEYS = ("infra", "cloud", "region", "zone")


@dataclass(frozen=True)
class ResourceOverrides:
    """What the command line says; None = not given. `flag` names each field's option in errors."""

    gpus: str | None = None
    cpus: str | None = None
    memory: str | None = None
    instance_type: str | None = None
    num_nodes: int | None = None
    use_spot: bool | None = None
    infra: str | None = None
    cloud: str | None = None
    region: str | None = None
    zone: str | None = None

    def given(self) -> dict[str, Any]:
        return {f.name: getattr(self, f.name) for f in fields(self) if getattr(self, f.name) is not None}

    def check(self) -> None:
        """Each value as the task file would take it; a UserError naming the option otherwise."""
        checks = {
            "gpus": parse_accelerators,
            "cpus": parse_cpus,
            "memory": parse_memory,
            "infra": parse_infra,
            "cloud": canonical_cloud,
        }
        for name, value in self.given().items():
            try:
                if name in checks:
                    checks[name](value)
                elif name == "num_nodes" and value < 1:
                    raise ValueError(f"must be at least 1, found {value}")
            except ValueError as error:
                raise UserError(str(error), field=flag_of(name)) from None
        if self.infra is not None and (self.cloud or self.region or self.zone):
            raise UserError("give the location once: --infra, or --cloud/--region/--zone", field="--infra")


def flag_of(name: str) -> str:
    return {"gpus": "--gpus", "use_spot": "--use-spot"}.get(name, "--" + name.replace("_", "-"))


# Which override replaces which task-file field (`gpus` is written `accelerators`, or its alias `gpus`).
FIELD_OF_OVERRIDE = {
    "gpus": "accelerators", "cpus": "cpus", "memory": "memory", "instance_type": "instance_type",
    "use_spot": "use_spot", "num_nodes": "num_nodes", "infra": "infra", "cloud": "infra",
    "region": "infra", "zone": "infra",
}  # fmt: skip


@dataclass(frozen=True)
class Overridden:
    text: str  # the task file with the overrides applied (the original text when there are none)
    fields: frozenset[str]  # task-file fields the command line replaced (`accelerators`, `num_nodes`, ...)
    ignored: bool  # overrides were given for a file of several tasks, and ignored as SkyPilot does


def apply_overrides(text: str, overrides: ResourceOverrides) -> Overridden:
    """The task file with `overrides` applied; the text is read as YAML (the caller has validated it)."""
    given = overrides.given()
    if not given:
        return Overridden(text, frozenset(), False)
    overrides.check()
    documents = [d.value for d in load_documents(text) if d.value is not None]  # bounded, as every read
    if len(documents) != 1 or not isinstance(documents[0], dict):
        return Overridden(text, frozenset(), True)
    task = dict(documents[0])
    if overrides.num_nodes is not None:
        task["num_nodes"] = overrides.num_nodes
    resources = dict(task.get("resources") or {})
    alternatives = [resources]
    for kind in ("any_of", "ordered"):
        if isinstance(resources.get(kind), list):
            resources[kind] = [dict(a) if isinstance(a, dict) else a for a in resources[kind]]
            alternatives.extend(a for a in resources[kind] if isinstance(a, dict))
    for alternative in alternatives:
        _override_one(alternative, overrides, is_base=alternative is resources)
    if resources:
        task["resources"] = resources
    replaced = frozenset(FIELD_OF_OVERRIDE[name] for name in given)
    return Overridden(yaml.safe_dump(task, sort_keys=False), replaced, False)


def _override_one(fields_: dict[str, Any], o: ResourceOverrides, *, is_base: bool) -> None:
    """Set the overridden fields on the shared resources, and on an alternative that writes its own."""
    for name, key in (("gpus", "accelerators"), ("cpus", "cpus"), ("memory", "memory"),
                      ("instance_type", "instance_type"), ("use_spot", "use_spot")):  # fmt: skip
        value = getattr(o, name)
        aliases = [a for a, canonical in FIELD_ALIASES.items() if canonical == key]
        written = key in fields_ or any(a in fields_ for a in aliases)
        if value is None or not (is_base or written):
            continue
        for alias in aliases:
            fields_.pop(alias, None)
        fields_[key] = value
    if o.infra is None and o.cloud is None and o.region is None and o.zone is None:
        return
    if not is_base and not any(k in fields_ for k in _LOCATION_KEYS):
        return
    cloud, region, zone = _location(fields_)
    if o.infra is not None:
        cloud, region, zone = parse_infra(o.infra)
    else:
        if o.cloud is not None and canonical_cloud(o.cloud) != cloud:
            cloud, region, zone = canonical_cloud(o.cloud), None, None  # another cloud: its own places
        region = o.region if o.region is not None else region
        zone = o.zone if o.zone is not None else zone
    for key in _LOCATION_KEYS:
        fields_.pop(key, None)
    parts = [cloud or "*", region or "*", zone or "*"]
    while len(parts) > 1 and parts[-1] == "*":
        parts.pop()
    if parts != ["*"]:
        fields_["infra"] = "/".join(parts)


def _location(fields_: dict[str, Any]) -> tuple[str | None, str | None, str | None]:
    if isinstance(fields_.get("infra"), str):
        return parse_infra(fields_["infra"])
    cloud = fields_.get("cloud")
    return (
        (canonical_cloud(cloud) if isinstance(cloud, str) else None),
        fields_.get("region"),
        fields_.get("zone"),
    )
