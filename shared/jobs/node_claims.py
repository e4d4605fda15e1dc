"""A node's first (and only) config fetch with its boot token.

The boot token in a VM's user-data can be read by anyone who can read the instance's attributes, so it
buys exactly one config answer per node: the fetch that gets it records, with a conditional write on the
node's entry of the cluster record, the hash of the key the agent made for itself at start
(`X-Skyless-Node-Key`, never written down). The same agent asking again (its answer lost on the way)
is answered again; any other caller with the boot token is refused. The answer carries the attempt's agent
token, which the agent reports status with; the config, its secrets and presigned URLs never touch disk.
"""

from __future__ import annotations

from typing import Any

from shared.config import Settings
from shared.errors import AuthError
from shared.jobs.agent_reports import agent_config
from shared.jobs.tokens import agent_token, token_hash
from shared.wiring import wiring_for

CLAIM_FIELD = "boot_claim"


def first_config(
    settings: Settings, job_id: str, instance_id: str, attempt: int, node_key: str
) -> dict[str, Any] | None:
    """The node's config with its agent token; None while not every node is known, or while the node's
    attempt is not yet the job's (made before break: the running attempt is fenced first) (answer 425).
    AuthError when another agent already fetched this node's config with the boot token."""
    job = wiring_for(settings).store.get(job_id)
    if job is not None and int(job.attempt) < attempt:
        return None
    config = agent_config(wiring_for(settings), job_id, instance_id)
    if config is None:
        return None
    if not claim_node(settings, job_id, instance_id, node_key):
        raise AuthError("this node's boot credential has been used", field="Authorization")
    return {**config.as_dict(), "agent_token": agent_token(settings, job_id, attempt)}


def claim_node(settings: Settings, job_id: str, instance_id: str, node_key: str) -> bool:
    """True for the agent whose key is (or now becomes) the node's claim; False for anyone else."""
    store = wiring_for(settings).store
    job = store.get(job_id)
    cluster = store.cluster(job.cluster_id) if job is not None else None
    if cluster is None:
        return False
    return store.claim_node(cluster, instance_id, CLAIM_FIELD, token_hash(node_key))
