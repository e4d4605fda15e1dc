"""A team's contracts with its clouds, declared once in config: discounts off list price, reserved capacity.

Read from the `contracts:` section of a config file (SkyPilot's `~/.sky/config.yaml`, skyless's own
`~/.skyless/config.yaml`, or a deployment's or team's contracts file), with SkyPilot's own reservation
keys honoured beside it:

```yaml
contracts:
  discounts:                      # most specific match wins: cloud < region < family < region + family
    - {cloud: aws, family: p4d, on_demand: 32, spot: 10}     # percent off list
  reservations:
    - id: cr-0123456789abcdef0    # AWS capacity reservation or block, GCP reservation, Azure group id
      cloud: aws
      zone: us-east-1a            # aws/gcp reservations are zonal; azure ones regional (`region:`)
      instance_type: p4d.24xlarge
      count: 8
      kind: capacity-block        # aws: capacity-reservation (default) | capacity-block
      start: 2026-11-01T00:00Z    # the term; optional
      end: 2026-12-01T00:00Z
      hourly_price: 21.95         # paid per node-hour, used or not (cost-report's idle hours); optional
aws:
  specific_reservations: [cr-0123456789abcdef0]   # SkyPilot: only these targeted reservations are used
  prioritize_reservations: true                    # SkyPilot: prefer reservations (skyless always does)
```

SkyPilot asks each cloud's API what a reservation holds; skyless plans without credentials, so every id in
`<cloud>.specific_reservations` must be described under `contracts.reservations`. Pure: no I/O.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from shared.errors import UserError
from shared.optimizer.plan import instance_family_of

RESERVATION_KINDS: dict[str, tuple[str, ...]] = {
    "aws": ("capacity-reservation", "capacity-block"),
    "gcp": ("specific-reservation",),
    "azure": ("capacity-reservation",),
}
SKYPILOT_RESERVATION_CLOUDS = ("aws", "gcp")  # clouds whose SkyPilot config has `specific_reservations`
DISCOUNT_KEYS = frozenset({"cloud", "region", "family", "on_demand", "spot"})
RESERVATION_KEYS = frozenset(
    {"id", "cloud", "region", "zone", "instance_type", "count", "kind", "start", "end", "hourly_price"}
)


@dataclass(frozen=True)
class Discount:
    """Percent off list price for the offerings it covers (None widens: any region, any family)."""

    cloud: str
    region: str | None = None
    family: str | None = None
    on_demand: float = 0.0
    spot: float = 0.0

    def covers(self, cloud: str, region: str, instance_type: str) -> bool:
        return (
            cloud == self.cloud
            and (self.region is None or region == self.region)
            and (self.family is None or instance_family_of(instance_type) == self.family)
        )

    @property
    def specificity(self) -> int:
        return (self.region is not None) + 2 * (self.family is not None)

    def percent(self, spot: bool) -> float:
        return self.spot if spot else self.on_demand

    def scope(self) -> str:
        return " ".join(p for p in (self.cloud, self.family, self.region) if p)


@dataclass(frozen=True)
class Reservation:
    """Capacity already paid for: `count` nodes of one instance type in one place for a term."""

    id: str
    cloud: str
    region: str
    zone: str | None
    instance_type: str
    count: int
    kind: str
    start: datetime | None = None
    end: datetime | None = None
    hourly_price: float | None = None  # per node-hour, paid whether used or not

    def active(self, at: datetime | None) -> bool:
        if at is None:
            return True
        return (self.start is None or self.start <= at) and (self.end is None or at < self.end)

    @property
    def place(self) -> str:
        return self.zone or self.region


@dataclass(frozen=True)
class Contracts:
    discounts: tuple[Discount, ...] = ()
    reservations: tuple[Reservation, ...] = ()
    source: str = ""

    def __bool__(self) -> bool:
        return bool(self.discounts or self.reservations)

    def discount_for(self, cloud: str, region: str, instance_type: str) -> Discount | None:
        """The most specific discount covering an offering, the last declared of equals (a team's over the
        deployment's); None at list price."""
        found = [d for d in self.discounts if d.covers(cloud, region, instance_type)]
        return max(reversed(found), key=lambda d: d.specificity) if found else None


def merged_contracts(*parts: Contracts) -> Contracts:
    """Several declarations in order (the deployment's, then a team's): every discount, later ones winning
    ties, and every reservation once (its first declaration)."""
    reservations: dict[str, Reservation] = {}
    for part in parts:
        for r in part.reservations:
            reservations.setdefault(r.id, r)
    return Contracts(
        tuple(d for part in parts for d in part.discounts),
        tuple(reservations.values()),
        " + ".join(dict.fromkeys(p.source for p in parts if p.source)),
    )


def contracts_from_config(values: Mapping[str, Any], where: str) -> Contracts:
    """The contracts a merged config declares. A bad value is a UserError naming the key and `where`."""
    section = values.get("contracts")
    if section is None:
        section = {}
    if not isinstance(section, Mapping):
        raise UserError("must be a mapping with discounts and reservations", file=where, field="contracts")
    unknown = sorted(set(section) - {"discounts", "reservations"})
    if unknown:
        raise UserError(
            f"unknown key {unknown[0]!r}",
            file=where,
            field="contracts",
            hint="use discounts and reservations",
        )
    discounts = tuple(
        _discount(item, f"contracts.discounts[{i}]", where)
        for i, item in enumerate(_list(section.get("discounts"), "contracts.discounts", where))
    )
    reservations = tuple(
        _reservation(item, f"contracts.reservations[{i}]", where)
        for i, item in enumerate(_list(section.get("reservations"), "contracts.reservations", where))
    )
    _check_unique(reservations, where)
    reservations = _honour_specific_reservations(values, reservations, where)
    return Contracts(discounts, reservations, where)


def _honour_specific_reservations(
    values: Mapping[str, Any], reservations: tuple[Reservation, ...], where: str
) -> tuple[Reservation, ...]:
    """SkyPilot's `<cloud>.specific_reservations`: only the listed reservations of that cloud are used."""
    kept = list(reservations)
    for cloud in SKYPILOT_RESERVATION_CLOUDS:
        block = values.get(cloud)
        if not isinstance(block, Mapping):
            continue
        prioritize = block.get("prioritize_reservations")
        if prioritize is not None and not isinstance(prioritize, bool):
            raise UserError("must be true or false", file=where, field=f"{cloud}.prioritize_reservations")
        listed = block.get("specific_reservations")
        if listed is None:
            continue
        key = f"{cloud}.specific_reservations"
        if not isinstance(listed, list) or not all(isinstance(x, str) and x for x in listed):
            raise UserError("must be a list of reservation ids", file=where, field=key)
        declared = {r.id for r in reservations if r.cloud == cloud}
        for name in listed:
            if name not in declared:
                raise UserError(
                    f"{name!r} is not described under contracts.reservations",
                    file=where,
                    field=key,
                    hint="skyless plans without asking the cloud: give its cloud, zone (or region), "
                    "instance_type and count there",
                )
        kept = [r for r in kept if r.cloud != cloud or r.id in listed]
    return tuple(kept)


def _discount(item: Any, key: str, where: str) -> Discount:
    data = _mapping(item, key, where, DISCOUNT_KEYS)
    cloud = _cloud(data, key, where)
    on_demand = _percent(data.get("on_demand", 0), f"{key}.on_demand", where)
    spot = _percent(data.get("spot", 0), f"{key}.spot", where)
    if not on_demand and not spot:
        raise UserError("gives neither on_demand nor spot percent off", file=where, field=key)
    return Discount(
        cloud=cloud,
        region=_text(data.get("region"), f"{key}.region", where),
        family=_text(data.get("family"), f"{key}.family", where),
        on_demand=on_demand,
        spot=spot,
    )


def _reservation(item: Any, key: str, where: str) -> Reservation:
    data = _mapping(item, key, where, RESERVATION_KEYS)
    cloud = _cloud(data, key, where)
    if cloud not in RESERVATION_KINDS:
        raise UserError(
            f"skyless targets reservations on {', '.join(RESERVATION_KINDS)}, not {cloud}",
            file=where,
            field=f"{key}.cloud",
        )
    ident = _name(data.get("id"), f"{key}.id", where)
    instance_type = _name(data.get("instance_type"), f"{key}.instance_type", where)
    zone = _text(data.get("zone"), f"{key}.zone", where)
    region = _text(data.get("region"), f"{key}.region", where)
    if cloud != "azure" and zone is None:
        raise UserError(f"is required: {cloud} reservations are zonal", file=where, field=f"{key}.zone")
    if zone is not None:
        derived = _region_of(cloud, zone)
        if region is not None and region != derived:
            raise UserError(f"{zone} is not in region {region}", file=where, field=f"{key}.zone")
        region = derived
    if region is None:
        raise UserError("is required", file=where, field=f"{key}.region")
    count = data.get("count")
    if isinstance(count, bool) or not isinstance(count, int) or count < 1:
        raise UserError(f"must be a whole number of nodes, 1 or more, not {count!r}", file=where,
                        field=f"{key}.count")  # fmt: skip
    kinds = RESERVATION_KINDS[cloud]
    kind = data.get("kind", kinds[0])
    if kind not in kinds:
        raise UserError(f"{kind!r} is not a {cloud} reservation kind", file=where, field=f"{key}.kind",
                        hint=f"use {' or '.join(kinds)}")  # fmt: skip
    start = _time(data.get("start"), f"{key}.start", where)
    end = _time(data.get("end"), f"{key}.end", where)
    if start is not None and end is not None and end <= start:
        raise UserError("must be after start", file=where, field=f"{key}.end")
    price = data.get("hourly_price")
    if price is not None and (isinstance(price, bool) or not isinstance(price, int | float) or price < 0):
        raise UserError(
            f"must be dollars per node-hour, not {price!r}", file=where, field=f"{key}.hourly_price"
        )
    return Reservation(
        ident, cloud, region, zone, instance_type, count, str(kind), start, end,
        None if price is None else float(price),
    )  # fmt: skip


def _region_of(cloud: str, zone: str) -> str:
    if cloud == "aws":
        return re.sub(r"[a-z]$", "", zone)
    return zone.rsplit("-", 1)[0]


def _check_unique(reservations: Sequence[Reservation], where: str) -> None:
    seen: set[str] = set()
    for i, r in enumerate(reservations):
        if r.id in seen:
            raise UserError(
                f"{r.id!r} is declared twice", file=where, field=f"contracts.reservations[{i}].id"
            )
        seen.add(r.id)


def _list(value: Any, key: str, where: str) -> list[Any]:
    if value is None:
        return []
    if not isinstance(value, list):
        raise UserError("must be a list", file=where, field=key)
    return value


def _mapping(item: Any, key: str, where: str, allowed: frozenset[str]) -> Mapping[str, Any]:
    if not isinstance(item, Mapping):
        raise UserError("must be a mapping", file=where, field=key)
    unknown = sorted(set(item) - allowed)
    if unknown:
        raise UserError(f"unknown key {unknown[0]!r}", file=where, field=key,
                        hint=f"use {', '.join(sorted(allowed))}")  # fmt: skip
    return item


def _cloud(data: Mapping[str, Any], key: str, where: str) -> str:
    return _name(data.get("cloud"), f"{key}.cloud", where).lower()


def _name(value: Any, key: str, where: str) -> str:
    if value is None:
        raise UserError("is required", file=where, field=key)
    text = _text(value, key, where)
    assert text is not None
    return text


def _text(value: Any, key: str, where: str) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str) or not value.strip():
        raise UserError(f"must be a name, not {value!r}", file=where, field=key)
    return value.strip()


def _percent(value: Any, key: str, where: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 <= value < 100:
        raise UserError(f"must be a percent off list, 0 to below 100, not {value!r}", file=where, field=key)
    return float(value)


def _time(value: Any, key: str, where: str) -> datetime | None:
    if value is None:
        return None
    if isinstance(value, datetime):
        return value if value.tzinfo else value.replace(tzinfo=UTC)
    try:
        parsed = datetime.fromisoformat(str(value).replace("Z", "+00:00"))
    except ValueError:
        raise UserError(
            f"must be a time like 2026-12-01T00:00Z, not {value!r}", file=where, field=key
        ) from None
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)
