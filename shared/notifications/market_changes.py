"""A deadline job's market changes (spot <-> on-demand), read from its timeline. Pure: no I/O.

A deadline job's launch event (SETTING_UP, written by shared/jobs/deadline_launch.py and make_before_break.py)
names its market, place, the policy's reason and the cluster's price per hour. That event is kept in the
cluster record, never on the events stream, so the RUNNING event that follows it tells the change: the
`market` topic when the launch's market differs from the job's launch before it, or when the job's first
launch is on-demand (with a deadline skyless chooses the market, and spot is what the owner expects: starting
on on-demand is the change of plan they pay ~3x for). A plain spot job's launches name no market: its
recoveries are `preempted` and `recovered`, never told twice.

A make-before-break move's RECOVERING event says `planned_move` in its detail: it is not a preemption, and
the RUNNING that ends it is not a recovery; such a move is told as `market` alone (and not at all when it
only changes place).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from shared.notifications.events import JobFacts, Notification, TimelineRecord

MARKET_TOPIC = "market"
PLANNED_MOVE = (
    "planned_move"  # in a RECOVERING event's detail: the policy let the attempt go, nothing was lost
)
SPOKEN = {"spot": "spot", "on_demand": "on-demand"}


@dataclass(frozen=True)
class Stint:
    """One launch of a deadline job: the market, where, why, and the cluster's $/h (None: not known)."""

    market: str
    place: str
    reason: str
    hourly_price: float | None

    @property
    def spoken(self) -> str:
        return SPOKEN.get(self.market, self.market)

    def price(self) -> str:
        return "price unknown" if self.hourly_price is None else f"${self.hourly_price:.4f}/h"


@dataclass(frozen=True)
class MarketChange:
    before: Stint | None  # None: the job's first launch
    after: Stint

    @property
    def headline(self) -> str:
        if self.before is None:
            return f"started on {self.after.spoken}"
        return f"moved from {self.before.spoken} to {self.after.spoken}"

    def message(self) -> str:
        now = f"{self.after.spoken} on {self.after.place} ({self.after.price()})"
        if self.before is None:
            said = f"The deadline policy started it on {now}"
        else:
            was = f"{self.before.spoken} on {self.before.place} ({self.before.price()})"
            said = f"The deadline policy moved it from {was} to {now}"
        return f"{said}: {self.after.reason}."

    def lines(self) -> list[tuple[str, str]]:
        way = self.after.spoken if self.before is None else f"{self.before.spoken} -> {self.after.spoken}"
        price = self.after.price()
        if self.before is not None and self.before.hourly_price is not None:
            price += f" (was {self.before.price()})"
        return [("Market", way), ("Price now", price), ("Why", self.after.reason)]


def stint_of(detail: Mapping[str, Any]) -> Stint | None:
    market = detail.get("market")
    if market not in SPOKEN:
        return None
    price = detail.get("hourly_price")
    return Stint(
        market=str(market),
        place=str(detail.get("place") or "-"),
        reason=str(detail.get("policy_reason") or "no reason given"),
        hourly_price=None if price is None else float(price),
    )


def market_change(record: TimelineRecord, earlier: Sequence[TimelineRecord]) -> MarketChange | None:
    """The change a RUNNING event tells, or None. `earlier`: the job's state events before, oldest first.
    The market before is the last launch's that ran (a launch lost before it ran was never told)."""
    if record.kind != "state" or record.state != "RUNNING":
        return None
    launch: TimelineRecord | None = None
    ran = False
    for event in reversed(earlier):
        if launch is None:
            if event.state == "RUNNING":
                return None  # this launch was told at its first RUNNING
            if event.state == "SETTING_UP":
                launch = event
        elif event.state == "RUNNING":
            ran = True
        elif event.state == "SETTING_UP" and ran:
            before = stint_of(event.detail)
            after = stint_of(launch.detail)
            if before is None or after is None or before.market == after.market:
                return None  # an older launch that did not say its market: unknown
            return MarketChange(before, after)
    after = stint_of(launch.detail) if launch is not None else None
    return MarketChange(None, after) if after is not None and after.market == "on_demand" else None


def is_planned_move(record: TimelineRecord, earlier: Sequence[TimelineRecord]) -> bool:
    """Whether a RECOVERING event, or the RUNNING after it, is a policy's move rather than a preemption and
    its recovery: every RECOVERING since the last RUNNING was a planned move."""
    if record.kind != "state":
        return False
    if record.state == "RECOVERING":
        return bool(record.detail.get(PLANNED_MOVE))
    if record.state != "RUNNING":
        return False
    seen = False
    for event in reversed(earlier):
        if event.state == "RUNNING":
            break
        if event.state == "RECOVERING":
            if not event.detail.get(PLANNED_MOVE):
                return False
            seen = True
    return seen


def compose_market(change: MarketChange, record: TimelineRecord, facts: JobFacts) -> Notification:
    name = facts.name or facts.job_id
    return Notification(
        topic=MARKET_TOPIC,
        subject=f"skyless: {name} {change.headline}",
        event_message=change.message(),
        facts=facts,
        extra_lines=tuple(change.lines()),
    )
