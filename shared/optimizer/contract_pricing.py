"""Plan at what the team really pays: negotiated discounts re-price the catalog, free reserved capacity costs
nothing more (it is already paid), and every plan says which of the two it used.

- `team_catalog` is the catalog at the team's prices (kept per catalog and discounts, so its index is built
  once per process, like the list catalog's);
- `reserved_candidates` are a task's places inside a reservation with enough free nodes (free = count minus
  the nodes live jobs hold there now, `TeamPrices.in_use`), priced at $0/h and carrying the reservation's id
  for the launch; on-demand only (SkyPilot's rule: reservations do not take spot requests);
- `contract_notes` are the plan's sentences: "reserved: 6 of 8 free", "negotiated -32 %" (with a minus sign).
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from itertools import islice

from shared.catalog.model import Catalog
from shared.catalog.offering import Offering
from shared.optimizer.contract_terms import Contracts, Discount, Reservation
from shared.optimizer.index import HasOfferings, clouds_asked, index_for
from shared.optimizer.plan import Block, Candidate
from shared.optimizer.single_task import candidate_from, ranked_offerings, requests_of
from shared.task.requests import ResourceChoice

KEPT_CATALOGS = 8
MAX_SCANNED = 2000  # offerings of a reservation's zone a task is checked against: its machine is among them


@dataclass(frozen=True)
class TeamPrices:
    """The contracts a plan honours, what live jobs hold of each reservation now, and the time (terms)."""

    contracts: Contracts
    in_use: Mapping[str, int] = field(default_factory=dict)  # reservation id -> nodes of live jobs in it
    at: datetime | None = None  # None: every reservation's term counts as running

    def free(self, reservation: Reservation) -> int:
        if not reservation.active(self.at):
            return 0
        return max(reservation.count - int(self.in_use.get(reservation.id, 0)), 0)


_priced: OrderedDict[tuple[int, tuple[Discount, ...]], tuple[HasOfferings, Catalog]] = OrderedDict()
_lock = threading.Lock()


def team_catalog(catalog: HasOfferings, contracts: Contracts) -> HasOfferings:
    """`catalog` with every discounted offering at the team's price, a cloud's rows re-priced when a plan
    first reads that cloud; the same object for the same catalog and terms."""
    if not contracts.discounts:
        return catalog
    key = (id(catalog), contracts.discounts)
    with _lock:
        found = _priced.get(key)
        if found is not None and found[0] is catalog:  # the list catalog is kept, so its id is not reused
            _priced.move_to_end(key)
            return found[1]
    priced = Catalog(per_cloud={cloud: _reprice(catalog, cloud, contracts) for cloud in _clouds(catalog)})
    with _lock:
        _priced[key] = (catalog, priced)
        while len(_priced) > KEPT_CATALOGS:
            _priced.popitem(last=False)
    return priced


def _clouds(catalog: HasOfferings) -> tuple[str, ...]:
    known = getattr(catalog, "known_clouds", None)
    return tuple(known()) if known is not None else tuple(sorted({o.cloud for o in catalog.offerings}))


def _reprice(catalog: HasOfferings, cloud: str, contracts: Contracts) -> Callable[[], list[Offering]]:
    def load() -> list[Offering]:
        offerings_of = getattr(catalog, "offerings_of", None)
        rows = (
            offerings_of(cloud)
            if offerings_of is not None
            else [o for o in catalog.offerings if o.cloud == cloud]
        )
        if not any(d.cloud == cloud for d in contracts.discounts):
            return list(rows)
        return [_discounted(o, contracts) for o in rows]

    return load


def _discounted(o: Offering, contracts: Contracts) -> Offering:
    discount = contracts.discount_for(o.cloud, o.region, o.instance_type)
    if discount is None:
        return o
    spot = None if o.spot_price is None else o.spot_price * (1 - discount.spot / 100)
    return o._replace(price=o.price * (1 - discount.on_demand / 100), spot_price=spot)


def with_list_prices(candidates: Sequence[Candidate], contracts: Contracts) -> list[Candidate]:
    """Each candidate priced off a discount says what it would cost at list price."""
    marked = []
    for c in candidates:
        discount = contracts.discount_for(c.cloud, c.region, c.instance_type)
        percent = 0.0 if discount is None else discount.percent(c.use_spot)
        if percent and c.list_price is None and c.reservation is None:
            c = replace(c, list_price=c.hourly_price / (1 - percent / 100))
        marked.append(c)
    return marked


def reserved_candidates(
    choice: ResourceChoice,
    num_nodes: int,
    catalog: HasOfferings,
    prices: TeamPrices,
    *,
    enabled_clouds: Collection[str] | None = None,
    blocklist: Sequence[Block] = (),
    hours: float = 1.0,
) -> list[Candidate]:
    """The task's places inside reservations with `num_nodes` free, most free first, at $0/h."""
    found: list[tuple[int, Candidate]] = []
    for reservation in prices.contracts.reservations:
        free = prices.free(reservation)
        if free < num_nodes:
            continue
        fit = _fitting_offering(choice, num_nodes, catalog, reservation, enabled_clouds, blocklist, hours)
        if fit is not None:
            reserved = replace(fit, hourly_price=0.0, estimated_cost=0.0, list_price=fit.hourly_price,
                               reservation=reservation.id, reservation_kind=reservation.kind)  # fmt: skip
            found.append((free, reserved))
    found.sort(key=lambda item: -item[0])
    return [c for _, c in found]


