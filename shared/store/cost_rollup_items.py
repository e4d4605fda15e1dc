"""Cost rollups on DynamoDB (shared/store/cost_rollups.py says what they hold): the items, the ADDs that go
into a cluster's end-of-attempt transaction, and the range queries a report makes."""

from __future__ import annotations

from functools import cache

from pynamodb.attributes import NumberAttribute, UnicodeAttribute
from pynamodb.expressions.update import Action
from pynamodb.models import Model
from pynamodb.transactions import TransactWrite

from shared.config import Settings
from shared.store.cost_rollups import (
    COUNTERS,
    DONE_PREFIX,
    PLACES,
    CostPiece,
    piece_of_item,
    rollup_keys,
    rollup_partitions,
)
from shared.store.models import _bind


class DecimalNumberAttribute(NumberAttribute):
    """A float written in plain decimal notation, to PLACES places (shared/store/cost_rollups.py). pynamodb
    writes 5e-06, which DynamoDB takes but moto's ADD cannot add to (it reads a number without a "." as an
    int), and moto stores a new number below 1e-6 as 5E-7, which no later ADD can read: on the local runtime
    a very short attempt's teardown transaction was refused for ever. Every value written is 0 or at least
    1e-6, and so is every sum."""

    def serialize(self, value: float) -> str:
        if isinstance(value, float):
            text = f"{value:.{PLACES}f}".rstrip("0").rstrip(".")
            return "0" if text in ("", "-0") else text
        return super().serialize(value)


class CostRollupItem(Model):
    """One (day, owner, cloud) copy of the rollup, in the events table (no `expires_at`: it never expires)."""

    class Meta:
        table_name = "unbound-events"

    job_id = UnicodeAttribute(hash_key=True)  # the partition: costs#all#<month> | costs#user#<owner>#<month>
    at = UnicodeAttribute(range_key=True)
    cost = DecimalNumberAttribute(null=True)
    on_demand_cost = DecimalNumberAttribute(null=True)
    spot_cost = DecimalNumberAttribute(null=True)
    hours = DecimalNumberAttribute(null=True)
    attempts = NumberAttribute(null=True)
    jobs = NumberAttribute(null=True)
    expires_at = NumberAttribute(null=True)  # only on the markers of long attempts' earlier days


@cache
def rollup_model(settings: Settings) -> type[CostRollupItem]:
    return _bind(CostRollupItem, settings.table_name("events"), settings)  # type: ignore[return-value]


def add_pieces(tx: TransactWrite, model: type[CostRollupItem], pieces: list[CostPiece]) -> None:
    """ADD each piece to its two copies, inside the caller's transaction."""
    for piece in pieces:
        values = {name: round(value, PLACES) for name, value in piece.counters().items()}
        values = {name: value for name, value in values.items() if value}
        for partition, sort_key in rollup_keys(piece):
            actions: list[Action] = [getattr(model, name).add(value) for name, value in values.items()]
            if actions:
                tx.update(model(job_id=partition, at=sort_key), actions)


def marker(model: type[CostRollupItem], cluster_id: str, first_day: str, expires_at: int) -> CostRollupItem:
    return model(job_id=DONE_PREFIX + cluster_id, at=first_day, expires_at=expires_at)


def read_pieces(
    settings: Settings, first_day: str, last_day: str, owner: str | None
) -> tuple[list[CostPiece], int]:
    """The rollup pieces of the days (every user's, or `owner`'s) and the number of query requests made."""
    model = rollup_model(settings)
    pieces, requests = [], 0
    for partition, low, high in rollup_partitions(first_day, last_day, owner):
        result = model.query(partition, range_key_condition=model.at.between(low, high))
        for item in result:
            values = {name: float(getattr(item, name) or 0) for name in COUNTERS}
            pieces.append(piece_of_item(partition, item.at, values))
        requests += 1
    return pieces, requests
