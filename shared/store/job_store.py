"""The job store's port: what the lifecycle (shared/jobs/) asks of its records, and the write contract
both implementations keep — DynamoDB (`shared.store.jobs.DynamoJobStore`) and memory
(`shared.store.memory.MemoryJobStore`, for tests without an endpoint). tests/unit/test_job_store_contract.py
runs the same assertions against both.

Records are the item classes of `shared.store.models` (`JobModel`, `ClusterModel`, `EventModel`,
`NodeRefModel`) used as plain values: callers read and set their attributes, and only the store writes them.
Build new ones with the store's `new_job` / `new_cluster` / `new_node_ref`.

The contract:
- Every job write is conditional on the (state, version) the caller read (but `mark_refusals_noted`, a flag
  that only turns on and so races with nothing). A write whose condition fails
  changed nothing — not the job, not its timeline, not the records written with it — and answers False;
  the caller reads that as "someone already did this" (a duplicate, a late or out-of-order message).
- A successful write bumps `version`, sets `updated_at`, and updates the caller's record in place.
- A move, its timeline event and its companion writes (`also_save`, `also_update`) happen together or not
  at all.
- Reads are strongly consistent: a read after a successful write sees it.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from shared.optimizer.cooling import Cooling
from shared.states import JobState
from shared.store.cost_rollups import AttemptFacts, CostPiece
from shared.store.models import ClusterModel, EventModel, JobModel, NodeRefModel


@dataclass(frozen=True)
class NodeFields:
    """Set `fields` of one node of `cluster`; a companion write of a move (the report completing a step)."""

    cluster: ClusterModel
    instance_id: str
    fields: Mapping[str, Any]


CompanionUpdate = NodeFields


class JobStore(Protocol):
    # -- jobs ----------------------------------------------------------------------------------------

    def new_job(self, **fields: Any) -> JobModel:
        """An unsaved job record (`create` writes it)."""
        ...

    def create(self, job: JobModel, message: str, detail: dict[str, Any] | None = None) -> bool:
        """Record a new job with its first timeline event and, unless it is a job group's task, its owner's
        next number (`job.job_number`: 1, 2, ... without gaps, shared/store/job_numbers.py); False (and
        nothing written, no number taken) when the id exists."""
        ...

    def job_id_numbered(self, owner: str, number: int) -> str | None:
        """The id of `owner`'s job `number` (one key read), or None: another owner's number is never found."""
        ...

    def get(self, job_id: str) -> JobModel | None:
        """The job, or None (also for an empty or over-long id)."""
        ...

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
        """Move `job` to `to` if it is still in the state and version it was read in, with a "state" event
        and the companion writes, all or nothing. IllegalTransition (before any write) for a move the
        table of states does not allow. `changes` values of None remove the attribute."""
        ...

    def save_progress(
        self,
        job: JobModel,
        changes: dict[str, Any],
        message: str | None = None,
        *,
        kind: str = "note",
        detail: dict[str, Any] | None = None,
    ) -> bool:
        """Record progress within a state (version-checked as a move is); an event of `kind` (with `detail`)
        when `message`, written in the same transaction: once however many copies of a step race."""
        ...

    def mark_refusals_noted(self, job: JobModel) -> None:
        """Set the job's `refusals_noted` (True), on the stored record and on `job`; neither its version nor
        `updated_at` changes. Idempotent; nothing written for a job that does not exist."""
        ...

    def jobs_of(self, owner: str, limit: int = 200) -> list[JobModel]:
        """The owner's newest jobs first, at most `limit`."""
        ...

    def iter_jobs_of(
        self,
        owner: str,
        *,
        since: float | None = None,
        state: str | None = None,
        before: float | None = None,
        page_size: int | None = None,
    ) -> Iterator[JobModel]:
        """The owner's jobs newest first, created in [since, before) (epoch seconds); only those in `state`
        when given (read from the owner-state index: no other job is read); `page_size` items a request."""
        ...

    def iter_all_jobs(self, *, since: float | None = None) -> Iterator[JobModel]:
        """Every user's jobs created at or after `since`, in no particular order (reads the days since
        `since` from the created-day index; without `since`, the whole table)."""
        ...

    def iter_jobs_of_day(
        self,
        day: str,
        *,
        since: float | None = None,
        before: float | None = None,
        page_size: int | None = None,
    ) -> Iterator[JobModel]:
        """Every user's jobs created on the UTC day `day` (`YYYY-MM-DD`) in [since, before), newest first:
        one Query of the created-day index, `page_size` items a request."""
        ...

    def newest_jobs(self, owner: str | None, *, since: float, limit: int) -> list[JobModel]:
        """At most `limit` jobs created at or after `since`, newest first, `owner`'s or everyone's; reads no
        more than `limit` jobs."""
        ...

    def live_jobs(self) -> list[JobModel]:
        """Jobs in a LIVE state (shared/states.py), in no particular order; reads no finished job."""
        ...

    # -- timeline ------------------------------------------------------------------------------------

    def note(self, job_id: str, kind: str, message: str, detail: dict[str, Any] | None = None) -> None:
        """Append an event with no state change (unconditional; `job_id` may be any partition name)."""
        ...

    def timeline(self, job_id: str) -> list[EventModel]:
        """The partition's events, oldest first."""
        ...

    def job_timeline(self, job: JobModel, clusters: Iterable[ClusterModel]) -> list[EventModel]:
        """`timeline(job.job_id)` from the job's record and its attempts' cluster records, already read (the
        first event and the launches are kept in them): no read of either again."""
        ...

    # -- clusters and nodes --------------------------------------------------------------------------

    def new_cluster(self, **fields: Any) -> ClusterModel:
        """An unsaved cluster record (a move's `also_save` writes it)."""
        ...

    def new_node_ref(self, instance_id: str, job_id: str, cluster_id: str, rank: int) -> NodeRefModel:
        """An unsaved instance → (job, cluster, rank) record (a move's `also_save` writes it)."""
        ...

    def cluster(self, cluster_id: str | None) -> ClusterModel | None: ...

    def node_ref(self, instance_id: str) -> NodeRefModel | None: ...

    def update_node(self, cluster: ClusterModel, instance_id: str, **fields: Any) -> bool:
        """Set fields of one node of a cluster; False (nothing written) if the cluster has no such node."""
        ...

    def claim_node(self, cluster: ClusterModel, instance_id: str, name: str, claim: str) -> bool:
        """Set the node's field `name` to `claim` if it is unset or already `claim`; False (nothing written)
        when it holds another value or the cluster has no such node."""
        ...

    def mark_cluster_terminated(self, cluster: ClusterModel, facts: AttemptFacts | None = None) -> bool:
        """UP → TERMINATED (with `terminated_at`); False (nothing written) if the record is not UP. With
        `facts`, the attempt's cost rollups (shared/store/cost_rollups.py) are added in the same write, so an
        attempt ended twice is counted once."""
        ...

    def cost_pieces(self, first_day: str, last_day: str, owner: str | None) -> list[CostPiece]:
        """The cost rollups of the UTC days [first_day, last_day] (`YYYY-MM-DD`): every user's (owner None)
        or `owner`'s; reads one query per month, the days' items only."""
        ...

    def clusters_by_id(self, cluster_ids: Iterable[str]) -> dict[str, ClusterModel]:
        """The cluster records among `cluster_ids` that exist."""
        ...

    def live_clusters(self) -> list[ClusterModel]:
        """Cluster records in state UP; reads no terminated one."""
        ...


