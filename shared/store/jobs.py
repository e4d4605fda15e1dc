"""The job store on DynamoDB (the `JobStore` port of shared/store/job_store.py): every state change is one
conditional write (expected state AND version), taken together with its timeline event in one DynamoDB
transaction. A write whose condition fails changed nothing and answers False: the caller treats it as
"someone already did this" (a duplicate, a late or an out-of-order message), never as an error.

Two timeline events are not items of their own: a job's first (PENDING or PLANNED) is kept in the job's item,
and a launch's (SETTING_UP) in the cluster record it creates, written in the same write (two items less a
job). `timeline` puts them back in order. The events table's stream therefore never carries them: no
notification or `status.json` follows those states (shared/notifications/events.py `topic_of`,
shared/jobs/run_status.py).
"""

from __future__ import annotations

import itertools
import math
import random
import time
import uuid
from collections.abc import Iterable, Iterator
from typing import Any

from pynamodb.exceptions import DoesNotExist, PutError, TransactWriteError, UpdateError
from pynamodb.expressions.update import Action
from pynamodb.models import Model
from pynamodb.transactions import TransactWrite

from shared.config import Settings
from shared.states import JobState, transition
from shared.store.cost_rollup_items import add_pieces, marker, read_pieces, rollup_model
from shared.store.cost_rollups import AttemptFacts, CostPiece, cluster_pieces, write_groups
from shared.store.job_numbers import ALLOCATION_ATTEMPTS, is_numbered, number_key, partition_of
from shared.store.job_store import CompanionUpdate
from shared.store.live_index import (
    LIVE_CLUSTER,
    LIVE_JOB,
    cluster_state_fields,
    day_of,
    job_state_fields,
    live_keys,
)
from shared.store.live_index import owner_state as owner_state_key
from shared.store.models import (
    ClusterModel,
    EventModel,
    JobModel,
    JobNumberModel,
    NodeRefModel,
    models_for,
)

CONDITION_FAILED = "ConditionalCheckFailed"
CONFLICT = "TransactionConflict"
FIRST_STATES_KEPT = ("PENDING", "PLANNED")  # a job's first event, kept in its item (the stream ignores these)
LAUNCH_STATE_KEPT = "SETTING_UP"  # a launch's event, kept in the cluster record the launch creates
JOB_PREFIX = "job-"  # other partitions (named clusters, the reaper's records) keep no events aside
EVENT_FIELDS = ("at", "kind", "message", "state", "detail")


def _event_key(now: float, suffix: str) -> str:
    return f"{now:017.6f}#{suffix}"


class _NumberTaken(Exception):
    """The number a new job chose was written by another submission first."""


def _is_condition_failure(error: Exception) -> bool:
    cause = getattr(error, "cause_response_code", None) or ""
    reasons = getattr(error, "cancellation_reasons", None) or []
    text = str(error)
    return (
        "ConditionalCheckFailed" in cause
        or any(r is not None and r.code == CONDITION_FAILED for r in reasons)
        or "ConditionalCheckFailed" in text
    )


