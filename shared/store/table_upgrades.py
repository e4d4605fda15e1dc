"""Bring tables made before the live index up to date: add the missing indexes, turn on TTL, and backfill the
index attributes of records written before them (`live`, `owner_state`, `created_day`).

Without the backfill a job that was live at the upgrade would be missing from the live index, and so from
every sweep: `create_stack` runs it (the local runtime at every `local up`; it backfills only a stack not yet
upgraded), and `python -m shared.store.table_upgrades` runs it once against a deployed stack, backfilling
always (its Settings from the environment, as the functions read them). It
is idempotent: each record is written only when it lacks the attribute, on a condition that its state is
still the one read, so a move in between wins and the next run picks the record up again.
"""

from __future__ import annotations

import time
from typing import Any

from pynamodb.exceptions import UpdateError
from pynamodb.models import Model

from shared.aws.sessions import aws_client
from shared.config import Settings
from shared.store.cluster_tables import CLUSTER_SK, TERMINATED, cluster_models
from shared.store.jobs import _is_condition_failure
from shared.store.live_index import (
    LIVE_NAMED_CLUSTER,
    cluster_state_fields,
    day_of,
    job_state_fields,
    live_key,
)
from shared.store.models import models_for

TTL_ATTRIBUTE = "expires_at"


def upgrade_tables(settings: Settings, *, always_backfill: bool = False) -> dict[str, int]:
    """Indexes, backfill, then TTL; returns how many records of each kind were backfilled. The backfill runs
    when an index was missing or TTL is not on yet (TTL is turned on last: a run that died before it is
    finished by the next), so a stack already upgraded reads no history here."""
    models = models_for(settings)
    added = []
    named = cluster_models(settings).table()
    for indexed in (models.jobs, models.clusters, *([named] if named.exists() else [])):
        added += add_missing_indexes(settings, indexed)
    done: dict[str, int] = {}
    if added or always_backfill or not ttl_enabled(settings, models.jobs.Meta.table_name):
        done = backfill(settings)
        if named.exists():
            done["named_clusters"] = backfill_named_clusters(settings)
    for model in models.all():
        enable_ttl(settings, model.Meta.table_name)
    return done


def add_missing_indexes(settings: Settings, model: type[Model]) -> list[str]:
    """Create the model's global secondary indexes the table lacks (one per UpdateTable, as DynamoDB asks)."""
    client = aws_client("dynamodb", settings)
    table = model.Meta.table_name
    present = {
        i["IndexName"]
        for i in client.describe_table(TableName=table)["Table"].get("GlobalSecondaryIndexes", [])
    }
    schema = model._get_schema()  # what create_table would send
    definitions = {d["AttributeName"]: d["AttributeType"] for d in schema["attribute_definitions"]}
    added = []
    for index in schema.get("global_secondary_indexes", []):
        if index["index_name"] in present:
            continue
        keys = sorted(index["key_schema"], key=lambda k: k["KeyType"] != "HASH")  # the hash key first
        client.update_table(
            TableName=table,
            AttributeDefinitions=[
                {"AttributeName": k["AttributeName"], "AttributeType": definitions[k["AttributeName"]]}
                for k in keys
            ],
            GlobalSecondaryIndexUpdates=[
                {
                    "Create": {
                        "IndexName": index["index_name"],
                        "KeySchema": keys,
                        "Projection": index["projection"],
                    }
                }
            ],
        )
        added.append(index["index_name"])
        _wait_until_active(client, table, index["index_name"])  # DynamoDB builds one index at a time
    return added


def _wait_until_active(client: Any, table: str, index_name: str, timeout: float = 3600.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        described = client.describe_table(TableName=table)["Table"]
        statuses = {i["IndexName"]: i.get("IndexStatus") for i in described.get("GlobalSecondaryIndexes", [])}
        if described["TableStatus"] == "ACTIVE" and statuses.get(index_name) in ("ACTIVE", None):
            return
        time.sleep(5)
    raise TimeoutError(f"index {index_name} of {table} is not ACTIVE after {timeout:.0f} s")


def ttl_enabled(settings: Settings, table: str) -> bool:
    client = aws_client("dynamodb", settings)
    current = client.describe_time_to_live(TableName=table)["TimeToLiveDescription"]
    return current.get("TimeToLiveStatus") in ("ENABLED", "ENABLING")


def enable_ttl(settings: Settings, table: str) -> None:
    if ttl_enabled(settings, table):
        return
    client = aws_client("dynamodb", settings)
    client.update_time_to_live(
        TableName=table, TimeToLiveSpecification={"Enabled": True, "AttributeName": TTL_ATTRIBUTE}
    )


def backfill(settings: Settings) -> dict[str, int]:
    """One scan of the jobs and clusters tables (a one-off: the only time anything reads the history)."""
    models = models_for(settings)
    now = time.time()
    done = {"jobs": 0, "clusters": 0}
    jobs = models.jobs
    for job in jobs.scan(jobs.owner_state.does_not_exist() | jobs.created_day.does_not_exist()):
        fields: dict[str, Any] = {
            **job_state_fields(
                job.job_id, job.owner, job.state, float(job.updated_at), settings.retention_seconds
            ),
            "created_day": day_of(float(job.created_at)),
        }
        done["jobs"] += _set_if_state(job, jobs, fields)
    clusters = models.clusters
    condition = clusters.launched_at.exists() & clusters.live.does_not_exist() & (clusters.state == "UP")
    for cluster in clusters.scan(condition):
        done["clusters"] += _set_if_state(
            cluster, clusters, cluster_state_fields(cluster.cluster_id, "UP", now, 0)
        )
    return done


def backfill_named_clusters(settings: Settings) -> int:
    """Mark the named clusters that are not TERMINATED as live (a one-off scan after the index is added)."""
    clusters = cluster_models(settings).clusters
    condition = (clusters.sk == CLUSTER_SK) & (clusters.state != TERMINATED) & clusters.live.does_not_exist()
    return sum(
        _set_if_state(cluster, clusters, {"live": live_key(LIVE_NAMED_CLUSTER, cluster.key)})
        for cluster in clusters.scan(condition)
    )


def _set_if_state(record: Any, model: Any, fields: dict[str, Any]) -> int:
    actions = [
        getattr(model, n).remove() if v is None else getattr(model, n).set(v) for n, v in fields.items()
    ]
    try:
        record.update(actions=actions, condition=model.state == record.state)
    except UpdateError as error:
        if _is_condition_failure(error):
            return 0  # it moved on: that write set the attributes itself
        raise
    return 1


if __name__ == "__main__":
    print(upgrade_tables(Settings.from_env(), always_backfill=True))
