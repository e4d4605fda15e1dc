"""Slack webhook URLs live in AWS Secrets Manager; tables hold only the secret's name.

Names: `<prefix>/notify/user/<sha256(owner)[:16]>/slack`, `<prefix>/notify/team/<sha256(team)[:16]>/slack`
and `<prefix>/notify/job/<job id>/slack`.
"""

from __future__ import annotations

import hashlib
from typing import Any

from botocore.exceptions import ClientError

from shared.aws.sessions import aws_client
from shared.config import Settings


def user_secret_name(settings: Settings, owner: str) -> str:
    digest = hashlib.sha256(owner.encode("utf-8")).hexdigest()[:16]
    return f"{settings.prefix}/notify/user/{digest}/slack"


def team_secret_name(settings: Settings, team: str) -> str:
    digest = hashlib.sha256(team.encode("utf-8")).hexdigest()[:16]
    return f"{settings.prefix}/notify/team/{digest}/slack"


def job_secret_name(settings: Settings, job_id: str) -> str:
    return f"{settings.prefix}/notify/job/{job_id}/slack"


def _client(settings: Settings) -> Any:
    return aws_client("secretsmanager", settings)


def store_webhook(settings: Settings, name: str, url: str) -> str:
    """Create or replace the secret; answers its name (what a table may keep)."""
    client = _client(settings)
    try:
        client.create_secret(Name=name, SecretString=url, Description="skyless Slack webhook")
    except ClientError as error:
        if error.response["Error"]["Code"] != "ResourceExistsException":
            raise
        client.put_secret_value(SecretId=name, SecretString=url)
    return name


def read_webhook(settings: Settings, name: str) -> str | None:
    try:
        return str(_client(settings).get_secret_value(SecretId=name)["SecretString"])
    except ClientError as error:
        if error.response["Error"]["Code"] in ("ResourceNotFoundException", "InvalidRequestException"):
            return None
        raise


def delete_webhook(settings: Settings, name: str) -> None:
    try:
        _client(settings).delete_secret(SecretId=name, ForceDeleteWithoutRecovery=True)
    except ClientError as error:
        if error.response["Error"]["Code"] != "ResourceNotFoundException":
            raise


def mask_webhook(url: str) -> str:
    """What a user may be shown: the host and the last 4 characters (`https://hooks.slack.com/…x9Zq`)."""
    scheme, _, rest = url.partition("://")
    host = rest.split("/", 1)[0] if rest else ""
    tail = url[-4:] if len(url) > 24 else ""
    return f"{scheme}://{host}/…{tail}" if host else "…"
