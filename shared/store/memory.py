"""The job store in memory: the `JobStore` port (shared/store/job_store.py) with DynamoDB's conditions, for
tests that run the lifecycle without an endpoint. tests/unit/test_job_store_contract.py holds it to the
same assertions as `DynamoJobStore`.

Items are kept as DynamoDB would hold them (each record's `serialize()`), and every read answers a fresh
record built from the item, so a caller's record is a copy, as it is from DynamoDB: changing it writes
nothing, and two readers never share one. A write checks every condition before it changes anything, and sets
the index attributes (shared/store/live_index.py) as DynamoJobStore does.

`items_read` and `requests` count what DynamoDB would read and bill for the same calls: a query of an index
reads only the items in its key (page by page), a scan reads every item of the table.
"""

from __future__ import annotations

import itertools
import threading
import time
import uuid
from collections.abc import Iterable, Iterator
from typing import Any, TypeVar

from pynamodb.models import Model

from shared.optimizer.cooling import place_of
from shared.states import LIVE, JobState, transition
from shared.store.cooldowns import (
    ATTRIBUTE_PREFIX,
    REFUSAL_PREFIX,
    WRITE_CAP,
    WRITE_CAP_IN_ALL,
    PrunedCooldowns,
    entry,
    kept_record,
)
from shared.store.cost_rollups import (
    PLACES,
    AttemptFacts,
    CostPiece,
    cluster_pieces,
    piece_of_item,
    rollup_keys,
    rollup_partitions,
    write_groups,
)
from shared.store.job_numbers import is_numbered
from shared.store.job_store import CompanionUpdate, NodeFields
from shared.store.jobs import _days_since as days_since
from shared.store.jobs import _event_key as event_key
from shared.store.live_index import (
    LIVE_CLUSTER,
    LIVE_JOB,
    LIVE_SHARDS,
    cluster_state_fields,
    day_of,
    job_state_fields,
    live_keys,
    owner_state,
)
from shared.store.models import ClusterModel, EventModel, JobModel, NodeRefModel

Item = dict[str, Any]
Record = TypeVar("Record", bound=Model)
NODE_PREFIX = "node#"
LIVE_STATES = frozenset(s.value for s in LIVE)
DEFAULT_RETENTION_SECONDS = 400 * 86400


class BrokenWrite(RuntimeError):
    """A companion write DynamoDB would refuse as invalid (not a condition): the whole write fails."""


def _record(model: type[Record], item: Item) -> Record:
    return model.from_raw_data(item)


