"""A named cluster's node credentials, derived from the control-plane secret (the store keeps only hashes):

- the **boot token** travels in user-data (or the local node's environment) and expires with the boot window,
  as a job's (shared/jobs/tokens.py): it buys one claim per node (`POST /cluster-agent/{key}/claim`, bound to
  the key the agent made at start), whose answer is
- the **agent token**, one per cluster: the agent polls and reports with it, and keeps it in its home
  (`~/.skyless/cluster-token`, 0600), because a stopped node boots again long after its boot token expired.
"""

from __future__ import annotations

import hashlib
import hmac

from shared.config import Settings
from shared.jobs.tokens import boot_token, check_boot_token, control_plane_secret, token_hash


def cluster_agent_token(settings: Settings, key: str) -> str:
    return hmac.new(control_plane_secret(settings), f"cluster:{key}".encode(), hashlib.sha256).hexdigest()


def cluster_token_hash(settings: Settings, key: str) -> str:
    return token_hash(cluster_agent_token(settings, key))


def token_matches(token: str, stored_hash: str | None) -> bool:
    return bool(stored_hash) and hmac.compare_digest(token_hash(token), str(stored_hash))


def cluster_boot_token(settings: Settings, key: str) -> str:
    return boot_token(settings, f"cluster:{key}", 0)


def check_cluster_boot_token(settings: Settings, key: str, token: str) -> bool:
    return check_boot_token(settings, f"cluster:{key}", 0, token)
