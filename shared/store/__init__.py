"""DynamoDB state (pynamodb): `models` (tables bound to one Settings), `jobs` (the `JobStore`: every move
a conditional write with its timeline event), `schedules` and `users` (their tables),
`cluster_records` (named clusters, their name claims and job queues; item models in `cluster_tables`).
"""

__all__ = ["cluster_records", "jobs", "models", "schedules", "users"]