def _fitting_offering(
    choice: ResourceChoice,
    num_nodes: int,
    catalog: HasOfferings,
    reservation: Reservation,
    enabled_clouds: Collection[str] | None,
    blocklist: Sequence[Block],
    hours: float,
) -> Candidate | None:
    """The reservation's machine as the task would get it on demand, if the task accepts that machine
    where the reservation is: a CPU task is not put on a reserved GPU machine because it costs nothing."""
    pinned = []
    for request in requests_of(choice):
        if request.use_spot:
            continue
        if any(
            mine is not None and mine != theirs
            for mine, theirs in (
                (request.cloud, reservation.cloud),
                (request.region, reservation.region),
                (request.zone, reservation.zone),
                (request.instance_type, reservation.instance_type),
            )
        ):
            continue
        pinned.append(
            replace(request, cloud=reservation.cloud, region=reservation.region, zone=reservation.zone)
        )
    if not pinned:
        return None
    index = index_for(catalog, clouds_asked(pinned, enabled_clouds))
    ranked = ranked_offerings(
        pinned, False, index, enabled_clouds, blocklist, "cost", num_nodes, catalog=catalog
    )
    for entry, spot, factor in islice(ranked, MAX_SCANNED):
        if entry[6].instance_type == reservation.instance_type:
            return candidate_from(entry, spot, num_nodes, hours * factor)
    return None


def contract_notes(label: str | None, candidates: Sequence[Candidate], prices: TeamPrices) -> list[str]:
    """What the team's contracts did to one task's plan, in words."""
    head = f"{label}: " if label else ""
    chosen = candidates[0]
    notes: list[str] = []
    by_id = {r.id: r for r in prices.contracts.reservations}
    if chosen.reservation is not None:
        r = by_id[chosen.reservation]
        notes.append(
            f"{head}reserved: {prices.free(r)} of {r.count} free in {r.id} ({r.cloud} {r.instance_type} in "
            f"{r.place}): priced at $0.00/h, already paid (list ${chosen.list_price or 0:.2f}/h)"
        )
    for r in prices.contracts.reservations:
        if r.id != chosen.reservation and any(_same_machine(c, r) and not c.use_spot for c in candidates):
            free = prices.free(r)
            why = (
                "outside its term"
                if not r.active(prices.at)
                else (
                    f"too few for {chosen.num_nodes} node(s)"
                    if free < chosen.num_nodes
                    else "another place won"
                )
            )
            notes.append(
                f"{head}reserved: {free} of {r.count} free in {r.id} ({r.instance_type} in "
                f"{r.place}): not used, {why}"
            )
    if chosen.list_price is not None and chosen.reservation is None and chosen.list_price > 0:
        off = 100 * (1 - chosen.hourly_price / chosen.list_price)
        discount = prices.contracts.discount_for(chosen.cloud, chosen.region, chosen.instance_type)
        scope = f" on {discount.scope()}" if discount else ""
        notes.append(
            f"{head}negotiated \u2212{off:.0f} %{scope}: ${chosen.hourly_price:.2f}/h instead of "
            f"${chosen.list_price:.2f}/h list"
        )
    return notes


def _same_machine(c: Candidate, r: Reservation) -> bool:
    return (c.cloud, c.region, c.instance_type) == (r.cloud, r.region, r.instance_type) and (
        r.zone is None or c.zone == r.zone
    )
