"""A cluster record's nodes as plain dicts, by instance id and by rank."""

from __future__ import annotations

from typing import Any

from shared.store.models import ClusterModel, JobModel

# The job's state on its own cluster that says every node reached a phase. The move to it writes the job, not
# the last reporting node's own phase (one DynamoDB item less per job), so that node's record lags behind.
PHASE_OF_JOB_STATE = {"RUNNING": "running", "SUCCEEDED": "succeeded"}


def nodes_of(cluster: ClusterModel) -> dict[str, dict[str, Any]]:
    raw = cluster.nodes
    data = raw.as_dict() if hasattr(raw, "as_dict") else dict(raw or {})
    return {iid: (n.as_dict() if hasattr(n, "as_dict") else dict(n)) for iid, n in data.items()}


def by_rank(cluster: ClusterModel) -> list[tuple[str, dict[str, Any]]]:
    return sorted(nodes_of(cluster).items(), key=lambda item: int(item[1]["rank"]))


def task_running_on(job: JobModel, cluster: ClusterModel) -> bool:
    """True when the job is RUNNING on this cluster: every node has started its task, whatever a node's own
    recorded phase still says."""
    return job.state == "RUNNING" and job.cluster_id == cluster.cluster_id


def node_phases(job: JobModel, cluster: ClusterModel) -> dict[str, str | None]:
    """Each node's phase as the job's state vouches for it (see PHASE_OF_JOB_STATE), by instance id."""
    implied = PHASE_OF_JOB_STATE.get(job.state) if job.cluster_id == cluster.cluster_id else None
    recorded = {iid: node.get("phase") for iid, node in nodes_of(cluster).items()}
    if implied is None:
        return recorded
    earlier = (None, "launched", "setting_up", "running")
    return {iid: implied if phase in earlier else phase for iid, phase in recorded.items()}
