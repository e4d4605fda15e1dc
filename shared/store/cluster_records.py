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
from dataclasses import dataclass
from functools import cache
from typing import Any

from pynamodb.attributes import (
    BinaryAttribute,
    BooleanAttribute,
    MapAttribute,
    NumberAttribute,
    UnicodeAttribute,
)
from pynamodb.exceptions import DoesNotExist, TransactWriteError, UpdateError
from pynamodb.expressions.condition import Condition
from pynamodb.expressions.update import Action
from pynamodb.models import Model
from pynamodb.transactions import TransactWrite

from shared.config import Settings
from shared.store.jobs import _event_key, _is_condition_failure
from shared.store.models import SharedSessionConnection, models_for

TERMINATED = "TERMINATED"  # the one state whose nodes nobody holds (shared.clusters.states has them all)
CLUSTER_SK = "cluster"
PLAN_SK = "plan"
JOB_SK_PREFIX = "job#"


def cluster_pk(key: str) -> str:
    return f"cluster#{key}"


def owner_pk(owner: str) -> str:
    return f"owner#{owner}"


def name_sk(name: str) -> str:
    return f"name#{name}"


def job_sk(number: int) -> str:
    return f"{JOB_SK_PREFIX}{int(number):08d}"


def timeline_id(key: str) -> str:
    """The events-table partition of a cluster's timeline."""
    return f"cluster#{key}"


class ClaimModel(Model):
    class Meta:
        table_name = "unbound-named-clusters"

    pk = UnicodeAttribute(hash_key=True)
    sk = UnicodeAttribute(range_key=True)
    cluster_key = UnicodeAttribute()
    created_at = NumberAttribute()


class NamedClusterModel(Model):
    class Meta:
        table_name = "unbound-named-clusters"

    pk = UnicodeAttribute(hash_key=True)
    sk = UnicodeAttribute(range_key=True)
    key = UnicodeAttribute()
    owner = UnicodeAttribute()
    name = UnicodeAttribute()
    state = UnicodeAttribute()
    version = NumberAttribute(default=0)
    reason = UnicodeAttribute(null=True)
    pending_op = UnicodeAttribute(null=True)  # INIT: "launch" | "start"
    incarnation = NumberAttribute(default=0)  # +1 per fresh launch attempt (a stop/start keeps it)
    provider_cluster = UnicodeAttribute(null=True)  # `<key>-<incarnation>`: what the cloud tags
    provider = UnicodeAttribute(null=True)
    cloud = UnicodeAttribute(null=True)
    region = UnicodeAttribute(null=True)
    zone = UnicodeAttribute(null=True)
    instance_type = UnicodeAttribute(null=True)
    use_spot = BooleanAttribute(default=False)
    hourly_price = NumberAttribute(null=True)  # one node, $/h
    num_nodes = NumberAttribute(default=1)
    accelerator = UnicodeAttribute(null=True)
    accelerator_count = NumberAttribute(default=0)
    candidate_index = NumberAttribute(default=0)
    blocklist = UnicodeAttribute(default="[]")
    wait_rounds = NumberAttribute(default=0)
    transient_retries = NumberAttribute(default=0)
    nodes: MapAttribute[str, Any] = MapAttribute(default=dict)  # instance id -> {rank, ip, heartbeat_at, ...}
    next_job = NumberAttribute(default=0)
    active: MapAttribute[str, Any] = MapAttribute(default=dict)  # "<n>" -> {state, gpus, nodes}: live jobs
    autostop_minutes = NumberAttribute(default=-1)  # -1: off
    autostop_down = BooleanAttribute(default=False)
    idle_since = NumberAttribute(null=True)
    cost = NumberAttribute(default=0)  # $ of the periods the cluster was up, before the current one
    up_since = NumberAttribute(null=True)  # when the nodes of the current period were launched/started
    token_hash = UnicodeAttribute(default="-")
    ssh_keys = UnicodeAttribute(null=True)  # JSON list of public keys the agents install
    ssh_cidrs = UnicodeAttribute(null=True)  # JSON list of addresses port 22 is open to
    created_at = NumberAttribute()
    updated_at = NumberAttribute()