class MemoryJobStore:
    def __init__(self, retention_seconds: int = DEFAULT_RETENTION_SECONDS) -> None:
        self.retention_seconds = retention_seconds
        self.items_read = 0
        self.requests = 0
        self._lock = threading.RLock()
        self._jobs: dict[str, Item] = {}
        self._clusters: dict[str, Item] = {}  # cluster records and node refs (`node#<id>`), as in DynamoDB
        self._events: dict[str, dict[str, Item]] = {}  # partition -> sort key -> item
        self._preemptions: dict[str, set[str]] = {}  # place -> entries
        self._refusals: dict[str, set[str]] = {}  # place -> entries of refused spot launches
        self._rollups: dict[str, dict[str, dict[str, float]]] = {}  # partition -> sort key -> counters
        self._rollup_markers: set[tuple[str, str]] = set()  # (cluster id, first day) written
        self.cooldowns = MemoryCooldowns(self)
        self._numbers: dict[str, dict[int, str]] = {}  # owner -> job number -> job id

    # -- jobs ----------------------------------------------------------------------------------------

    def new_job(self, **fields: Any) -> JobModel:
        return JobModel(**fields)

    def create(self, job: JobModel, message: str, detail: dict[str, Any] | None = None) -> bool:
        now = time.time()
        job.created_at = job.updated_at = now
        job.created_day = day_of(now)
        job.refusals_noted = False
        for name, value in job_state_fields(
            job.job_id, job.owner, job.state, now, self.retention_seconds
        ).items():
            setattr(job, name, value)
        event = self._event(job.job_id, now, f"v{job.version:05d}", "state", message, job.state, detail)
        with self._lock:
            if job.job_id in self._jobs:
                return False
            if is_numbered(job):
                numbers = self._numbers.setdefault(job.owner, {})
                self._read(1 if numbers else 0)  # the owner's last number
                job.job_number = len(numbers) + 1
                numbers[job.job_number] = job.job_id
            self._jobs[job.job_id] = job.serialize()
            self._put_event(event)
        return True

    def job_id_numbered(self, owner: str, number: int) -> str | None:
        with self._lock:
            job_id = self._numbers.get(owner, {}).get(number)
        self._read(1 if job_id is not None else 0)
        return job_id

    def get(self, job_id: str) -> JobModel | None:
        if not job_id or len(job_id) > 256:
            return None
        with self._lock:
            item = self._jobs.get(job_id)
        self._read(1 if item is not None else 0)
        return _record(JobModel, item) if item is not None else None

    def move(
        self,
        job: JobModel,
        to: JobState,
        message: str,
        *,
        changes: dict[str, Any] | None = None,
        detail: dict[str, Any] | None = None,
        also_save: Iterable[ClusterModel | NodeRefModel] = (),
        also_update: Iterable[CompanionUpdate] = (),
    ) -> bool:
        transition(job.state, to)
        values = {**(changes or {}), "state": to.value}
        return self._write(job, values, message, detail, also_save, also_update)

    def save_progress(
        self,
        job: JobModel,
        changes: dict[str, Any],
        message: str | None = None,
        *,
        kind: str = "note",
        detail: dict[str, Any] | None = None,
    ) -> bool:
        return self._write(job, changes, message, detail, (), (), note_kind=kind)

    def _write(
        self,
        job: JobModel,
        changes: dict[str, Any],
        message: str | None,
        detail: dict[str, Any] | None,
        also_save: Iterable[ClusterModel | NodeRefModel],
        also_update: Iterable[CompanionUpdate],
        note_kind: str = "note",
    ) -> bool:
        now = time.time()
        new_version = int(job.version) + 1
        values = {**changes, "version": new_version, "updated_at": now}
        if "state" in changes:
            values.update(
                job_state_fields(job.job_id, job.owner, changes["state"], now, self.retention_seconds)
            )
        saves = [self._indexed(record, now) for record in also_save]
        updates = list(also_update)
        with self._lock:
            current = self._jobs.get(job.job_id)
            if current is None:
                return False
            stored = _record(JobModel, current)
            if stored.state != job.state or int(stored.version) != int(job.version):
                return False
            for name, value in values.items():
                setattr(stored, name, value)
            cluster_items = {
                u.cluster.cluster_id: self._node_update(u) for u in updates if isinstance(u, NodeFields)
            }
            self._jobs[job.job_id] = stored.serialize()
            if message is not None:
                state = values.get("state")
                kind = "state" if state and state != job.state else note_kind
                event = self._event(
                    job.job_id, now, f"v{new_version:05d}", kind, message, state or job.state, detail
                )
                self._put_event(event)
            for record in saves:
                self._clusters[record.cluster_id] = record.serialize()
            self._clusters.update(cluster_items)
        for name, value in values.items():
            setattr(job, name, value)
        return True

    def mark_refusals_noted(self, job: JobModel) -> None:
        with self._lock:
            item = self._jobs.get(job.job_id)
            if item is None:
                return
            self._jobs[job.job_id] = {**item, "refusals_noted": {"BOOL": True}}
        job.refusals_noted = True

    def _node_update(self, update: NodeFields) -> Item:
        """The cluster's item with the node's fields set (not stored yet); BrokenWrite for a missing node."""
        item = self._clusters.get(update.cluster.cluster_id)
        cluster = _record(ClusterModel, item) if item is not None else None
        nodes = _nodes(cluster) if cluster is not None else {}
        if cluster is None or update.instance_id not in nodes:
            raise BrokenWrite(f"no node {update.instance_id} in cluster {update.cluster.cluster_id}")
        nodes[update.instance_id].update(update.fields)
        cluster.nodes = nodes
        return cluster.serialize()

    def _indexed(self, record: ClusterModel | NodeRefModel, now: float) -> ClusterModel | NodeRefModel:
        if isinstance(record, ClusterModel):
            for name, value in cluster_state_fields(
                record.cluster_id, record.state, now, self.retention_seconds
            ).items():
                setattr(record, name, value)
        else:
            record.expires_at = int(now + self.retention_seconds)
        return record

    def _read(self, items: int, requests: int = 1) -> None:
        with self._lock:
            self.items_read += items
            self.requests += requests

    def _query(self, items: list[Item], page_size: int | None) -> Iterator[JobModel]:
        """Yield records page by page, counting each page's items when it is fetched (as DynamoDB bills)."""
        size = page_size or len(items) or 1
        for start in range(0, max(len(items), 1), size):
            page = items[start : start + size]
            self._read(len(page))
            yield from (_record(JobModel, item) for item in page)

    def jobs_of(self, owner: str, limit: int = 200) -> list[JobModel]:
        return list(self.iter_jobs_of(owner, page_size=limit))[:limit]

    def iter_jobs_of(
        self,
        owner: str,
        *,
        since: float | None = None,
        state: str | None = None,
        before: float | None = None,
        page_size: int | None = None,
    ) -> Iterator[JobModel]:
        with self._lock:
            if state is None:
                items = [i for i in self._jobs.values() if i["owner"]["S"] == owner]
            else:
                key = owner_state(owner, state)
                items = [i for i in self._jobs.values() if i.get("owner_state", {}).get("S") == key]
        items = [i for i in items if _created_between(_created(i), since, before)]
        items.sort(key=_created, reverse=True)
        return self._query(items, page_size)

    def iter_all_jobs(self, *, since: float | None = None) -> Iterator[JobModel]:
        """With `since`, the created-day index's days since then; without, a scan."""
        with self._lock:
            items = list(self._jobs.values())
        if since is not None:
            first_day = day_of(since)
            items = [i for i in items if i.get("created_day", {}).get("S", "") >= first_day]
            self._read(len(items), requests=len(days_since(since)))  # a query of each day's partition
            return iter([_record(JobModel, i) for i in items if _created(i) >= since])
        self._read(len(items))
        return iter([_record(JobModel, i) for i in items])

    def iter_jobs_of_day(
        self,
        day: str,
        *,
        since: float | None = None,
        before: float | None = None,
        page_size: int | None = None,
    ) -> Iterator[JobModel]:
        """As DynamoJobStore's: the day's partition of the created-day index, counted page by page."""
        with self._lock:
            items = [i for i in self._jobs.values() if i.get("created_day", {}).get("S") == day]
        items = sorted(
            (i for i in items if _created_between(_created(i), since, before)), key=_created, reverse=True
        )
        return self._query(items, page_size)

    def newest_jobs(self, owner: str | None, *, since: float, limit: int) -> list[JobModel]:
        """As DynamoJobStore's: reads at most `limit` items (one query of each day until it has them)."""
        if owner is not None:
            return list(itertools.islice(self.iter_jobs_of(owner, since=since, page_size=limit), limit))
        found: list[JobModel] = []
        for day in days_since(since):
            wanted = limit - len(found)
            if wanted <= 0:
                break
            with self._lock:
                items = [i for i in self._jobs.values() if i.get("created_day", {}).get("S") == day]
            items = sorted((i for i in items if _created(i) >= since), key=_created, reverse=True)[:wanted]
            self._read(len(items))
            found += [_record(JobModel, i) for i in items]
        return found

    def live_jobs(self) -> list[JobModel]:
        """The live index's items only (those with `live` set)."""
        with self._lock:
            keys = set(live_keys(LIVE_JOB))
            items = [i for i in self._jobs.values() if i.get("live", {}).get("S") in keys]
        self._read(len(items), requests=LIVE_SHARDS)  # a query of each shard
        return [_record(JobModel, item) for item in items]

    def scan_jobs(self) -> list[JobModel]:
        """Every job (a scan: what the sweeps read before the live index, for comparison in tests)."""
        return self._all_jobs()

    def _all_jobs(self) -> list[JobModel]:
        with self._lock:
            items = list(self._jobs.values())
        self._read(len(items))
        return [_record(JobModel, item) for item in items]

    # -- timeline ------------------------------------------------------------------------------------

    def note(self, job_id: str, kind: str, message: str, detail: dict[str, Any] | None = None) -> None:
        event = self._event(job_id, time.time(), uuid.uuid4().hex[:8], kind, message, None, detail)
        with self._lock:
            self._put_event(event)

    def timeline(self, job_id: str) -> list[EventModel]:
        with self._lock:
            items = dict(self._events.get(job_id, {}))
        self._read(len(items))
        return [_record(EventModel, items[at]) for at in sorted(items)]

    def job_timeline(self, job: JobModel, clusters: Iterable[ClusterModel]) -> list[EventModel]:
        return self.timeline(job.job_id)

    def _put_event(self, event: EventModel) -> None:
        self._events.setdefault(event.job_id, {})[event.at] = event.serialize()

    def _event(
        self,
        job_id: str,
        now: float,
        suffix: str,
        kind: str,
        message: str,
        state: str | None,
        detail: dict[str, Any] | None,
    ) -> EventModel:
        return EventModel(
            job_id=job_id,
            at=event_key(now, suffix),
            kind=kind,
            message=message[:2000],
            state=state,
            detail=detail or None,
            expires_at=int(now + self.retention_seconds),
        )

    # -- clusters and nodes --------------------------------------------------------------------------

    def new_cluster(self, **fields: Any) -> ClusterModel:
        return ClusterModel(**fields)

    def new_node_ref(self, instance_id: str, job_id: str, cluster_id: str, rank: int) -> NodeRefModel:
        return NodeRefModel(
            cluster_id=NODE_PREFIX + instance_id, job_id=job_id, node_cluster=cluster_id, rank=rank
        )

    def cluster(self, cluster_id: str | None) -> ClusterModel | None:
        if not cluster_id:
            return None
        with self._lock:
            item = self._clusters.get(cluster_id)
        self._read(1 if item is not None else 0)
        return _record(ClusterModel, item) if item is not None else None

    def node_ref(self, instance_id: str) -> NodeRefModel | None:
        with self._lock:
            item = self._clusters.get(NODE_PREFIX + instance_id)
        return _record(NodeRefModel, item) if item is not None else None

    def update_node(self, cluster: ClusterModel, instance_id: str, **fields: Any) -> bool:
        with self._lock:
            try:
                self._clusters[cluster.cluster_id] = self._node_update(
                    NodeFields(cluster, instance_id, fields)
                )
            except BrokenWrite:
                return False
        return True

    def claim_node(self, cluster: ClusterModel, instance_id: str, name: str, claim: str) -> bool:
        with self._lock:
            stored = self.cluster(cluster.cluster_id)
            node = _nodes(stored).get(instance_id) if stored is not None else None
            if node is None or node.get(name, claim) != claim:
                return False
            return self.update_node(cluster, instance_id, **{name: claim})

    def mark_cluster_terminated(self, cluster: ClusterModel, facts: AttemptFacts | None = None) -> bool:
        with self._lock:
            stored = self.cluster(cluster.cluster_id)
            if stored is None or stored.state != "UP":
                return False
            now = time.time()
            earlier, last = write_groups(cluster_pieces(stored, facts, now)) if facts else ([], [])
            for group in earlier:
                if (cluster.cluster_id, group[0].day) not in self._rollup_markers:
                    self._rollup_markers.add((cluster.cluster_id, group[0].day))
                    self._add_pieces(group)
            stored.state, stored.terminated_at = "TERMINATED", now
            for name, value in cluster_state_fields(
                stored.cluster_id, "TERMINATED", now, self.retention_seconds
            ).items():
                setattr(stored, name, value)
            if facts is not None:
                stored.rolled_up = True
            self._clusters[cluster.cluster_id] = stored.serialize()
            self._add_pieces(last)
        return True

    def _add_pieces(self, pieces: list[CostPiece]) -> None:
        for piece in pieces:
            for partition, sort_key in rollup_keys(piece):
                item = self._rollups.setdefault(partition, {}).setdefault(sort_key, {})
                for name, value in piece.counters().items():
                    item[name] = item.get(name, 0) + round(value, PLACES)

    def cost_pieces(self, first_day: str, last_day: str, owner: str | None) -> list[CostPiece]:
        """As DynamoJobStore's: one range query per month partition, reading the items in range."""
        pieces: list[CostPiece] = []
        for partition, low, high in rollup_partitions(first_day, last_day, owner):
            with self._lock:
                items = sorted(
                    (k, dict(v)) for k, v in self._rollups.get(partition, {}).items() if low <= k <= high
                )
            self._read(len(items))
            pieces.extend(piece_of_item(partition, key, values) for key, values in items)
        return pieces

    def clusters_by_id(self, cluster_ids: Iterable[str]) -> dict[str, ClusterModel]:
        """As DynamoJobStore's: a BatchGetItem per 100 ids."""
        wanted = list(dict.fromkeys(cluster_ids))
        with self._lock:
            items = {cid: self._clusters[cid] for cid in wanted if cid in self._clusters}
        self._read(len(items), requests=-(-len(wanted) // 100))
        return {cid: _record(ClusterModel, item) for cid, item in items.items()}

    def live_clusters(self) -> list[ClusterModel]:
        """The live index's cluster records only (those with `live` set: UP ones)."""
        keys = set(live_keys(LIVE_CLUSTER))
        with self._lock:
            items = [item for item in self._clusters.values() if item.get("live", {}).get("S") in keys]
        self._read(len(items), requests=LIVE_SHARDS)  # a query of each shard
        return [_record(ClusterModel, item) for item in items]


def _created(item: Item) -> float:
    return float(item["created_at"]["N"])


def _created_between(created: float, since: float | None, before: float | None) -> bool:
    return (since is None or created >= since) and (before is None or created < before)


def _nodes(cluster: ClusterModel) -> dict[str, dict[str, Any]]:
    raw = cluster.nodes
    data = raw.as_dict() if hasattr(raw, "as_dict") else dict(raw or {})
    return {iid: (n.as_dict() if hasattr(n, "as_dict") else dict(n)) for iid, n in data.items()}


class MemoryCooldowns(PrunedCooldowns):
    """The cool-down record of a MemoryJobStore, bounded as the DynamoDB one (shared/store/cooldowns.py)."""

    def __init__(self, store: MemoryJobStore) -> None:
        self.store = store
        self._written = 0  # as the DynamoDB record's WRITTEN

    def record(self) -> dict[str, list[str]]:
        with self.store._lock:
            return self._record_locked()

    def _record_locked(self) -> dict[str, list[str]]:
        taken = {ATTRIBUTE_PREFIX + p: sorted(e) for p, e in self.store._preemptions.items() if e}
        refused = {REFUSAL_PREFIX + p: sorted(e) for p, e in self.store._refusals.items() if e}
        return {**taken, **refused}

    def preempted(
        self, cloud: str, region: str, zone: str | None, cluster_id: str, at: float | None = None
    ) -> None:
        at = time.time() if at is None else at
        self._add(ATTRIBUTE_PREFIX, place_of(cloud, region, zone), entry(at, cluster_id))

    def refused(self, cloud: str, region: str, zone: str | None, who: str, at: float | None = None) -> None:
        at = time.time() if at is None else at
        self._add(REFUSAL_PREFIX, place_of(cloud, region, zone), entry(at, who))

    def _add(self, prefix: str, place: str, text: str) -> None:
        """The DynamoDB record's conditional ADD: a full zone or record is pruned first."""
        with self.store._lock:
            listed = self._sets(prefix).setdefault(place, set())
            if len(listed) >= WRITE_CAP or self._written >= WRITE_CAP_IN_ALL:
                counted, stale = kept_record(self._record_locked(), time.time())
                self._forget_locked(stale, sum(len(entries) for entries in counted.values()))
            if len(listed) < WRITE_CAP and self._written < WRITE_CAP_IN_ALL:
                self._written += 1
                listed.add(text)

    def _sets(self, prefix: str) -> dict[str, set[str]]:
        return self.store._preemptions if prefix == ATTRIBUTE_PREFIX else self.store._refusals

    def _forget(self, stale: dict[str, list[str]], kept_count: int | None) -> None:
        with self.store._lock:
            self._forget_locked(stale, kept_count)

    def _forget_locked(self, stale: dict[str, list[str]], kept_count: int | None) -> None:
        for name, entries in stale.items():
            prefix, place = name[: len(ATTRIBUTE_PREFIX)], name[len(ATTRIBUTE_PREFIX) :]
            self._sets(prefix).get(place, set()).difference_update(entries)
        if kept_count is not None:
            self._written = kept_count
