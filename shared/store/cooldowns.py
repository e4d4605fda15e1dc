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
within FORGET_AFTER_SECONDS, and the record its newest KEPT_IN_ALL: readers count only those, and remove the
rest with DELETE (atomic, harmless when two readers do it at once) once a zone holds more than
PRUNE_PAST_PER_ZONE entries of a kind or the record more than PRUNE_PAST_IN_ALL: a plan's read in a busy zone
writes nothing until then (it wrote a prune at every read past KEPT_PER_ZONE). An ADD is conditional on the
set holding fewer than WRITE_CAP entries and on the record's count (WRITTEN, bumped by the same ADD) being
under WRITE_CAP_IN_ALL; a full record is pruned and the ADD tried once more, so writes between two reads
cannot grow a zone past WRITE_CAP, or the record much past WRITE_CAP_IN_ALL (~80 KB, a fifth of DynamoDB's
limit). What the policy reads saturates well below KEPT_PER_ZONE: a zone cools at most MAX_COOLING_SECONDS (a
decayed count of 32), a probe waits at most MAX_PROBE_GAP_SECONDS (a count of about 5 at the default retry),
and a zone refused more than KEPT_PER_ZONE times in an hour waits the longest gap whoever's entries are kept,
so the per-job hourly limit is not what holds a job back there.
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
from pynamodb.expressions.update import Action
from pynamodb.models import Model

from shared.config import Settings
from shared.optimizer.cooling import Cooling, cooling_places, forgotten, place_of
from shared.store.models import SharedSessionConnection

RECORD_KEY = "spot-preemptions"
ATTRIBUTE_PREFIX = "z#"
REFUSAL_PREFIX = "r#"
KEPT_PER_ZONE = 32  # newest entries of each kind a zone keeps
WRITE_CAP = 64  # entries of one kind a zone may reach between two reads
KEPT_IN_ALL = 1024  # newest entries the whole record keeps (~40 KB)
WRITE_CAP_IN_ALL = 2048  # entries the record may reach between two reads (~80 KB; DynamoDB's limit is 400 KB)
# a read prunes only past these; kept below the write caps so readers prune a busy record before its writes
# find it full (and must prune it themselves, a failed conditional ADD more on a preemption's way)
PRUNE_PAST_PER_ZONE = 48
PRUNE_PAST_IN_ALL = 1536
WRITTEN = "written"  # the record's number attribute: entries added since it was last pruned, plus those kept

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


def kept_record(
    record: dict[str, list[str]], now: float
) -> tuple[dict[str, list[str]], dict[str, list[str]]]:
    """Each attribute's counted entries (`kept`, then the newest KEPT_IN_ALL of the record), and the rest."""
    counted: dict[str, list[str]] = {}
    stale: dict[str, list[str]] = {}
    for name, listed in record.items():
        counted[name], stale[name] = kept(listed, now)
    every = sorted(
        ((entry_time(e), name, e) for name, listed in counted.items() for e in listed), reverse=True
    )
    for _, name, text in every[KEPT_IN_ALL:]:
        counted[name].remove(text)
        stale[name].append(text)
    return (
        {name: listed for name, listed in counted.items() if listed},
        {name: listed for name, listed in stale.items() if listed},
    )


def past_margin(record: dict[str, list[str]]) -> bool:
    """Whether a read prunes `record`: a zone past PRUNE_PAST_PER_ZONE entries of a kind, or the whole past
    PRUNE_PAST_IN_ALL."""
    sizes = [len(listed) for listed in record.values()]
    return max(sizes, default=0) > PRUNE_PAST_PER_ZONE or sum(sizes) > PRUNE_PAST_IN_ALL


