"""Names of the VMs skyless starts: `skyless-<cluster id>-<rank>`, so the clouds without tags
(Lambda Cloud, RunPod) still tell us the job, cluster, attempt and rank of every machine."""

from __future__ import annotations

import re

from shared.clouds.base import ATTEMPT_TAG, CLUSTER_TAG, JOB_TAG, MANAGED_TAG, RANK_TAG

PREFIX = "skyless-"
_NAME = re.compile(r"^skyless-(?P<cluster>.+)-(?P<rank>\d{3})$")


def node_name(cluster_id: str, rank: int) -> str:
    """Zero-padded rank, so sorting names sorts ranks (rank order is instance-id order)."""
    return f"{PREFIX}{cluster_id}-{rank:03d}"


def split_cluster_id(cluster_id: str) -> tuple[str, str | None]:
    """`job-abc-3` -> ("job-abc", "3"): a cluster id is `<job id>-<attempt>`."""
    job, sep, attempt = cluster_id.rpartition("-")
    return (job, attempt) if sep and attempt.isdigit() else (cluster_id, None)


def tags_from_name(name: str) -> dict[str, str] | None:
    """The skyless tags a node name carries, or None when the VM is not one of ours."""
    match = _NAME.match(name or "")
    if match is None:
        return None
    cluster_id = match["cluster"]
    job_id, attempt = split_cluster_id(cluster_id)
    tags = {MANAGED_TAG: "true", JOB_TAG: job_id, CLUSTER_TAG: cluster_id, RANK_TAG: str(int(match["rank"]))}
    if attempt is not None:
        tags[ATTEMPT_TAG] = attempt
    return tags
