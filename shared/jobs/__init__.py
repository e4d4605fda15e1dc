"""The job lifecycle: one module per step. Handlers, the API and tests call these.

Steps: `submission` (a task file becomes a PENDING job), `planning` (optimize), `provisioning` (launch on
the next candidate, failover), `agent_reports` (what nodes say: config, phases, heartbeats), `recovery`
(preemptions and lost nodes), `instance_events` (cloud preemption events), `cancellation`, and the sweeps
`reconcile` (lost events, silent nodes, stuck jobs) and `reaper` (VMs no job owns). Each step answers
an `outcomes.Outcome`. `views` reads jobs for
the API; `run_status` writes runs/<job>/status.json. The rest (`blocks`, `costs`, `messages`, `nodes`,
`task_records`, `tokens`, `file_mounts`) are the steps' parts.
"""

__all__ = [
    "agent_reports",
    "cancellation",
    "file_mounts",
    "instance_events",
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
