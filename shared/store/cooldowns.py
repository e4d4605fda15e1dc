"""Where spot preemptions are kept for the cool-down policy (shared/optimizer/cooling.py): one small record.

The record is one item of the clusters table, key `spot-preemptions`. Each zone that had a preemption has
one attribute, `z#<cloud>/<region>/<zone>`, a string set of `"<epoch seconds>#<cluster id>"`. A preemption
is added with DynamoDB's ADD (atomic, never a read-modify-write, so concurrent preemptions never conflict),
inside the transaction that moves the job to RECOVERING: the job moves once per preempted cluster, so a
preemption reported twice (the cloud's event and the agent's notice) is counted once. Planning reads the
whole record in one GetItem; entries older than the policy's horizon are removed with DELETE (also atomic).

Spot launches refused for capacity (any job's) are kept the same way under `r#<cloud>/<region>/<zone>`,
`"<epoch seconds>#<job id>-<attempt>"`, each added by one UpdateItem ADD when the launch is refused.
"""

from __future__ import annotations

import time
from functools import cache
from typing import Any

from pynamodb.attributes import UnicodeAttribute
from pynamodb.expressions.operand import Path, Value
from pynamodb.expressions.update import Action
from pynamodb.models import Model

from shared.config import Settings
from shared.optimizer.cooling import Cooling, cooling_places, forgotten, place_of
from shared.store.models import SharedSessionConnection

RECORD_KEY = "spot-preemptions"
ATTRIBUTE_PREFIX = "z#"
REFUSAL_PREFIX = "r#"


class PreemptionRecord(Model):
    class Meta:
        table_name = "unbound-clusters"

    cluster_id = UnicodeAttribute(hash_key=True)  # always RECORD_KEY


@cache
def record_model(settings: Settings) -> type[PreemptionRecord]:
    meta = type(
        "Meta",
        (),
        {
            "table_name": settings.table_name("clusters"),
            "region": settings.region,
            "host": settings.endpoint_url,
        },
    )
    model = type(f"PreemptionRecord_{settings.prefix}", (PreemptionRecord,), {"Meta": meta})
    model._get_connection().connection.__class__ = SharedSessionConnection  # type: ignore[attr-defined]
    return model


def entry(at: float, cluster_id: str) -> str:
    return f"{at:.6f}#{cluster_id}"


def entry_time(text: str) -> float:
    return float(text.split("#", 1)[0])


class PrunedCooldowns:
    """`cooling` over any store of the entries: it reads `preemptions()` and prunes with `_forget`."""

    def preemptions(self) -> dict[str, list[str]]:
        return _of_kind(self.record(), ATTRIBUTE_PREFIX)

    def refusals(self) -> dict[str, list[str]]:
        """Each zone's refused spot launches (`"<epoch>#<job id>-<attempt>"`)."""
        return _of_kind(self.record(), REFUSAL_PREFIX)

    def record(self) -> dict[str, list[str]]:
        """Every attribute (kind prefix + place) with its entries, from one read."""
        raise NotImplementedError

    def _forget(self, place: str, entries: list[str], prefix: str = ATTRIBUTE_PREFIX) -> None:
        raise NotImplementedError

    def cooling(self, now: float | None = None) -> list[Cooling]:
        """The zones and regions cooling now. Drops entries the policy no longer counts (one DELETE each
        zone that has some; rare, and harmless when two readers do it at once)."""
        return self.evidence(now)[0]

    def evidence(self, now: float | None = None) -> tuple[list[Cooling], dict[str, list[tuple[float, str]]]]:
        """`cooling`, and each zone's refused spot launches as (epoch seconds, who), from the same read."""
        now = time.time() if now is None else now
        record = self.record()
        refusals = {
            place: [(entry_time(e), e.split("#", 1)[1]) for e in listed]
            for place, listed in _of_kind(record, REFUSAL_PREFIX).items()
        }  # entries past FORGET_AFTER_SECONDS are pruned below; the probe rule reads only the last hours
        kinds = {prefix: _of_kind(record, prefix) for prefix in (ATTRIBUTE_PREFIX, REFUSAL_PREFIX)}
        times: dict[str, dict[str, list[float]]] = {}
        for prefix, entries in kinds.items():
            times[prefix] = {place: [entry_time(e) for e in listed] for place, listed in entries.items()}
            for place, listed in entries.items():
                old = set(forgotten(times[prefix][place], now))
                stale = [e for e in listed if entry_time(e) in old]
                if stale:
                    self._forget(place, stale, prefix)
        return cooling_places(times[ATTRIBUTE_PREFIX], now, times[REFUSAL_PREFIX]), refusals


class CooldownStore(PrunedCooldowns):
    def __init__(self, settings: Settings) -> None:
        self.model = record_model(settings)

    def preemption_update(
        self, cloud: str, region: str, zone: str | None, cluster_id: str, at: float | None = None
    ) -> tuple[Model, list[Action]]:
        """(record, actions) counting one preemption of `cluster_id`, for the transaction of a job's move
        (DynamoJobStore.move with a PreemptionCount)."""
        at = time.time() if at is None else at
        name = ATTRIBUTE_PREFIX + place_of(cloud, region, zone)
        return self.model(cluster_id=RECORD_KEY), [Path([name]).add(Value({"SS": [entry(at, cluster_id)]}))]

    def refused(self, cloud: str, region: str, zone: str | None, who: str, at: float | None = None) -> None:
        """Count one spot launch refused for capacity (one atomic ADD; `who` is the job's attempt)."""
        at = time.time() if at is None else at
        name = REFUSAL_PREFIX + place_of(cloud, region, zone)
        action = Path([name]).add(Value({"SS": [entry(at, who)]}))
        self.model(cluster_id=RECORD_KEY).update(actions=[action])

    def record(self) -> dict[str, list[str]]:
        """Every zone's entries of both kinds, from one consistent read."""
        answer = self.model._get_connection().get_item(RECORD_KEY, consistent_read=True)
        item: dict[str, Any] = answer.get("Item") or {}
        return {name: list(value.get("SS") or []) for name, value in item.items() if "SS" in value}

    def _forget(self, place: str, entries: list[str], prefix: str = ATTRIBUTE_PREFIX) -> None:
        action = Path([prefix + place]).delete(Value({"SS": entries}))
        self.model(cluster_id=RECORD_KEY).update(actions=[action])


def _of_kind(record: dict[str, list[str]], prefix: str) -> dict[str, list[str]]:
    return {name[len(prefix) :]: entries for name, entries in record.items() if name.startswith(prefix)}