Evidence = tuple[list[Cooling], dict[str, list[tuple[float, str]]]]  # cooling places, refusals by zone


class Cooldowns(Protocol):
    """Recent spot preemptions and refused spot launches by zone, for the cool-down policy. Only the newest
    entries are kept, whatever the history (shared/store/cooldowns.py: KEPT_PER_ZONE of each kind a zone,
    KEPT_IN_ALL in all; the rest are removed past a margin)."""

    def preemptions(self) -> dict[str, list[str]]:
        """Each place's counted entries (`"<epoch>#<cluster id>"`), newest first."""
        ...

    def preempted(
        self, cloud: str, region: str, zone: str | None, cluster_id: str, at: float | None = None
    ) -> None:
        """Count one preemption of `cluster_id` there (idempotent: the same entry twice counts once)."""
        ...

    def refused(self, cloud: str, region: str, zone: str | None, who: str, at: float | None = None) -> None:
        """Count one spot launch refused for capacity there (`who`: the job's attempt)."""
        ...

    def cooling(self, now: float | None = None) -> list[Cooling]:
        """The zones and regions cooling now; forgets the entries it no longer counts once a zone holds more
        than PRUNE_PAST_PER_ZONE of a kind or the record more than PRUNE_PAST_IN_ALL (store/cooldowns.py)."""
        ...

    def evidence(self, now: float | None = None) -> Evidence:
        """`cooling`, and each zone's refused spot launches as (epoch seconds, who), from one read."""
        ...


class CooldownsReadOnce:
    """The cool-down record read once for one plan-and-launch (or one job view): the plan's ordering
    (cooling places) and the launch's spot gate (refused launches) come from the same GetItem, milliseconds
    apart, where each read it before. A refusal this call writes drops the read, so nothing after it reads
    around its own write; another job's write between the two uses is the race the two reads already had."""

    def __init__(self, record: Cooldowns) -> None:
        self.record = record
        self._evidence: Evidence | None = None

    def preemptions(self) -> dict[str, list[str]]:
        return self.record.preemptions()

    def preempted(
        self, cloud: str, region: str, zone: str | None, cluster_id: str, at: float | None = None
    ) -> None:
        self._evidence = None
        self.record.preempted(cloud, region, zone, cluster_id, at)

    def refused(self, cloud: str, region: str, zone: str | None, who: str, at: float | None = None) -> None:
        self._evidence = None
        self.record.refused(cloud, region, zone, who, at)

    def cooling(self, now: float | None = None) -> list[Cooling]:
        return self.evidence(now)[0]

    def evidence(self, now: float | None = None) -> Evidence:
        if self._evidence is None:
            self._evidence = self.record.evidence(now)
        return self._evidence
