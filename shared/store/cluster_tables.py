"""The named-clusters table's item models (pynamodb), bound to one Settings: the claim on a name, the cluster,
its plan, its jobs. One table, keyed `pk`/`sk` (shared/store/cluster_records.py says which item is where);
`cluster_models(settings)` builds the bound classes once, `create_cluster_table` makes the table."""

from __future__ import annotations

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
from pynamodb.indexes import AllProjection, GlobalSecondaryIndex
from pynamodb.models import Model

from shared.config import Settings
from shared.store.models import SharedSessionConnection

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
    live = UnicodeAttribute(null=True)  # set only while not TERMINATED (shared/store/live_index.py)


class LiveNamedClustersIndex(GlobalSecondaryIndex["NamedClusterModel"]):
    """Sparse: only cluster items with `live` set, i.e. not TERMINATED."""

    class Meta:
        index_name = "live-index"
        projection = AllProjection()

    live = UnicodeAttribute(hash_key=True)
    created_at = NumberAttribute(range_key=True)


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
        return self.clusters  # the model that declares the table's index


def _bind(base: type[Model], settings: Settings, **extra: object) -> type[Model]:
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
    model = type(f"{base.__name__}_{settings.prefix}", (base,), {"Meta": meta, **extra})
    model._get_connection().connection.__class__ = SharedSessionConnection  # type: ignore[attr-defined]
    return model


@cache
def cluster_models(settings: Settings) -> ClusterModels:
    return ClusterModels(
        claims=_bind(ClaimModel, settings),  # type: ignore[arg-type]
        clusters=_bind(  # type: ignore[arg-type]
            NamedClusterModel,
            settings,
            live_clusters=type(f"LiveNamedClustersIndex_{settings.prefix}", (LiveNamedClustersIndex,), {})(),
        ),
        plans=_bind(ClusterPlanModel, settings),  # type: ignore[arg-type]
        jobs=_bind(ClusterJobModel, settings),  # type: ignore[arg-type]
    )


def create_cluster_table(settings: Settings) -> None:
    model = cluster_models(settings).table()
    if not model.exists():
        model.create_table(wait=True, billing_mode="PAY_PER_REQUEST")
