"""pynamodb models of the control plane's tables, bound to one Settings (table prefix and endpoint).

Models are classes, and a class carries its table name; so each Settings gets its own set of classes,
built once and cached. Everything else asks `models_for(settings)`.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from typing import Any, TypeVar, cast

import botocore.session
from pynamodb.attributes import (
    BinaryAttribute,
    BooleanAttribute,
    MapAttribute,
    NumberAttribute,
    UnicodeAttribute,
)
from pynamodb.connection import Connection
from pynamodb.indexes import AllProjection, GlobalSecondaryIndex
from pynamodb.models import Model

from shared.aws.service_models import DYNAMODB_API_VERSION
from shared.aws.sessions import botocore_session
from shared.config import Settings


class JobModel(Model):
    """One job: what to run, the plan, where it stands. Kept small: bulky task text goes to the bucket."""

    class Meta:
        table_name = "unbound-jobs"

    job_id = UnicodeAttribute(hash_key=True)
    owner = UnicodeAttribute()
    name = UnicodeAttribute(null=True)
    state = UnicodeAttribute()
    version = NumberAttribute(default=0)
    attempt = NumberAttribute(default=0)
    job_number = NumberAttribute(null=True)  # the owner's small integer id (shared/store/job_numbers.py)
    task = UnicodeAttribute(null=True)  # pipeline JSON (validated), when small
    first_event: MapAttribute[str, Any] = MapAttribute(null=True)  # its first timeline event (store/jobs.py)
    task_key = UnicodeAttribute(null=True)  # bucket key of the pipeline JSON, when large
    task_index = NumberAttribute(default=0)  # which task of the pipeline runs now
    plan = UnicodeAttribute(null=True)  # Plan JSON, as jobs planned before plan_z have it
    # zlib-compressed Plan JSON: a plan of many candidates is tens of KB as text, and every later write of
    # the job is billed by the whole item's size (twice, in a transaction), so it is kept ~10x smaller.
    plan_z = BinaryAttribute(null=True, legacy_encoding=False)
    candidate_index = NumberAttribute(default=0)
    blocklist = UnicodeAttribute(default="[]")  # JSON list of Block
    minimize = UnicodeAttribute(default="cost")
    clouds = UnicodeAttribute(null=True)  # JSON list of enabled clouds, None = all
    workdir_key = UnicodeAttribute(null=True)
    file_mounts = UnicodeAttribute(null=True)  # JSON {remote path: upload key} of local file mounts
    cluster_id = UnicodeAttribute(null=True)
    token_hash = UnicodeAttribute()
    reason = UnicodeAttribute(null=True)
    wait_rounds = NumberAttribute(default=0)
    transient_retries = NumberAttribute(default=0)
    restarts = NumberAttribute(default=0)
    recoveries = NumberAttribute(default=0)
    lost_in_a_row = NumberAttribute(default=0)  # attempts lost before their task started, not preempted
    created_at = NumberAttribute()
    updated_at = NumberAttribute()
    cost = NumberAttribute(default=0)
    source = UnicodeAttribute(null=True)  # how it was submitted: "cli" (the API) | "upload" | "schedule"
    source_ref = UnicodeAttribute(null=True)  # the upload's key, or the schedule's name
    # a deadline job (shared/jobs/deadlines.py); all None for a job without one
    deadline_at = NumberAttribute(null=True)  # epoch seconds
    work_seconds = NumberAttribute(null=True)  # compute the job needs on its planned hardware
    restart_overhead = NumberAttribute(null=True)  # seconds a launch costs before progress resumes
    work_done = NumberAttribute(null=True)  # seconds, counted when a cluster ends
    market = UnicodeAttribute(null=True)  # the policy's last market: spot | on_demand (None: none running)
    policy_reason = UnicodeAttribute(null=True)  # why, in words
    spot_history = UnicodeAttribute(null=True)  # JSON: place -> shared.spot_policy.SpotHistory fields
    next_check_at = NumberAttribute(null=True)  # the policy's next scheduled moment of truth
    overran_at = NumberAttribute(null=True)  # first seen past its work_seconds, still running (noted once)
    # Job groups (shared/jobs/job_groups.py): a group lists its members; a member names its group.
    group_tasks = UnicodeAttribute(null=True)  # JSON list of the member job ids (a group's record)
    group_done_at = NumberAttribute(null=True)  # when every primary task had ended
    group_id = UnicodeAttribute(null=True)  # the group of a member job
    group_index = NumberAttribute(null=True)  # the member's task index in the group's file
    # budgets (shared/jobs/budget_checks.py): the job's cost cap, what to do at it, and why it is stopping
    max_cost = NumberAttribute(null=True)  # USD
    max_cost_action = UnicodeAttribute(null=True)  # "stop" (None) | "warn"
    budget_stop = UnicodeAttribute(null=True)
    data_sources = UnicodeAttribute(null=True)  # JSON: the buckets it reads, placed at submit (gravity)
    # whether a refused launch was noted beside the timeline (shared/jobs/failover.py), so the provider report
    # reads that partition only then: False from create, True before the first one is noted; None on jobs
    # created before this was kept, whose refusals are read as ever
    refusals_noted = BooleanAttribute(null=True)
    # Indexes (shared/store/live_index.py says how each is kept): `live` is set only while the job is live
    # (the sweeps' sparse index), `owner_state` serves state filters, `created_day` the all-users report;
    # `expires_at` (epoch seconds, DynamoDB TTL) is set when the job ends.
    live = UnicodeAttribute(null=True)
    owner_state = UnicodeAttribute(null=True)
    created_day = UnicodeAttribute(null=True)
    expires_at = NumberAttribute(null=True)


class ClusterModel(Model):
    """The VMs (nodes) of one launch of one job. `nodes` maps instance id -> {rank, ip, phase, ...}."""

    class Meta:
        table_name = "unbound-clusters"

    cluster_id = UnicodeAttribute(hash_key=True)
    job_id = UnicodeAttribute()
    attempt = NumberAttribute()
    provider = UnicodeAttribute()
    cloud = UnicodeAttribute()
    region = UnicodeAttribute()
    zone = UnicodeAttribute(null=True)
    instance_type = UnicodeAttribute()
    use_spot = BooleanAttribute(default=False)
    hourly_price = NumberAttribute(null=True)  # one node, $/h
    num_nodes = NumberAttribute()
    state = UnicodeAttribute()  # UP | TERMINATED
    nodes: MapAttribute[str, Any] = MapAttribute(default=dict)
    launched_at = NumberAttribute()
    terminated_at = NumberAttribute(null=True)
    live = UnicodeAttribute(null=True)  # set only while UP: the sweeps' sparse index
    expires_at = NumberAttribute(null=True)  # DynamoDB TTL, set when TERMINATED
    rolled_up = BooleanAttribute(null=True)  # set with TERMINATED when the cost rollups counted the attempt
    launch_event: MapAttribute[str, Any] = MapAttribute(null=True)  # its launch event (store/jobs.py)


class NodeRefModel(Model):
    """Which job and cluster an instance id belongs to (a cloud's event names only the instance).

    Lives in the clusters table under the key `node#<instance id>`.
    """

    class Meta:
        table_name = "unbound-clusters"

    cluster_id = UnicodeAttribute(hash_key=True)
    job_id = UnicodeAttribute()
    node_cluster = UnicodeAttribute()
    rank = NumberAttribute()
    expires_at = NumberAttribute(null=True)  # DynamoDB TTL: the retention period after it was written


class EventModel(Model):
    """The append-only timeline of a job. `at` is "<epoch seconds, fixed width>#<unique suffix>"."""

    class Meta:
        table_name = "unbound-events"

    job_id = UnicodeAttribute(hash_key=True)
    at = UnicodeAttribute(range_key=True)
    kind = UnicodeAttribute()  # "state" | "node" | "launch" | "block" | "note"
    message = UnicodeAttribute()
    state = UnicodeAttribute(null=True)
    detail: MapAttribute[str, Any] = MapAttribute(null=True)
    expires_at = NumberAttribute(null=True)  # DynamoDB TTL: the retention period after it was written


class JobNumberModel(Model):
    """A job's number (shared/store/job_numbers.py): in the events table, partition `numbers#<owner>`, sort
    key the zero-padded number."""

    class Meta:
        table_name = "unbound-events"

    partition = UnicodeAttribute(hash_key=True, attr_name="job_id")
    number_key = UnicodeAttribute(range_key=True, attr_name="at")
    target = UnicodeAttribute()  # the job id


class OwnerIndex(GlobalSecondaryIndex["JobModel"]):
    class Meta:
        index_name = "owner-index"
        projection = AllProjection()

    owner = UnicodeAttribute(hash_key=True)
    created_at = NumberAttribute(range_key=True)


class LiveJobsIndex(GlobalSecondaryIndex["JobModel"]):
    """Sparse: only jobs with `live` set, i.e. live ones."""

    class Meta:
        index_name = "live-index"
        projection = AllProjection()

    live = UnicodeAttribute(hash_key=True)
    created_at = NumberAttribute(range_key=True)


class OwnerStateIndex(GlobalSecondaryIndex["JobModel"]):
    class Meta:
        index_name = "owner-state-index"
        projection = AllProjection()

    owner_state = UnicodeAttribute(hash_key=True)
    created_at = NumberAttribute(range_key=True)


class CreatedDayIndex(GlobalSecondaryIndex["JobModel"]):
    class Meta:
        index_name = "created-day-index"
        projection = AllProjection()

    created_day = UnicodeAttribute(hash_key=True)
    created_at = NumberAttribute(range_key=True)


class LiveClustersIndex(GlobalSecondaryIndex["ClusterModel"]):
    """Sparse: only cluster records with `live` set, i.e. UP ones (node refs never have it)."""

    class Meta:
        index_name = "live-index"
        projection = AllProjection()

    live = UnicodeAttribute(hash_key=True)
    launched_at = NumberAttribute(range_key=True)


@dataclass(frozen=True)
class Models:
    jobs: type[JobModel]
    clusters: type[ClusterModel]
    events: type[EventModel]
    node_refs: type[NodeRefModel]
    job_numbers: type[JobNumberModel]
    connection: Connection

    def all(self) -> tuple[type[Model], ...]:
        return (self.jobs, self.clusters, self.events)


M = TypeVar("M", bound=Model)


class SharedSessionConnection(Connection):
    """A pynamodb connection whose client comes from the thread's shared botocore session, on the DynamoDB
    model cut to what pynamodb calls (shared.aws.service_models)."""

    @property
    def session(self) -> botocore.session.Session:
        return cast(botocore.session.Session, _CutDynamoDBSession(botocore_session()))


class _CutDynamoDBSession:
    """The shared session, whose `create_client` (all pynamodb calls) asks for the cut DynamoDB model."""

    def __init__(self, session: botocore.session.Session) -> None:
        self.shared = session

    def create_client(self, service_name: str, *args: Any, **kwargs: Any) -> Any:
        return self.shared.create_client(service_name, *args, api_version=DYNAMODB_API_VERSION, **kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.shared, name)


def _bind(base: type[Model], table_name: str, settings: Settings, **extra: object) -> type[Model]:
    meta = type(
        "Meta",
        (),
        {
            "table_name": table_name,
            "region": settings.region,
            "host": settings.endpoint_url,
            "billing_mode": "PAY_PER_REQUEST",
        },
    )
    return with_shared_session(type(f"{base.__name__}_{settings.prefix}", (base,), {"Meta": meta, **extra}))


def with_shared_session(model: type[M]) -> type[M]:
    """pynamodb builds a plain Connection (and so a botocore session of its own, which loads the endpoint
    and service data again: ~40-80 ms at a cold start) per table; this one shares the thread's session."""
    model._get_connection().connection.__class__ = SharedSessionConnection
    return model


@cache
def models_for(settings: Settings) -> Models:
    def index(base: type[Any]) -> Any:
        return type(f"{base.__name__}_{settings.prefix}", (base,), {})()

    jobs = _bind(
        JobModel,
        settings.table_name("jobs"),
        settings,
        by_owner=index(OwnerIndex),
        live_jobs=index(LiveJobsIndex),
        by_owner_state=index(OwnerStateIndex),
        by_created_day=index(CreatedDayIndex),
    )
    clusters = _bind(
        ClusterModel, settings.table_name("clusters"), settings, live_clusters=index(LiveClustersIndex)
    )
    return Models(
        jobs=jobs,  # type: ignore[arg-type]
        clusters=clusters,  # type: ignore[arg-type]
        events=_bind(EventModel, settings.table_name("events"), settings),  # type: ignore[arg-type]
        node_refs=_bind(NodeRefModel, settings.table_name("clusters"), settings),  # type: ignore[arg-type]
        job_numbers=_bind(JobNumberModel, settings.table_name("events"), settings),  # type: ignore[arg-type]
        connection=SharedSessionConnection(region=settings.region, host=settings.endpoint_url),
    )