class PrunedCooldowns:
    """`cooling` over any store of the entries: it reads `preemptions()` and prunes with `_forget`."""

    def preemptions(self) -> dict[str, list[str]]:
        """Each zone's counted preemptions (`"<epoch>#<cluster id>"`), newest first."""
        return self._counted(ATTRIBUTE_PREFIX)

    def refusals(self) -> dict[str, list[str]]:
        """Each zone's counted refused spot launches (`"<epoch>#<job id>-<attempt>"`), newest first."""
        return self._counted(REFUSAL_PREFIX)

    def _counted(self, prefix: str) -> dict[str, list[str]]:
        return _of_kind(kept_record(self.record(), time.time())[0], prefix)

    def record(self) -> dict[str, list[str]]:
        """Every attribute (kind prefix + place) with its entries, from one read."""
        raise NotImplementedError

    def _forget(self, stale: dict[str, list[str]], kept_count: int | None) -> None:
        """Remove the `stale` entries of each attribute; WRITTEN set to `kept_count` when given."""
        raise NotImplementedError

    def _pruned(self, now: float, *, recount: bool = False) -> dict[str, list[str]]:
        """The record as the policy counts it; the rest removed when past the margin (one write; harmless
        when two readers do it at once). A reader's prune leaves WRITTEN as it is (too high, never too low);
        a writer finding the record full recounts it and prunes whatever it holds."""
        record = self.record()
        counted, stale = kept_record(record, now)
        if recount or (stale and past_margin(record)):
            self._forget(stale, sum(len(listed) for listed in counted.values()) if recount else None)
        return counted

    def cooling(self, now: float | None = None) -> list[Cooling]:
        """The zones and regions cooling now; drops the entries it no longer counts once past the margin."""
        return self.evidence(now)[0]

    def evidence(self, now: float | None = None) -> tuple[list[Cooling], dict[str, list[tuple[float, str]]]]:
        """`cooling`, and each zone's refused spot launches as (epoch seconds, who), from the same read."""
        now = time.time() if now is None else now
        counted = self._pruned(now)
        times = {
            prefix: {
                place: [entry_time(e) for e in listed] for place, listed in _of_kind(counted, prefix).items()
            }
            for prefix in (ATTRIBUTE_PREFIX, REFUSAL_PREFIX)
        }
        refusals = {
            place: [(entry_time(e), e.split("#", 1)[1]) for e in listed]
            for place, listed in _of_kind(counted, REFUSAL_PREFIX).items()
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
        """ADD `text` to the set `name` while it holds fewer than WRITE_CAP entries and the record fewer
        than WRITE_CAP_IN_ALL (counted by WRITTEN, which the same write bumps); else the record is pruned and
        the ADD tried once more; still full (many writers at once), the entry is dropped: the record already
        holds more recent evidence than the policy reads."""
        path, written = Path([name]), Path([WRITTEN])
        actions = [path.add(Value({"SS": [text]})), written.add(1)]
        condition = (path.does_not_exist() | (size(path) < WRITE_CAP)) & (
            written.does_not_exist() | (written < WRITE_CAP_IN_ALL)
        )
        for _ in range(2):
            try:
                self.model._get_connection().update_item(
                    RECORD_KEY, actions=actions, condition=condition, return_values="NONE"
                )
                return
            except UpdateError as error:
                if "ConditionalCheckFailed" not in (getattr(error, "cause_response_code", None) or ""):
                    raise
            self._pruned(time.time(), recount=True)
        log.warning("evidence %s not added: the record is full of recent entries", text)

    def record(self) -> dict[str, list[str]]:
        """Every zone's entries of both kinds, from one consistent read."""
        answer = self.model._get_connection().get_item(RECORD_KEY, consistent_read=True)
        item: dict[str, Any] = answer.get("Item") or {}
        return {name: list(value.get("SS") or []) for name, value in item.items() if "SS" in value}

    def _forget(self, stale: dict[str, list[str]], kept_count: int | None) -> None:
        """One UpdateItem: DELETE the stale entries, and WRITTEN set to the entries left when counted (an ADD
        racing this goes uncounted until the next recount)."""
        actions: list[Action] = [Path([name]).delete(Value({"SS": listed})) for name, listed in stale.items()]
        if kept_count is not None:
            actions.append(Path([WRITTEN]).set(kept_count))
        self.model._get_connection().update_item(RECORD_KEY, actions=actions, return_values="NONE")


def _of_kind(record: dict[str, list[str]], prefix: str) -> dict[str, list[str]]:
    return {name[len(prefix) :]: entries for name, entries in record.items() if name.startswith(prefix)}
