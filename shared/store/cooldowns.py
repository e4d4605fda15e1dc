"""Where spot preemptions are kept for the cool-down policy (shared/optimizer/cooling.py): one small record.

The record is one item of the clusters table, key `spot-preemptions`. Each zone that had a preemption has
one attribute, `z#<cloud>/<region>/<zone>`, a string set of `"<epoch seconds>#<cluster id>"`. A preemption
is added with DynamoDB's ADD (atomic, never a read-modify-write, so concurrent preemptions never conflict)
right after the move to RECOVERING, outside its transaction: the job moves once per preempted cluster, so a
preemption reported twice (the cloud's event and the agent's notice) is counted once, and a write of the
evidence that fails never blocks the recovery. Planning reads the whole record in one GetItem.

Spot launches refused for capacity (any job's) are kept the same way under `r#<cloud>/<region>/<zone>`,
`"<epoch seconds>#<job id>-<attempt>"`, each added by one UpdateItem ADD when the launch is refused.

The record stays small whatever the history. A zone keeps, of each kind, its newest KEPT_PER_ZONE entries
within FORGET_AFTER_SECONDS: readers count only those and remove the rest with DELETE (atomic, harmless
when two readers do it at once). An ADD is conditional on the set holding fewer than WRITE_CAP entries; a
full set is pruned to the newest KEPT_PER_ZONE and the ADD tried once more, so writes between two reads
cannot grow a zone past WRITE_CAP either. What the policy reads saturates well below KEPT_PER_ZONE: a zone
cools at most MAX_COOLING_SECONDS (a decayed count of 32), a probe waits at most MAX_PROBE_GAP_SECONDS (a
count of about 5 at the default retry), and a zone refused more than KEPT_PER_ZONE times in an hour waits
the longest gap whoever's entries are kept, so the per-job hourly limit is not what holds a job back there.
"""

from __future__ import annotations

import logging
import time
from functools import cache
from typing import Any

from pynamodb.attributes import UnicodeAttribute
from pynamodb.exceptions import UpdateError
from pynamodb.expressions.condition import size
from pynamodb.expressions.operand import Path, Value
from pynamodb.models import Model

from shared.config import Settings
from shared.optimizer.cooling import Cooling, cooling_places, forgotten, place_of
from shared.store.models import SharedSessionConnection

RECORD_KEY = "spot-preemptions"
ATTRIBUTE_PREFIX = "z#"
REFUSAL_PREFIX = "r#"
KEPT_PER_ZONE = 32  # newest entries of each kind a zone keeps
WRITE_CAP = 64  # entries of one kind a zone may reach between two reads

log = logging.getLogger(__name__)


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


def kept(entries: list[str], now: float) -> tuple[list[str], list[str]]:
    """(the entries the policy counts: the newest KEPT_PER_ZONE within FORGET_AFTER_SECONDS, the rest)."""
    newest = sorted(entries, key=entry_time, reverse=True)
    old = set(forgotten([entry_time(e) for e in newest], now))
    counted = [e for e in newest if entry_time(e) not in old][:KEPT_PER_ZONE]
    chosen = set(counted)
    return counted, [e for e in newest if e not in chosen]


class PrunedCooldowns:
    """`cooling` over any store of the entries: it reads `preemptions()` and prunes with `_forget`."""

    def preemptions(self) -> dict[str, list[str]]:
        """Each zone's counted preemptions (`"<epoch>#<cluster id>"`), newest first."""
        return self._counted(ATTRIBUTE_PREFIX)

    def refusals(self) -> dict[str, list[str]]:
        """Each zone's counted refused spot launches (`"<epoch>#<job id>-<attempt>"`), newest first."""
        return self._counted(REFUSAL_PREFIX)

    def _counted(self, prefix: str) -> dict[str, list[str]]:
        now = time.time()
        counted = {place: kept(listed, now)[0] for place, listed in _of_kind(self.record(), prefix).items()}
        return {place: listed for place, listed in counted.items() if listed}

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
        counted: dict[str, dict[str, list[str]]] = {}
        for prefix in (ATTRIBUTE_PREFIX, REFUSAL_PREFIX):
            counted[prefix] = {}
            for place, listed in _of_kind(record, prefix).items():
                counted[prefix][place], stale = kept(listed, now)
                if stale:
                    self._forget(place, stale, prefix)
        times = {
            prefix: {place: [entry_time(e) for e in listed] for place, listed in entries.items() if listed}
            for prefix, entries in counted.items()
        }
        refusals = {
            place: [(entry_time(e), e.split("#", 1)[1]) for e in listed]
            for place, listed in counted[REFUSAL_PREFIX].items()
            if listed
        }
        return cooling_places(times[ATTRIBUTE_PREFIX], now, times[REFUSAL_PREFIX]), refusals


class CooldownStore(PrunedCooldowns):
    def __init__(self, settings: Settings) -> None:
        self.model = record_model(settings)

    def preempted(
        self, cloud: str, region: str, zone: str | None, cluster_id: str, at: float | None = None
    ) -> None:
        """Count one preemption of `cluster_id` (one atomic ADD; the same cluster twice counts once)."""
        at = time.time() if at is None else at
        self._add(ATTRIBUTE_PREFIX + place_of(cloud, region, zone), entry(at, cluster_id))

    def refused(self, cloud: str, region: str, zone: str | None, who: str, at: float | None = None) -> None:
        """Count one spot launch refused for capacity (one atomic ADD; `who` is the job's attempt)."""
        at = time.time() if at is None else at
        self._add(REFUSAL_PREFIX + place_of(cloud, region, zone), entry(at, who))

    def _add(self, name: str, text: str) -> None:
        """ADD `text` to the set `name` while it holds fewer than WRITE_CAP entries; a full set is pruned
        and the ADD tried once more; still full (many writers at once), the entry is dropped: the zone
        already holds WRITE_CAP recent entries, more evidence than the policy reads."""
        path = Path([name])
        action = path.add(Value({"SS": [text]}))
        for _ in range(2):
            try:
                self.model._get_connection().update_item(
                    RECORD_KEY,
                    actions=[action],
                    condition=path.does_not_exist() | (size(path) < WRITE_CAP),
                    return_values="NONE",
                )
                return
            except UpdateError as error:
                if "ConditionalCheckFailed" not in (getattr(error, "cause_response_code", None) or ""):
                    raise
            self._prune(name)
        log.warning("evidence %s not added: %s is full of recent entries", text, name)

    def _prune(self, name: str) -> None:
        answer = self.model._get_connection().get_item(
            RECORD_KEY, consistent_read=True, attributes_to_get=[name]
        )
        listed = list(((answer.get("Item") or {}).get(name) or {}).get("SS") or [])
        stale = kept(listed, time.time())[1]
        if stale:
            prefix, place = name[:2], name[2:]
            self._forget(place, stale, prefix)

    def record(self) -> dict[str, list[str]]:
        """Every zone's entries of both kinds, from one consistent read."""
        answer = self.model._get_connection().get_item(RECORD_KEY, consistent_read=True)
        item: dict[str, Any] = answer.get("Item") or {}
        return {name: list(value.get("SS") or []) for name, value in item.items() if "SS" in value}

    def _forget(self, place: str, entries: list[str], prefix: str = ATTRIBUTE_PREFIX) -> None:
        action = Path([prefix + place]).delete(Value({"SS": entries}))
        self.model._get_connection().update_item(RECORD_KEY, actions=[action], return_values="NONE")


def _of_kind(record: dict[str, list[str]], prefix: str) -> dict[str, list[str]]:
    return {name[len(prefix) :]: entries for name, entries in record.items() if name.startswith(prefix)}
