"""A stack's history, fast: finished jobs written as batches of the very items the job store writes for one
(the job, its timeline's three events, its cluster record and one node ref), for the scale tests and
benchmarks/scale.py. Items come from the store itself: one real job is run through `create`/`move` and
`also_save` on a MemoryJobStore, and its items are copied with new keys and times.
"""

from __future__ import annotations

import time
import zlib
from collections.abc import Iterator
from typing import Any

from shared.optimizer.plan import Candidate, Plan, TaskPlan
from shared.states import JobState
from shared.store.cost_rollups import AttemptFacts, attempt_pieces
from shared.store.memory import MemoryJobStore

Item = dict[str, Any]
DAY = 86400.0


def _plan_z(candidates: int = 12) -> bytes:
    """A compressed plan of `candidates` places, as planning stores it."""
    zones = [f"us-east-1{z}" for z in "abcdef"] * 2
    rows = [
        Candidate(
            cloud="aws",
            region="us-east-1",
            zone=zone,
            instance_type="g5.xlarge",
            accelerator="A10G",
            accelerator_count=1,
            vcpus=4,
            memory_gib=16,
            use_spot=True,
            hourly_price=0.42 + n / 100,
            num_nodes=1,
            estimated_hours=1.0,
            estimated_cost=0.42 + n / 100,
        )
        for n, zone in enumerate(zones[:candidates])
    ]
    plan = Plan(
        objective="cost", tasks=[TaskPlan(task_name="train", num_nodes=1, candidates=rows)], total_cost=0.42
    )
    return zlib.compress(plan.to_json().encode())


def _template(owner: str) -> tuple[Item, list[Item], list[Item]]:
    """(job item, event items, cluster-table items) of one finished job, as the store wrote them."""
    store = MemoryJobStore()
    job = store.new_job(
        job_id="tmpl", owner=owner, state="PENDING", version=0, token_hash="h" * 64, name="train"
    )
    assert store.create(job, "submitted from hello.yaml")
    assert store.move(job, JobState.PLANNED, "planned: 12 candidates", changes={"plan_z": _plan_z()})
    cluster = store.new_cluster(
        cluster_id="tmpl-0", job_id="tmpl", attempt=0, provider="aws", cloud="aws", region="us-east-1",
        zone="us-east-1a", instance_type="g5.xlarge", use_spot=True, hourly_price=0.42, num_nodes=1,
        state="UP", nodes={"i-0": {"rank": 0, "phase": "launched"}}, launched_at=time.time(),
    )  # fmt: skip
    node_ref = store.new_node_ref("i-0", "tmpl", "tmpl-0", 0)
    assert store.move(job, JobState.SETTING_UP, "1 node launched", also_save=[cluster, node_ref])
    assert store.move(job, JobState.RUNNING, "setup done")
    record = store.cluster("tmpl-0")
    assert record is not None and store.mark_cluster_terminated(record)
    assert store.move(job, JobState.SUCCEEDED, "every node exited 0")
    events = [e for partition in store._events.values() for e in partition.values()]
    return store._jobs["tmpl"], events, list(store._clusters.values())


def finished_items(
    count: int, owner: str = "alice", *, ended_before: float | None = None, prefix: str = "hist"
) -> Iterator[tuple[str, Item]]:
    """("jobs" | "events" | "clusters", item) for `count` finished jobs, one a minute back from
    `ended_before` (default: a day ago), ids `<prefix>-<owner>-<n>`."""
    job_t, events_t, clusters_t = _template(owner)
    start = (ended_before or time.time() - DAY) - count * 60.0
    for n in range(count):
        job_id, at = f"{prefix}-{owner}-{n:07d}", start + n * 60.0
        job = dict(job_t)  # shallow: stores replace whole items, never mutate one
        job["job_id"] = {"S": job_id}
        job["created_at"] = {"N": repr(at)}
        job["updated_at"] = {"N": repr(at + 50)}
        job["created_day"] = {"S": time.strftime("%Y-%m-%d", time.gmtime(at))}
        job["cluster_id"] = {"S": f"{job_id}-0"}
        yield "jobs", job
        for k, event in enumerate(events_t):
            item = dict(event)
            item["job_id"] = {"S": job_id}
            item["at"] = {"S": f"{at + k:017.6f}#v{k:05d}"}
            yield "events", item
        for cluster in clusters_t:
            item = dict(cluster)
            key = item["cluster_id"]["S"]
            item["cluster_id"] = {"S": f"node#i-{job_id}" if key.startswith("node#") else f"{job_id}-0"}
            item["job_id"] = {"S": job_id}
            if "node_cluster" in item:
                item["node_cluster"] = {"S": f"{job_id}-0"}
            yield "clusters", item


def seed_memory(
    store: MemoryJobStore, count: int, owner: str = "alice", *, ended_before: float | None = None
) -> None:
    """Put the items straight into the store's tables (no reads counted), and each job's cost into the
    rollups as the store's end of its attempt adds it (40 s at the template cluster's $0.42/h on spot)."""
    facts = AttemptFacts(owner=owner, on_demand_hourly=1.006, first_of_job=True)
    for table, item in finished_items(count, owner, ended_before=ended_before):
        if table == "jobs":
            store._jobs[item["job_id"]["S"]] = item
            at = float(item["created_at"]["N"])
            store._add_pieces(
                attempt_pieces(
                    cloud="aws", use_spot=True, hourly_price=0.42, num_nodes=1, launched_at=at + 10,
                    ended_at=at + 50, facts=facts,
                )
            )  # fmt: skip
        elif table == "clusters":
            store._clusters[item["cluster_id"]["S"]] = item
        else:
            store._events.setdefault(item["job_id"]["S"], {})[item["at"]["S"]] = item


def seed_dynamo(settings: Any, count: int, owner: str = "alice", *, prefix: str = "hist") -> None:
    """BatchWriteItem, 25 items a request, into the stack's tables (ids as `finished_items` gives them:
    a prefix `job-` reads as a submitted job's id does, `hist` as no job's)."""
    from shared.aws.sessions import aws_client

    client = aws_client("dynamodb", settings)
    batch: dict[str, list[Item]] = {}

    def flush() -> None:
        request = {name: [{"PutRequest": {"Item": item}} for item in items] for name, items in batch.items()}
        while request:
            request = client.batch_write_item(RequestItems=request).get("UnprocessedItems") or {}
        batch.clear()

    pending = 0
    for table, item in finished_items(count, owner, prefix=prefix):
        batch.setdefault(settings.table_name(table), []).append(item)
        pending += 1
        if pending == 25:
            flush()
            pending = 0
    if pending:
        flush()
