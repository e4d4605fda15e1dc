"""The named-clusters table (pynamodb): users' clusters, the claim on each (owner, name), each cluster's plan,
and its job queue. One table, keyed `pk`/`sk`:

    owner#<owner>     name#<name>     the claim: which cluster holds this name (unique per owner)
    cluster#<key>     cluster         the cluster: state, version, place, nodes, live queue, autostop
    cluster#<key>     plan            its failover plan and launch task (read only while provisioning)
    cluster#<key>     job#<n:08d>     one job of its queue

The cluster item is what node agents poll, so it is kept small (the plan and the jobs live beside it).
Every change is a conditional write: a state move on (state, version), a queue change on the version, as
one transaction with the items that go with it. A write whose condition fails changed nothing and answers
False: the caller reads again or treats it as "someone already did this".

The domain (states and their moves, the queue policy, the operations) is in shared/clusters; this module
only stores. It sits here, below both shared/jobs and shared/clusters, because the orphan reaper
(shared/jobs/reaper.py) must ask it whether a cluster still holds its nodes.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterable
from typing import Any

from pynamodb.exceptions import DoesNotExist, TransactWriteError, UpdateError
from pynamodb.expressions.condition import Condition
from pynamodb.expressions.update import Action
from pynamodb.models import Model
from pynamodb.transactions import TransactWrite

from shared.config import Settings
from shared.store.cluster_tables import (
    CLUSTER_SK,
    JOB_SK_PREFIX,
    PLAN_SK,
    TERMINATED,
    ClaimModel,
    ClusterJobModel,
    ClusterPlanModel,
    NamedClusterModel,
    cluster_models,
    cluster_pk,
    create_cluster_table,
    job_sk,
    name_sk,
    owner_pk,
    timeline_id,
)
from shared.store.jobs import _event_key, _is_condition_failure
from shared.store.live_index import LIVE_NAMED_CLUSTER, live_key, live_keys
from shared.store.models import models_for

__all__ = [
    "ClaimModel",
    "ClusterJobModel",
    "ClusterPlanModel",
    "ClusterStore",
    "NamedClusterModel",
    "cluster_models",
    "create_cluster_table",
]

TxItem = tuple[str, Model, list[Action] | None, Condition | None]  # ("put" | "update" | "delete", ...)


class ClusterStore:
    """Reads and conditional writes of the named-clusters table (and the clusters' timelines)."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.models = cluster_models(settings)
        self.claims = self.models.claims
        self.clusters = self.models.clusters
        self.plans = self.models.plans
        self.jobs = self.models.jobs
        self._base = models_for(settings)
        self.connection = self._base.connection

    # -- reads --------------------------------------------------------------------------------

    def claim(self, owner: str, name: str) -> ClaimModel | None:
        try:
            return self.claims.get(owner_pk(owner), name_sk(name), consistent_read=True)
        except DoesNotExist:
            return None

    def get(self, key: str | None, *, consistent: bool = True) -> NamedClusterModel | None:
        if not key or len(key) > 64:
            return None
        try:
            return self.clusters.get(cluster_pk(key), CLUSTER_SK, consistent_read=consistent)
        except DoesNotExist:
            return None

    def by_name(self, owner: str, name: str) -> NamedClusterModel | None:
        claim = self.claim(owner, name)
        return self.get(claim.cluster_key) if claim is not None else None

    def plan_item(self, key: str) -> ClusterPlanModel | None:
        try:
            return self.plans.get(cluster_pk(key), PLAN_SK, consistent_read=True)
        except DoesNotExist:
            return None

    def job(self, key: str, number: int) -> ClusterJobModel | None:
        try:
            return self.jobs.get(cluster_pk(key), job_sk(number), consistent_read=True)
        except DoesNotExist:
            return None

    def jobs_of(
        self, key: str, *, limit: int | None = None, newest_first: bool = False
    ) -> list[ClusterJobModel]:
        query = self.jobs.query(
            cluster_pk(key),
            self.jobs.sk.startswith(JOB_SK_PREFIX),
            consistent_read=True,
            scan_index_forward=not newest_first,
            limit=limit,
        )
        return list(query)

    def clusters_of(self, owner: str) -> list[NamedClusterModel]:
        claims = self.claims.query(owner_pk(owner), self.claims.sk.startswith("name#"), consistent_read=True)
        found = [self.get(claim.cluster_key) for claim in claims]
        return sorted((c for c in found if c is not None), key=lambda c: c.name)

    def live_clusters(self) -> list[NamedClusterModel]:
        """Every cluster not TERMINATED (the sweeps' view): the sparse live index holds only those."""
        index = self.clusters.live_clusters  # type: ignore[attr-defined]
        return [cluster for key in live_keys(LIVE_NAMED_CLUSTER) for cluster in index.query(key)]

    def holds_nodes(self, key: str, provider_cluster: str) -> bool:
        """Whether the cluster `key` exists, is not TERMINATED and its current launch is `provider_cluster`
        (or an earlier attempt of it is no longer). What the reaper asks before it kills a node."""
        cluster = self.get(key)
        if cluster is None or cluster.state == TERMINATED:
            return False
        # The current incarnation's nodes are the cluster's even before the launch records them (a crash
        # between the two: the redelivered launch finds them, as it is idempotent).
        current = f"{cluster.key}-{int(cluster.incarnation)}"
        return provider_cluster in (cluster.provider_cluster, current)

    # -- writes -------------------------------------------------------------------------------

    def new_cluster(self, **fields: Any) -> NamedClusterModel:
        now = time.time()
        live = None if fields.get("state") == TERMINATED else live_key(LIVE_NAMED_CLUSTER, fields["key"])
        return self.clusters(
            cluster_pk(fields["key"]), CLUSTER_SK, created_at=now, updated_at=now, live=live, **fields
        )

    def new_plan(self, key: str, **fields: Any) -> ClusterPlanModel:
        return self.plans(cluster_pk(key), PLAN_SK, **fields)

    def new_claim(self, owner: str, name: str, key: str) -> ClaimModel:
        return self.claims(owner_pk(owner), name_sk(name), cluster_key=key, created_at=time.time())

    def new_job(self, key: str, number: int, **fields: Any) -> ClusterJobModel:
        now = time.time()
        return self.jobs(
            cluster_pk(key),
            job_sk(number),
            key=key,
            number=number,
            submitted_at=now,
            updated_at=now,
            **fields,
        )

    def create(
        self,
        cluster: NamedClusterModel,
        plan: ClusterPlanModel,
        claim: ClaimModel,
        *,
        replacing: str | None,
        message: str,
    ) -> bool:
        """Record a new cluster and claim its name: False when the name is held (by a cluster other than
        `replacing`, a TERMINATED one whose claim may be taken over)."""
        claim_condition = (
            self.claims.pk.does_not_exist() if replacing is None else (self.claims.cluster_key == replacing)
        )
        items: list[TxItem] = [
            ("put", claim, None, claim_condition),
            ("put", cluster, None, self.clusters.pk.does_not_exist()),
            ("put", plan, None, None),
        ]
        return self.transact(items, event=(cluster.key, message, cluster.state))

    def next_job_number(self, cluster: NamedClusterModel, states: Iterable[str]) -> int | None:
        """Take the cluster's next job number (an atomic counter) while it is in one of `states`."""
        try:
            cluster.update(
                actions=[self.clusters.next_job.add(1)],
                condition=self.clusters.state.is_in(*states),
            )
        except UpdateError as error:
            if _is_condition_failure(error):
                return None
            raise
        return int(cluster.next_job)

    def cluster_actions(self, changes: dict[str, Any]) -> list[Action]:
        """SET/REMOVE actions for top-level fields, and `("active", "3")`-style paths for map entries."""
        actions: list[Action] = []
        for name, value in changes.items():
            if isinstance(name, tuple):
                attribute: Any = getattr(self.clusters, name[0])
                for part in name[1:]:
                    attribute = attribute[part]
            else:
                attribute = getattr(self.clusters, name)
            actions.append(attribute.remove() if value is None else attribute.set(value))
        return actions

    def job_actions(self, changes: dict[Any, Any]) -> list[Action]:
        actions: list[Action] = []
        for name, value in changes.items():
            if isinstance(name, tuple):
                attribute: Any = getattr(self.jobs, name[0])
                for part in name[1:]:
                    attribute = attribute[part]
            else:
                attribute = getattr(self.jobs, name)
            actions.append(attribute.remove() if value is None else attribute.set(value))
        return actions

    def write_cluster(
        self,
        cluster: NamedClusterModel,
        changes: dict[Any, Any],
        *,
        check: str = "version",
        require_states: Iterable[str] = (),
        also: Iterable[TxItem] = (),
        message: str | None = None,
        detail: dict[str, Any] | None = None,
        kind: str | None = None,
    ) -> bool:
        """One conditional update of the cluster (with `also` in the same transaction). `check`: "version"
        (state and version as read: a decision), or "none" (bump the version atomically: a fact that needs
        no decision, such as a node's heartbeat or a job leaving the queue; `require_states` then lists the
        states the cluster must be in)."""
        now = time.time()
        values = {**changes, "updated_at": now}
        if "state" in values:  # the live index changes in the same write as the state
            values["live"] = (
                None if values["state"] == TERMINATED else live_key(LIVE_NAMED_CLUSTER, cluster.key)
            )
        actions = self.cluster_actions(values)
        if check == "version":
            actions.append(self.clusters.version.set(int(cluster.version) + 1))
            condition: Condition | None = (self.clusters.state == cluster.state) & (
                self.clusters.version == cluster.version
            )
        else:
            actions.append(self.clusters.version.add(1))
            states = list(require_states)
            condition = self.clusters.state.is_in(*states) if states else self.clusters.pk.exists()
        state = values.get("state")
        event = None
        if message is not None:
            event = (cluster.key, message, state or None, detail, kind)
        items: list[TxItem] = [("update", cluster, actions, condition), *also]
        if len(items) == 1 and event is None:
            # Alone (a node's heartbeat, say): a plain conditional update, billed half a transaction's units.
            try:
                cluster.update(actions=actions, condition=condition)  # reads the item back, as updated
            except UpdateError as error:
                if _is_condition_failure(error):
                    return False
                raise
            return True
        if not self.transact(items, event=event):
            return False
        for name, value in values.items():
            if isinstance(name, str):
                setattr(cluster, name, value)
        cluster.version = int(cluster.version) + 1  # with "none", a lower bound: read again to decide
        return True

    def transact(self, items: Iterable[TxItem], *, event: tuple[Any, ...] | None = None) -> bool:
        """The items (and a timeline event) in one transaction; False when a condition failed."""
        try:
            with TransactWrite(connection=self.connection) as tx:
                for kind, record, actions, condition in items:
                    if kind == "put":
                        tx.save(record, condition=condition)
                    elif kind == "update":
                        tx.update(record, actions or [], condition=condition)
                    elif kind == "delete":
                        tx.delete(record, condition=condition)
                    else:
                        raise ValueError(kind)
                if event is not None:
                    key, message, state, detail, kind = (*event, None, None, None)[:5]
                    tx.save(self._event(key, message, state, detail, kind=kind))
        except TransactWriteError as error:
            if _is_condition_failure(error):
                return False
            raise
        return True

    def job_update(self, job: ClusterJobModel, changes: dict[Any, Any], *, check: str = "version") -> TxItem:
        """The transaction item that applies `changes` to a job: on (state, version) as read, or (check
        "node") only while the job is still live in the state read."""
        values = {**changes, "updated_at": time.time()}
        actions = self.job_actions(values)
        if check == "version":
            actions.append(self.jobs.version.set(int(job.version) + 1))
            condition: Condition = (self.jobs.state == job.state) & (self.jobs.version == job.version)
        else:
            actions.append(self.jobs.version.add(1))
            condition = self.jobs.state == job.state
        return ("update", job, actions, condition)

    def update_job_node(self, job: ClusterJobModel, instance_id: str, fields: dict[str, Any]) -> bool:
        """Record one node's report on a job (no decision): False when the job is no longer in the state
        read (it moved on; read again)."""
        changes = {("nodes", instance_id, name): value for name, value in fields.items()}
        return self.transact([self.job_update(job, changes, check="node")])

    def note(self, key: str, kind: str, message: str, detail: dict[str, Any] | None = None) -> None:
        self._event(key, message, None, detail, kind=kind).save()

    def timeline(self, key: str, limit: int = 200) -> list[Any]:
        events = self._base.events.query(
            timeline_id(key), consistent_read=True, scan_index_forward=False, limit=limit
        )
        return list(reversed(list(events)))

    def _event(
        self,
        key: str,
        message: str,
        state: str | None,
        detail: dict[str, Any] | None = None,
        *,
        kind: str | None = None,
    ) -> Any:
        now = time.time()
        return self._base.events(
            job_id=timeline_id(key),
            at=_event_key(now, uuid.uuid4().hex[:8]),
            # not "state": a cluster's moves are no job's, for notifications and runs/<job>/status.json
            kind=kind or ("cluster" if state else "note"),
            message=message[:2000],
            state=state,
            detail=detail or None,
        )
