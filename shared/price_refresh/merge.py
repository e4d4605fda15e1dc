"""Apply a provider's prices to the catalog's rows of that cloud. Pure: no I/O.

A row's price is the newest one known: a quote from this refresh, else the previous version's price for
the same row, else the base (built-in/imported) price. A row is (cloud, region, zone, instance type)
and, where a host type is sold with several accelerators (GCP's N1 hosts), the accelerator and count.
Quotes for rows the catalog does not describe are counted and dropped: a price never invents hardware.
Offerings an API describes itself (Lambda Cloud) replace the row with the same key, or are added.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from shared.catalog.offering import Offering
from shared.price_refresh.quotes import PriceQuote, ProviderPrices

Key = tuple[str, str, str | None, str, str | None, float]


def offering_key(o: Offering) -> Key:
    return (o.cloud, o.region, o.zone, o.instance_type, o.accelerator, float(o.accelerator_count))


@dataclass(frozen=True)
class MergeStats:
    rows: int  # rows of the cloud after the merge
    repriced: int  # rows whose price or spot price this refresh set
    unmatched: int  # quotes naming a place/type the catalog does not describe
    added: int  # rows added from an API that describes hardware


def _gpus(o: Offering) -> tuple[str | None, float]:
    return (o.accelerator, float(o.accelerator_count))


def _valid(price: float | None) -> bool:
    return price is not None and price > 0


def _with_prices(o: Offering, price: float | None, spot: float | None) -> Offering:
    new_price = price if _valid(price) else o.price
    new_spot = spot if _valid(spot) else o.spot_price
    if new_price == o.price and new_spot == o.spot_price:
        return o
    return o._replace(price=new_price, spot_price=new_spot)  # type: ignore[arg-type]


def carry_previous_prices(base: Sequence[Offering], previous: Iterable[Offering]) -> list[Offering]:
    """Base rows with the prices a previous version had for the same key (hardware stays the base's)."""
    earlier = {offering_key(o): o for o in previous}
    carried = []
    for o in base:
        old = earlier.get(offering_key(o))
        carried.append(_with_prices(o, old.price, old.spot_price) if old is not None else o)
    return carried


def apply_prices(rows: Sequence[Offering], prices: ProviderPrices) -> tuple[list[Offering], MergeStats]:
    """`rows` (one cloud's) with `prices` applied: region-wide quotes first, then zone quotes."""
    by_type: dict[tuple[str, str], list[int]] = {}
    by_key: dict[Key, int] = {}
    for i, o in enumerate(rows):
        by_type.setdefault((o.region, o.instance_type), []).append(i)
        by_key[offering_key(o)] = i
    merged = list(rows)
    touched: set[int] = set()
    unmatched = 0
    ordered: list[PriceQuote] = sorted(prices.quotes, key=lambda q: q.zone is not None)
    for q in ordered:
        targets = by_type.get((q.region, q.instance_type), [])
        if q.zone is not None:
            targets = [i for i in targets if rows[i].zone == q.zone]
        if q.gpus is not None:
            wanted = (q.gpus[0], float(q.gpus[1]))
            targets = [i for i in targets if _gpus(rows[i]) == wanted]
        if not targets:
            unmatched += 1
            continue
        for i in targets:
            merged[i] = _with_prices(merged[i], q.price, q.spot_price)
            touched.add(i)
    added = 0
    for o in prices.described:
        if o.cloud != prices.cloud or not _valid(o.price):
            continue
        at = by_key.get(offering_key(o))
        if at is None:
            by_key[offering_key(o)] = len(merged)
            merged.append(o)
            added += 1
        else:
            merged[at] = o
            touched.add(at)
    repriced = sum(1 for i in touched if merged[i] != rows[i])
    return merged, MergeStats(rows=len(merged), repriced=repriced, unmatched=unmatched, added=added)