class DynamoJobStore:
    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.models = models_for(settings)
        self.jobs = self.models.jobs
        self.clusters = self.models.clusters
        self.events = self.models.events
        self.node_refs = self.models.node_refs
        self.retention_seconds = settings.retention_seconds

    # -- jobs ------------------------------------------------------------------------------

    def new_job(self, **fields: Any) -> JobModel:
        return self.jobs(**fields)

    def create(self, job: JobModel, message: str, detail: dict[str, Any] | None = None) -> bool:
        """Record a new job with its first timeline event and its owner's next number
        (shared/store/job_numbers.py); False, with nothing written and no number taken, when the id exists."""
        now = time.time()
        job.created_at = job.updated_at = now
        job.created_day = day_of(now)
        job.refusals_noted = False
        for name, value in job_state_fields(
            job.job_id, job.owner, job.state, now, self.retention_seconds
        ).items():
            setattr(job, name, value)
        event = self._event(job.job_id, now, f"v{job.version:05d}", "state", message, job.state, detail)
        kept = job.state in FIRST_STATES_KEPT
        if kept:
            job.first_event = _kept(event)
        if not is_numbered(job):
            return self._put_new(job, None if kept else event, None)
        for attempt in range(ALLOCATION_ATTEMPTS):
            job.job_number = self._last_number(job.owner) + 1
            number = self.models.job_numbers(
                partition_of(job.owner), number_key(job.job_number), target=job.job_id
            )
            try:
                return self._put_new(job, None if kept else event, number)
            except _NumberTaken:
                time.sleep(random.uniform(0.0, min(0.02, 0.002 * (attempt + 1))))  # another one took it
        raise RuntimeError(f"no job number for {job.owner} after {ALLOCATION_ATTEMPTS} tries")

    def _put_new(self, job: JobModel, event: EventModel | None, number: JobNumberModel | None) -> bool:
        """Write a new job (with its event and number when given) if its id is new; raises _NumberTaken when
        only the number (or a concurrent transaction on it) stood in the way."""
        try:
            if event is None and number is None:
                job.save(condition=self.jobs.job_id.does_not_exist())
                return True
            with TransactWrite(connection=self.models.connection) as tx:
                tx.save(job, condition=self.jobs.job_id.does_not_exist())
                if number is not None:
                    tx.save(number, condition=self.models.job_numbers.partition.does_not_exist())
                if event is not None:
                    tx.save(event)
        except (PutError, TransactWriteError) as error:
            reasons = getattr(error, "cancellation_reasons", None) or []
            job_reason = reasons[0].code if reasons and reasons[0] is not None else None
            lost = any(r is not None and r.code in (CONDITION_FAILED, CONFLICT) for r in reasons)
            if number is not None and lost and job_reason != CONDITION_FAILED:
                raise _NumberTaken from error
            if _is_condition_failure(error):
                job.job_number = None
                return False
            raise
        return True

    def _last_number(self, owner: str) -> int:
        numbers = self.models.job_numbers
        query = numbers.query(partition_of(owner), scan_index_forward=False, limit=1, consistent_read=True)
        last = next(iter(query), None)
        return int(last.number_key) if last is not None else 0

    def job_id_numbered(self, owner: str, number: int) -> str | None:
        try:
            item = self.models.job_numbers.get(partition_of(owner), number_key(number), consistent_read=True)
        except DoesNotExist:
            return None
        return str(item.target)

    def get(self, job_id: str) -> JobModel | None:
        if not job_id or len(job_id) > 256:
            return None
        try:
            return self.jobs.get(job_id, consistent_read=True)
        except DoesNotExist:
            return None

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
        """Move `job` to `to` if it is still in the state and version we read. One transaction:
        the job, its timeline event, and any records that go with the move (a cluster, node refs)."""
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
        """Record progress within a state (the candidate index, blocks, counters), version-checked."""
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
        if "state" in changes:  # the live index and the state filter change in the same write
            values.update(
                job_state_fields(job.job_id, job.owner, changes["state"], now, self.retention_seconds)
            )
        actions: list[Action] = []
        for name, value in values.items():
            attribute = getattr(self.jobs, name)
            actions.append(attribute.remove() if value is None else attribute.set(value))
        condition = (self.jobs.state == job.state) & (self.jobs.version == job.version)
        saves = [self._indexed(record, now) for record in also_save]
        event = None
        if message is not None:
            state = values.get("state")
            kind = "state" if state and state != job.state else note_kind
            suffix = f"v{new_version:05d}"
            event = self._event(job.job_id, now, suffix, kind, message, state or job.state, detail)
            launched = [r for r in saves if isinstance(r, ClusterModel)]
            if kind == "state" and state == LAUNCH_STATE_KEPT and len(launched) == 1:
                launched[0].launch_event, event = _kept(event), None
        try:
            with TransactWrite(connection=self.models.connection) as tx:
                tx.update(job, actions, condition=condition)
                if event is not None:
                    tx.save(event)
                for record in saves:
                    tx.save(record)
                for target, target_actions in map(self._companion, also_update):
                    tx.update(target, target_actions)
        except TransactWriteError as error:
            if _is_condition_failure(error):
                return False
            raise
        for name, value in values.items():
            setattr(job, name, value)
        return True

    def mark_refusals_noted(self, job: JobModel) -> None:
        """One UpdateItem, conditional on the job existing only."""
        try:
            self.jobs._get_connection().update_item(
                job.job_id,
                actions=[self.jobs.refusals_noted.set(True)],
                condition=self.jobs.job_id.exists(),
                return_values="NONE",
            )
        except UpdateError as error:
            if _is_condition_failure(error):
                return
            raise
        job.refusals_noted = True

    def _indexed(self, record: ClusterModel | NodeRefModel, now: float) -> ClusterModel | NodeRefModel:
        if isinstance(record, ClusterModel):
            for name, value in cluster_state_fields(
                record.cluster_id, record.state, now, self.retention_seconds
            ).items():
                setattr(record, name, value)
        else:
            record.expires_at = int(now + self.retention_seconds)
        return record

    def _companion(self, update: CompanionUpdate) -> tuple[Model, list[Action]]:
        return update.cluster, self.node_actions(update.instance_id, **update.fields)

    def jobs_of(self, owner: str, limit: int = 200) -> list[JobModel]:
        index = self.jobs.by_owner  # type: ignore[attr-defined]
        return list(index.query(owner, scan_index_forward=False, limit=limit))

    def iter_jobs_of(
        self,
        owner: str,
        *,
        since: float | None = None,
        state: str | None = None,
        before: float | None = None,
        page_size: int | None = None,
    ) -> Iterator[JobModel]:
        """The owner's jobs newest first, created in [since, before) (epoch seconds), in `state` if given
        (the owner-state index: it reads only jobs in that state), `page_size` items a request."""
        condition = _created_between(self.jobs.created_at, since, before)
        if state is None:
            index, key = self.jobs.by_owner, owner  # type: ignore[attr-defined]
        else:
            index, key = self.jobs.by_owner_state, owner_state_key(owner, state)  # type: ignore[attr-defined]
        return iter(
            index.query(key, range_key_condition=condition, scan_index_forward=False, page_size=page_size)
        )

    def iter_all_jobs(self, *, since: float | None = None) -> Iterator[JobModel]:
        """Every user's jobs created at or after `since`: one query of the created-day index per day since
        then (without `since`, a scan of the whole table)."""
        if since is None:
            return iter(self.jobs.scan())
        index = self.jobs.by_created_day  # type: ignore[attr-defined]
        condition = self.jobs.created_at >= since
        return (job for day in _days_since(since) for job in index.query(day, range_key_condition=condition))

    def iter_jobs_of_day(
        self,
        day: str,
        *,
        since: float | None = None,
        before: float | None = None,
        page_size: int | None = None,
    ) -> Iterator[JobModel]:
        index = self.jobs.by_created_day  # type: ignore[attr-defined]
        condition = _created_between(self.jobs.created_at, since, before)
        return iter(
            index.query(day, range_key_condition=condition, scan_index_forward=False, page_size=page_size)
        )

    def newest_jobs(self, owner: str | None, *, since: float, limit: int) -> list[JobModel]:
        """At most `limit` jobs created at or after `since`, newest first: `owner`'s, or everyone's (the
        created-day index, today first); each query asks for no more than what is still wanted."""
        if owner is not None:
            return list(itertools.islice(self.iter_jobs_of(owner, since=since, page_size=limit), limit))
        index = self.jobs.by_created_day  # type: ignore[attr-defined]
        found: list[JobModel] = []
        for day in _days_since(since):
            wanted = limit - len(found)
            if wanted <= 0:
                break
            condition = self.jobs.created_at >= since
            found += index.query(day, range_key_condition=condition, scan_index_forward=False, limit=wanted)
        return found

    def live_jobs(self) -> list[JobModel]:
        """Jobs in a LIVE state: the sparse live index holds only those, so this reads no finished job."""
        index = self.jobs.live_jobs  # type: ignore[attr-defined]
        return [job for key in live_keys(LIVE_JOB) for job in index.query(key)]

    # -- timeline --------------------------------------------------------------------------

    def note(self, job_id: str, kind: str, message: str, detail: dict[str, Any] | None = None) -> None:
        """An event with no state change (a node's report, a block, a teardown)."""
        now = time.time()
        self._event(job_id, now, uuid.uuid4().hex[:8], kind, message, None, detail).save()

    def timeline(self, job_id: str) -> list[EventModel]:
        """The events table's, with the job's first and its launches' (kept in its records) in their place:
        a query, and for a job a GetItem of it and a BatchGetItem of its attempts' clusters."""
        job = self.get(job_id) if job_id.startswith(JOB_PREFIX) else None
        if job is None:
            return list(self.events.query(job_id, consistent_read=True))
        clusters = self.clusters.batch_get(
            [f"{job_id}-{n}" for n in range(int(job.attempt) + 1)], consistent_read=True
        )
        return self.job_timeline(job, clusters)

    def job_timeline(self, job: JobModel, clusters: Iterable[ClusterModel]) -> list[EventModel]:
        """One query of the events table; the kept events come from the records given."""
        events = list(self.events.query(job.job_id, consistent_read=True))
        kept = [job.first_event] if job.first_event is not None else []
        kept += [c.launch_event for c in clusters if c.launch_event is not None]
        events += [self._unkept(job.job_id, fields, job.expires_at) for fields in kept]
        return sorted(events, key=lambda e: e.at)

    def _unkept(self, job_id: str, fields: Any, expires_at: float | None) -> EventModel:
        plain = fields.as_dict() if hasattr(fields, "as_dict") else dict(fields)
        event = self.events(job_id=job_id, expires_at=expires_at)
        for name in EVENT_FIELDS:
            setattr(event, name, plain.get(name))
        return event

    def _event(
        self,
        job_id: str,
        now: float,
        suffix: str,
        kind: str,
        message: str,
        state: str | None,
        detail: dict[str, Any] | None = None,
    ) -> EventModel:
        return self.events(
            job_id=job_id,
            at=_event_key(now, suffix),
            kind=kind,
            message=message[:2000],
            state=state,
            detail=detail or None,
            expires_at=int(now + self.retention_seconds),
        )

    # -- clusters and nodes ----------------------------------------------------------------

    def new_cluster(self, **fields: Any) -> ClusterModel:
        return self.clusters(**fields)

    def new_node_ref(self, instance_id: str, job_id: str, cluster_id: str, rank: int) -> NodeRefModel:
        key = f"node#{instance_id}"
        return self.node_refs(cluster_id=key, job_id=job_id, node_cluster=cluster_id, rank=rank)

    def cluster(self, cluster_id: str | None) -> ClusterModel | None:
        if not cluster_id:
            return None
        try:
            return self.clusters.get(cluster_id, consistent_read=True)
        except DoesNotExist:
            return None

    def node_ref(self, instance_id: str) -> NodeRefModel | None:
        try:
            return self.node_refs.get(f"node#{instance_id}", consistent_read=True)
        except DoesNotExist:
            return None

    def node_actions(self, instance_id: str, **fields: Any) -> list[Action]:
        node = self.clusters.nodes[instance_id]
        return [node[name].set(value) for name, value in fields.items()]

    def update_node(self, cluster: ClusterModel, instance_id: str, **fields: Any) -> bool:
        """Set fields of one node of a cluster; False if the cluster has no such node."""
        condition = self.clusters.nodes[instance_id].exists()
        try:
            cluster.update(actions=self.node_actions(instance_id, **fields), condition=condition)
        except UpdateError as error:
            if _is_condition_failure(error):
                return False
            raise
        return True

    def claim_node(self, cluster: ClusterModel, instance_id: str, name: str, claim: str) -> bool:
        node = self.clusters.nodes[instance_id]
        unclaimed_or_ours = node[name].does_not_exist() | (node[name] == claim)
        try:
            cluster.update(actions=[node[name].set(claim)], condition=node.exists() & unclaimed_or_ours)
        except UpdateError as error:
            if _is_condition_failure(error):
                return False
            raise
        return True

    def mark_cluster_terminated(self, cluster: ClusterModel, facts: AttemptFacts | None = None) -> bool:
        """UP -> TERMINATED; with `facts`, the attempt's cost rollups are added in the same transaction."""
        now = time.time()
        actions: list[Action] = [
            self.clusters.state.set("TERMINATED"),
            self.clusters.terminated_at.set(now),
            self.clusters.live.remove(),
            self.clusters.expires_at.set(int(now + self.retention_seconds)),
        ]
        model = rollup_model(self.settings)
        earlier, last = write_groups(cluster_pieces(cluster, facts, now)) if facts else ([], [])
        for group in earlier:  # whole days, the same on every try: each written once, under its marker
            try:
                with TransactWrite(connection=self.models.connection) as tx:
                    done = marker(model, cluster.cluster_id, group[0].day, int(now + self.retention_seconds))
                    tx.save(done, condition=model.job_id.does_not_exist())
                    add_pieces(tx, model, group)
            except TransactWriteError as error:
                if not _is_condition_failure(error):
                    raise
        try:
            with TransactWrite(connection=self.models.connection) as tx:
                if facts is not None:  # the backfill of a stack made before rollups skips this cluster
                    actions.append(self.clusters.rolled_up.set(True))
                tx.update(cluster, actions, condition=self.clusters.state == "UP")
                add_pieces(tx, model, last)
        except TransactWriteError as error:
            if _is_condition_failure(error):
                return False
            raise
        return True

    def cost_pieces(self, first_day: str, last_day: str, owner: str | None) -> list[CostPiece]:
        """The cost rollups of the UTC days [first_day, last_day]: every user's, or `owner`'s."""
        return read_pieces(self.settings, first_day, last_day, owner)[0]

    def clusters_by_id(self, cluster_ids: Iterable[str]) -> dict[str, ClusterModel]:
        """The cluster records among `cluster_ids` that exist (consistent reads; a BatchGetItem per 100)."""
        wanted = list(dict.fromkeys(cluster_ids))
        found = self.clusters.batch_get(wanted, consistent_read=True) if wanted else []
        return {c.cluster_id: c for c in found}

    def live_clusters(self) -> list[ClusterModel]:
        """Cluster records in state UP, from the sparse live index (no terminated one, no node ref)."""
        index = self.clusters.live_clusters  # type: ignore[attr-defined]
        return [cluster for key in live_keys(LIVE_CLUSTER) for cluster in index.query(key)]


def _created_between(attribute: Any, since: float | None, before: float | None) -> Any:
    if since is not None and before is not None:
        return attribute.between(since, math.nextafter(before, -math.inf))  # a key condition has no "<" here
    if since is not None:
        return attribute >= since
    if before is not None:
        return attribute < before
    return None


def _days_since(since: float, now: float | None = None) -> list[str]:
    """The UTC days from `since`'s to today's, newest first."""
    now = time.time() if now is None else now
    days, moment = [], now
    while True:
        days.append(day_of(moment))
        if day_of(moment) <= day_of(since):
            return days
        moment -= 86400


def _kept(event: EventModel) -> dict[str, Any]:
    """The fields of a timeline event kept inside another record (its key there is the record's)."""
    fields = {name: getattr(event, name) for name in EVENT_FIELDS}
    if hasattr(fields["detail"], "as_dict"):
        fields["detail"] = fields["detail"].as_dict()
    return {name: value for name, value in fields.items() if value is not None}
