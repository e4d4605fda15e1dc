"""A cluster's agent token: one per cluster (its nodes keep it across stop and start, as a VM keeps its
user-data), derived from the control-plane secret so that the store keeps only its hash."""

from __future__ import annotations

import hashlib
import hmac

from shared.config import Settings
from shared.jobs.tokens import control_plane_secret, token_hash


def cluster_agent_token(settings: Settings, key: str) -> str:
    return hmac.new(control_plane_secret(settings), f"cluster:{key}".encode(), hashlib.sha256).hexdigest()


def cluster_token_hash(settings: Settings, key: str) -> str:
    return token_hash(cluster_agent_token(settings, key))


def token_matches(token: str, stored_hash: str | None) -> bool:
    return bool(stored_hash) and hmac.compare_digest(token_hash(token), str(stored_hash))
