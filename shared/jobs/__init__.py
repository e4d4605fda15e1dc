"""The job lifecycle: one module per step. Handlers, the API and tests call these.

Steps: `submission` (a task file becomes a PENDING job), `planning` (optimize), `provisioning` (launch on
the next candidate, failover), `agent_reports` (what nodes say: config, phases, heartbeats), `recovery`
(preemptions and lost nodes), `instance_events` (cloud preemption events), `cancellation`, and the sweeps
`reconcile` (lost events, silent nodes, stuck jobs) and `reaper` (VMs no job owns). Each step answers an
`outcomes.Outcome`. `job_storage` is the jobs side of bucket mounts;
`node_claims` lets each node fetch its config once with its boot token. Reads for the API: `views` (one job,
a user's jobs, logs), `job_filters`, `blocks` (places a job may not use again) and `cost_report`;
`run_status` writes runs/<job>/status.json. The rest (`costs`, `messages`, `nodes`, `task_records`,
`tokens`, `file_mounts`, `node_env`) are the steps' parts.
"""

__all__ = [
    "agent_reports",
    "blocks",
    "cancellation",
    "cost_report",
    "file_mounts",
    "instance_events",
    "job_filters",
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
