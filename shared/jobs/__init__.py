"""The job lifecycle: one module per step. Handlers, the API and tests call these.

Steps, each answering an `outcomes.Outcome`: `submission` (a task file becomes a job), `planning`
(optimize), `provisioning` (launch on the next candidate, failover), `agent_reports` (what nodes say:
config, phases, heartbeats), `recovery` (preemptions and lost nodes), `instance_events` (cloud preemption
events), `cancellation`, and the sweeps `reconcile` (lost events, silent nodes, stuck jobs) and `reaper`
(VMs no job owns).
Beside them: `job_storage` (the jobs side of bucket mounts), `node_claims` (each node fetches its config
once, with its boot token), `deadlines` (a deadline job's record, and what `plan --deadline` prices),
`containers` (a task's `docker:` image: refused at submit where no provider can run it, and the node's
config).
Reads for the API: `views`, `job_listing` (a user's jobs a page at a time, with a cursor),
`every_users_jobs` (every user's, for an admin key), `job_filters`,
`blocks` (places a job may not use again), `cost_report`, `contract_use` (the deployment's contracts: what
plans honour, what live jobs hold of each reservation, its use in a cost report), `contract_admin` (an admin
sets, clears and shows them);
`budget_checks` (cost caps and monthly budgets: refused launches, the sweep's notices and stops);
`run_status` writes runs/<job>/status.json. The other modules are the steps' parts.
"""

__all__ = [
    "agent_reports",
    "blocks",
    "budget_checks",
    "cancellation",
    "containers",
    "contract_admin",
    "contract_use",
    "cost_report",
    "deadlines",
    "every_users_jobs",
    "file_mounts",
    "instance_events",
    "job_filters",
    "job_listing",
    "job_storage",
    "node_claims",
    "outcomes",
    "planning",
    "provisioning",
    "reaper",
    "reconcile",
    "recovery",
    "run_status",
    "submission",
    "tokens",
    "views",
]
