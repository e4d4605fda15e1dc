"""The small value languages inside a SkyPilot task file, parsed the way SkyPilot reads them.

`"A100:8"`, `"4+"`, `"2x"`, `"256GB"`, `"10000-10010"`, `"aws/us-east-1/us-east-1a"`: each parser
returns plain values or raises ValueError with a message that says what was expected.
"""

from __future__ import annotations

import difflib
import re
from typing import Any, Protocol

# `cloud` enum of sky/utils/schemas.py (nightly 1.0.0.dev20261027), matched case-insensitively.
CLOUDS = (
    "aws", "azure", "gcp", "ibm", "lambda", "scp", "oci", "kubernetes", "runpod", "vast", "vsphere",
    "cudo", "fluidstack", "paperspace", "primeintellect", "do", "nebius", "ssh", "slurm", "hyperbolic",
    "seeweb", "shadeform", "yotta", "mithril", "verda",
)  # fmt: skip
CLOUD_ALIASES = {"k8s": "kubernetes"}
# Other names SkyPilot takes for a resources field (sky/resources.py RESOURCE_CONFIG_ALIASES): alias -> field.
FIELD_ALIASES = {"gpus": "accelerators"}
DISK_TIERS = ("low", "medium", "high", "ultra", "best")
NETWORK_TIERS = ("standard", "best")
RECOVERY_STRATEGIES = ("FAILOVER", "EAGER_NEXT_REGION")
STORES = ("S3", "GCS", "AZURE", "R2", "IBM", "OCI", "NEBIUS", "COREWEAVE", "VASTDATA", "HF", "VOLUME")
STORAGE_MODES = ("MOUNT", "COPY", "MOUNT_CACHED")
ENV_NAME = re.compile(r"^[a-zA-Z_][a-zA-Z0-9_]*$")
DURATION = re.compile(r"^\d+[smhdw]?$")
AUTOSTOP_DURATION = re.compile(r"^\d+[mhdw]?$")

_COUNT = re.compile(r"^\s*(\d+(?:\.\d*)?|\.\d+)\s*(\+?)\s*$")
_MEMORY = re.compile(r"^\s*(\d+(?:\.\d*)?|\.\d+)\s*([kmgtp]i?b?|b)?\s*([+x]?)\s*$", re.IGNORECASE)
_SIZE_GIB = {
    "": 1.0,
    "b": 1 / 1024**3,
    "k": 1 / 1024**2,
    "m": 1 / 1024,
    "g": 1.0,
    "t": 1024.0,
    "p": 1024.0**2,
}
_PORT_RANGE = re.compile(r"^\s*(\d+)\s*(?:-\s*(\d+)\s*)?$")


def canonical_cloud(name: str) -> str:
    """`AWS` → `aws`, `k8s` → `kubernetes`; ValueError naming the valid clouds otherwise."""
    lowered = name.strip().lower()
    lowered = CLOUD_ALIASES.get(lowered, lowered)
    if lowered not in CLOUDS:
        close = difflib.get_close_matches(lowered, CLOUDS, n=1)
        guess = f" (did you mean {close[0]!r}?)" if close else ""
        raise ValueError(f"unknown cloud {name!r}{guess}; expected one of {', '.join(CLOUDS)}")
    return lowered


def parse_infra(infra: str) -> tuple[str | None, str | None, str | None]:
    """`cloud[/region[/zone]]` with `*` as a wildcard; `kubernetes/<context>` keeps the context as region."""
    parts = [part.strip() for part in infra.strip().split("/")]
    if not parts[0] or any(not part for part in parts):
        raise ValueError(f"expected 'cloud[/region[/zone]]', found {infra!r}")
    cloud = None if parts[0] == "*" else canonical_cloud(parts[0])
    if cloud in ("kubernetes", "ssh", "slurm") and len(parts) > 1:
        return cloud, "/".join(parts[1:]), None
    if len(parts) > 3:
        raise ValueError(f"expected at most cloud/region/zone, found {infra!r}")
    region = parts[1] if len(parts) > 1 and parts[1] != "*" else None
    zone = parts[2] if len(parts) > 2 and parts[2] != "*" else None
    return cloud, region, zone


def parse_accelerators(value: Any) -> list[tuple[str, float]]:
    """Every accelerator alternative as (name, count). `None` → []; names are not canonicalised here."""
    if value is None:
        return []
    if isinstance(value, str):
        return [_parse_accelerator_string(value)]
    if isinstance(value, dict):
        if not value:
            raise ValueError("expected at least one accelerator, found an empty mapping")
        return [_accelerator_entry(name, count) for name, count in value.items()]
    if isinstance(value, list):
        if not value:
            raise ValueError("expected at least one accelerator, found an empty list")
        pairs = []
        for item in value:
            if isinstance(item, str):
                pairs.append(_parse_accelerator_string(item))
            elif isinstance(item, dict) and len(item) == 1:
                pairs.append(_accelerator_entry(*next(iter(item.items()))))
            else:
                raise ValueError(f"expected list items like 'A100:8' or {{A100: 8}}, found item {item!r}")
        return pairs
    raise ValueError(
        "expected '<name>[:<count>]' (e.g. 'A100:8'), a mapping like {A100: 8, V100: null} "
        f"or a list of such entries, found {value!r}"
    )


def _accelerator_entry(name: Any, count: Any) -> tuple[str, float]:
    # `{A100:1, V100:2}` in YAML flow style is the keys "A100:1", "V100:2" with null counts.
    if not isinstance(name, str) or not name.strip():
        raise ValueError(f"expected an accelerator name, found {name!r}")
    if count is None and ":" in name:
        return _parse_accelerator_string(name)
    return name.strip(), _accelerator_count(count, name)