class ClusterPlanModel(Model):
    class Meta:
        table_name = "unbound-named-clusters"

    pk = UnicodeAttribute(hash_key=True)
    sk = UnicodeAttribute(range_key=True)
    plan_z = BinaryAttribute(legacy_encoding=False)  # zlib of the Plan JSON
    task = UnicodeAttribute()  # the launch task (pipeline JSON, secrets removed): image, disk, ports, labels
    minimize = UnicodeAttribute(default="cost")
    clouds = UnicodeAttribute(null=True)


class ClusterJobModel(Model):
    class Meta:
        table_name = "unbound-named-clusters"

    pk = UnicodeAttribute(hash_key=True)
    sk = UnicodeAttribute(range_key=True)
    key = UnicodeAttribute()
    number = NumberAttribute()
    owner = UnicodeAttribute()
    name = UnicodeAttribute(null=True)
    state = UnicodeAttribute()
    version = NumberAttribute(default=0)
    reason = UnicodeAttribute(null=True)
    task = UnicodeAttribute(null=True)  # pipeline JSON of one task, when small
    task_key = UnicodeAttribute(null=True)  # bucket key of it, when not
    with_setup = BooleanAttribute(default=False)
    workdir_key = UnicodeAttribute(null=True)
    file_mounts = UnicodeAttribute(null=True)  # JSON {remote path: upload key}
    num_nodes = NumberAttribute(default=1)
    gpus = NumberAttribute(default=0)  # accelerators per node the job asks for (0: the whole node)
    command = UnicodeAttribute(null=True)  # the first line of `run`, for `skyless queue`
    nodes: MapAttribute[str, Any] = MapAttribute(default=dict)  # instance id -> {rank, phase, exit_code}
    submitted_at = NumberAttribute()
    started_at = NumberAttribute(null=True)
    ended_at = NumberAttribute(null=True)
    updated_at = NumberAttribute()


@dataclass(frozen=True)
class ClusterModels:
    claims: type[ClaimModel]
    clusters: type[NamedClusterModel]
    plans: type[ClusterPlanModel]
    jobs: type[ClusterJobModel]

    def table(self) -> type[Model]:
        return self.claims


def _bind(base: type[Model], settings: Settings) -> type[Model]:
    meta = type(
        "Meta",
        (),
        {
            "table_name": settings.table_name("named-clusters"),
            "region": settings.region,
            "host": settings.endpoint_url,
            "billing_mode": "PAY_PER_REQUEST",
        },
    )
    model = type(f"{base.__name__}_{settings.prefix}", (base,), {"Meta": meta})
    model._get_connection().connection.__class__ = SharedSessionConnection  # type: ignore[attr-defined]
    return model


@cache
def cluster_models(settings: Settings) -> ClusterModels:
    return ClusterModels(
        claims=_bind(ClaimModel, settings),  # type: ignore[arg-type]
        clusters=_bind(NamedClusterModel, settings),  # type: ignore[arg-type]
        plans=_bind(ClusterPlanModel, settings),  # type: ignore[arg-type]
        jobs=_bind(ClusterJobModel, settings),  # type: ignore[arg-type]
    )


def create_cluster_table(settings: Settings) -> None:
    model = cluster_models(settings).table()
    if not model.exists():
        model.create_table(wait=True, billing_mode="PAY_PER_REQUEST")


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
        """Every cluster not TERMINATED (the sweeps' view; a scan)."""
        condition = (self.clusters.sk == CLUSTER_SK) & (self.clusters.state != TERMINATED)
        return list(self.clusters.scan(condition))

    def holds_nodes(self, key: str, provider_cluster: str) -> bool:
        """Whether the cluster `key` exists, is not TERMINATED and its current launch is `provider_cluster`
        (or an earlier attempt of it is no longer). What the reaper asks before it kills a node."""
        cluster = self.get(key)
        if cluster is None or cluster.state == TERMINATED:
            return False
        return cluster.provider_cluster == provider_cluster

    # -- writes -------------------------------------------------------------------------------

    def new_cluster(self, **fields: Any) -> NamedClusterModel:
        now = time.time()
        return self.clusters(cluster_pk(fields["key"]), CLUSTER_SK, created_at=now, updated_at=now, **fields)

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
