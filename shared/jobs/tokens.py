"""The per-job agent token: derived (HMAC of the job and attempt under a control-plane secret), so the
provisioner can hand it to the nodes while the store keeps only its SHA-256 hash. A new attempt gets
a new token, so agents of a torn-down cluster are refused."""

from __future__ import annotations

import hashlib
import hmac
import os
import secrets
from pathlib import Path

from shared.config import Settings


def control_plane_secret(settings: Settings) -> bytes:
    """`SKYLESS_AGENT_SECRET` (deployed: from Secrets Manager), else a file made once under $SKYLESS_HOME."""
    from_env = os.environ.get("SKYLESS_AGENT_SECRET")
    if from_env:
        return from_env.encode("utf-8")
    path: Path = settings.local_dir / "agent-secret"
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        except FileExistsError:
            pass  # another process made it first
        else:
            with os.fdopen(fd, "w") as handle:
                handle.write(secrets.token_hex(32))
    return path.read_text().strip().encode("utf-8")


def agent_token(settings: Settings, job_id: str, attempt: int) -> str:
    key = control_plane_secret(settings)
    return hmac.new(key, f"{job_id}:{attempt}".encode(), hashlib.sha256).hexdigest()


def token_hash(token: str) -> str:
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


def attempt_fields(settings: Settings, job_id: str, attempt: int) -> dict[str, object]:
    """The job fields that start an attempt: its number and its agents' token hash. From that write on,
    agents of earlier attempts are refused with a stop (shared.auth.StaleAttemptError)."""
    return {"attempt": attempt, "token_hash": token_hash(agent_token(settings, job_id, attempt))}
