"""DynamoDB state (pynamodb): `job_store` (the `JobStore` port the lifecycle asks, and its write contract),
`jobs` (`DynamoJobStore`: every move a conditional write with its timeline event; `memory` holds the
in-memory one for tests), `models` (tables bound to one Settings), `schedules`, `notifications` and
`reaper_marks` (their ports, tables and DynamoDB adapters; `memory_records` the in-memory ones), `users`
(its table), `cluster_records` (named clusters, their name claims and job queues; item models in
`cluster_tables`), `table_upgrades` (indexes, TTL and backfill for tables made before the live index;
`live_index` says what the index attributes hold), `job_numbers` (each job's number per owner, SkyPilot's
managed job id).
"""

__all__ = [
    "cluster_records",
    "job_numbers",
    "job_store",
    "jobs",
    "models",
    "notifications",
    "reaper_marks",
    "schedules",
    "table_upgrades",
    "users",
]