def _parse_accelerator_string(text: str) -> tuple[str, float]:
    error = f"expected '<name>' or '<name>:<count>' (e.g. 'A100:8'), found {text!r}"
    parts = text.split(":")
    if len(parts) > 2 or not parts[0].strip():
        raise ValueError(error)
    if len(parts) == 1:
        return parts[0].strip(), 1.0
    try:
        count = float(parts[1])
    except ValueError:
        raise ValueError(error) from None
    if not count > 0 or count != count or count == float("inf"):
        raise ValueError(f"accelerator count must be a positive number, found {text!r}")
    return parts[0].strip(), count


def _accelerator_count(count: Any, name: Any) -> float:
    if count is None:
        return 1.0
    if isinstance(count, bool) or not isinstance(count, int | float) or not count > 0:
        raise ValueError(f"accelerator {name!r}: expected a positive count or null, found {count!r}")
    try:
        return float(count)
    except OverflowError:
        raise ValueError(f"accelerator {name!r}: the count is too large") from None


def parse_cpus(value: Any) -> tuple[float | None, bool]:
    """`"4+"` → (4.0, True); `"4"`, `4` → (4.0, False); None → (None, True)."""
    if value is None:
        return None, True
    if isinstance(value, bool) or not isinstance(value, str | int | float):
        raise ValueError(f"expected a number or a string '<number>[+]', found {value!r}")
    match = _COUNT.match(str(value))
    if not match or not float(match.group(1)) > 0:
        raise ValueError(f"expected a positive number or a string '<number>+', found {value!r}")
    return float(match.group(1)), match.group(2) == "+"


def parse_memory(value: Any) -> tuple[float | None, bool, bool]:
    """(amount, at_least, relative): GiB for `"32"`, `"32+"`, `"64GB"`; a factor of vCPUs for `"2x"`."""
    if value is None:
        return None, True, False
    if isinstance(value, bool) or not isinstance(value, str | int | float):
        raise ValueError(f"expected a number or a string '<number>[+|x]' (GiB), found {value!r}")
    match = _MEMORY.match(str(value))
    if not match or not float(match.group(1)) > 0:
        raise ValueError(f"expected a positive amount like '32', '32+', '64GB' or '4x', found {value!r}")
    amount, unit, suffix = float(match.group(1)), (match.group(2) or ""), match.group(3)
    if suffix == "x":
        if unit:
            raise ValueError(f"a memory ratio '<number>x' takes no unit, found {value!r}")
        return amount, True, True
    return amount * _SIZE_GIB[unit[:1].lower()], suffix == "+", False


def parse_size_gib(value: Any) -> float:
    """A disk size: an integer of GB, or a string such as '256GB', '1Ti', '500'."""
    if isinstance(value, bool) or not isinstance(value, str | int | float):
        raise ValueError(f"expected a size such as 256 or '256GB', found {value!r}")
    match = _MEMORY.match(str(value))
    if not match or match.group(3) or not float(match.group(1)) > 0:
        raise ValueError(f"expected a positive size such as 256, '256GB' or '1Ti', found {value!r}")
    return float(match.group(1)) * _SIZE_GIB[(match.group(2) or "")[:1].lower()]


def parse_ports(value: Any) -> list[tuple[int, int]]:
    """Port ranges (first, last), inclusive: 8080, '8080', '10000-10010', or a list of those."""
    if value is None:
        return []
    items = value if isinstance(value, list) else [value]
    ranges = []
    for item in items:
        if isinstance(item, bool) or not isinstance(item, str | int):
            raise ValueError(
                f"expected a port, a range like '10000-10010' or a list of those, found {item!r}"
            )
        match = _PORT_RANGE.match(str(item))
        if not match:
            raise ValueError(f"expected a port or a range like '10000-10010', found {item!r}")
        first = int(match.group(1))
        last = int(match.group(2) or first)
        if not 1 <= first <= last <= 65535:
            raise ValueError(f"ports must be 1-65535 with first <= last, found {item!r}")
        ranges.append((first, last))
    return ranges


def substitute_env_vars(value: Any, envs: dict[str, str]) -> Any:
    """`$VAR` / `${VAR}` replaced from `envs` in every string of `value` (keys too); unknown names kept."""
    if isinstance(value, str):
        return _ENV_REFERENCE.sub(lambda m: envs.get(m.group(1) or m.group(2), m.group(0)), value)
    if isinstance(value, dict):
        return {substitute_env_vars(k, envs): substitute_env_vars(v, envs) for k, v in value.items()}
    if isinstance(value, list):
        return [substitute_env_vars(item, envs) for item in value]
    return value


_ENV_REFERENCE = re.compile(r"\$\{([a-zA-Z_][a-zA-Z0-9_]*)\}|\$([a-zA-Z_][a-zA-Z0-9_]*)")


class _ResourceValues(Protocol):
    infra: str | None
    cloud: str | None
    region: str | None
    zone: str | None
    accelerators: Any
    disk_size: Any
    ports: Any


class ResourceReadings:
    """What a set of resources means, read from its fields (the task models and the stored reader)."""

    __slots__ = ()

    def location(self: _ResourceValues) -> tuple[str | None, str | None, str | None]:
        """(cloud, region, zone), from `infra` or from the separate fields."""
        if self.infra is not None:
            return parse_infra(self.infra)
        return self.cloud, self.region, self.zone

    def accelerator_alternatives(self: _ResourceValues) -> list[tuple[str, float]]:
        return parse_accelerators(self.accelerators)

    def disk_size_gib(self: _ResourceValues) -> float | None:
        return None if self.disk_size is None else parse_size_gib(self.disk_size)

    def port_ranges(self: _ResourceValues) -> list[tuple[int, int]]:
        return parse_ports(self.ports)
