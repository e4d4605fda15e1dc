"""The HTTPS API's edges: request and response models (pydantic) and who the caller is.

`models` (jobs, plans, uploads, agents), `cluster_models` (named clusters and their agents), `cost_models`,
`notification_models`, `schedule_models`, `storage_models` (buckets), `admin_models` (users, teams, grants,
the audit log, team views), `report_models` (the provider scorecard), `budget_models`; `auth` turns a bearer
token into a user (API keys, stored hashed) or a node agent (per-attempt tokens). The routes are in
functions/submit/.
"""

__all__ = [
    "admin_models",
    "auth",
    "budget_models",
    "cluster_models",
    "cost_models",
    "models",
    "notification_models",
    "report_models",
    "schedule_models",
    "storage_models",
]
