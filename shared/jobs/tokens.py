"""The credentials of a job's nodes, all derived (HMAC under the control plane's key), so the store keeps
only hashes and nothing needs writing when one is made:

- the **boot token** (`boot_token`) travels in the VM's user-data. It names its job, attempt and expiry
  (the boot window) and is good for one thing: the node's first config fetch, once (shared.jobs.node_claims
  records the claim with a conditional write). Read from user-data after that, it opens nothing.
- the **agent token** (`agent_token`) comes back over HTTPS in that config answer and is what the agent
  reports status with. It is per attempt, so agents of a torn-down cluster are refused.

The key: in AWS, the stack's Secrets Manager secret (`SKYLESS_AGENT_SECRET_ARN`, generated at deploy),
read once per warm container; `SKYLESS_AGENT_SECRET` when given as such (tests); otherwise, on the local
runtime only, a file made once under $SKYLESS_HOME readable by its owner alone.
"""

from __future__ import annotations

import hashlib
import hmac
import os
import secrets
import time
from functools import cache
from pathlib import Path

from shared.config import Settings

BOOT_WINDOW_SECONDS = (
    1800  # a node boots, installs and asks for its config within this (SKYLESS_BOOT_WINDOW_SECONDS)
)


class MissingSecretError(RuntimeError):
    """A Lambda without the stack's key: a deployment fault, never papered over with a local file."""


def control_plane_secret(settings: Settings) -> bytes:
    from_env = os.environ.get("SKYLESS_AGENT_SECRET")
    if from_env:
        return from_env.encode("utf-8")
    arn = os.environ.get("SKYLESS_AGENT_SECRET_ARN")
    if arn:
        return _secret_from_secrets_manager(settings.region, settings.endpoint_url, arn)
    if os.environ.get("AWS_LAMBDA_FUNCTION_NAME"):
        raise MissingSecretError(
            "SKYLESS_AGENT_SECRET_ARN is not set: infra/template.yaml gives it to the functions that sign "
            "or check node credentials"
        )
    return _local_secret_file(settings.local_dir / "agent-secret")


@cache
def _secret_from_secrets_manager(region: str, endpoint_url: str | None, arn: str) -> bytes:
    from shared.aws.sessions import boto3_session

    client = boto3_session().client("secretsmanager", region_name=region, endpoint_url=endpoint_url)
    return str(client.get_secret_value(SecretId=arn)["SecretString"]).encode("utf-8")


def _local_secret_file(path: Path) -> bytes:
    if not path.exists():
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)  # owner only, as the local runtime's
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


def boot_window_seconds() -> int:
    return int(os.environ.get("SKYLESS_BOOT_WINDOW_SECONDS") or BOOT_WINDOW_SECONDS)


def boot_token(settings: Settings, job_id: str, attempt: int, *, now: float | None = None) -> str:
    """`boot.<attempt>.<expires at>.<mac>`: the user-data credential of one attempt's nodes."""
    expires = int((time.time() if now is None else now) + boot_window_seconds())
    return f"boot.{attempt}.{expires}.{_boot_mac(settings, job_id, attempt, expires)}"


def check_boot_token(
    settings: Settings, job_id: str, attempt: int, token: str, *, now: float | None = None
) -> bool:
    """The token is this job's boot token for `attempt`, and its window is still open."""
    parts = token.split(".")
    if len(parts) != 4 or parts[0] != "boot" or not parts[1].isdigit() or not parts[2].isdigit():
        return False
    if int(parts[1]) != attempt or int(parts[2]) < (time.time() if now is None else now):
        return False
    return hmac.compare_digest(parts[3], _boot_mac(settings, job_id, attempt, int(parts[2])))


def _boot_mac(settings: Settings, job_id: str, attempt: int, expires: int) -> str:
    message = f"boot:{job_id}:{attempt}:{expires}".encode()
    return hmac.new(control_plane_secret(settings), message, hashlib.sha256).hexdigest()


def attempt_fields(settings: Settings, job_id: str, attempt: int) -> dict[str, object]:
    """The job fields that start an attempt: its number and its agents' token hash. From that write on,
    agents of earlier attempts are refused with a stop (shared.api.auth.StaleAttemptError)."""
    return {"attempt": attempt, "token_hash": token_hash(agent_token(settings, job_id, attempt))}
