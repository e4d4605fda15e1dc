"""The secret values a schedule needs at each firing: kept in AWS Secrets Manager, never in its table row.

One secret per schedule, `<prefix>/schedule/<schedule id>`, holding a JSON object {name: value}: the values
given at create (`--secret K=V`, the body's `secrets`) and any values the task file itself wrote under
`secrets:`. The row keeps the task text with every secret value nulled, and the secret names only; each firing
reads the secret and submits with it, as `launch --secret` does.

Crash windows: the secret is written before the row and deleted after the EventBridge Scheduler schedule
(and before the row, so a retried delete finishes the job). A create that dies between secret and row leaves
a secret no row names, under a schedule id nobody will use again; a firing that finds its secret gone runs
nothing and says so in the schedule's timeline (`schedule#<id>`).
"""

from __future__ import annotations

import json
from typing import Any

import yaml
from botocore.exceptions import ClientError

from shared.aws.sessions import aws_client
from shared.config import Settings
from shared.errors import UserError

MAX_SECRET_BYTES = 60 * 1024  # Secrets Manager holds up to 64 KiB per secret


def schedule_secret_name(settings: Settings, schedule_id: str) -> str:
    return f"{settings.prefix}/schedule/{schedule_id}"


def split_secrets(
    text: str, *, filename: str, env: dict[str, str], secrets: dict[str, str]
) -> tuple[str, dict[str, str]]:
    """(the task text to keep in a table, the secret values to keep in Secrets Manager).

    Every `secrets:` value must be known now (a TaskFileError naming the line of a null one without a value,
    as `launch` says). Values given for names the task does not declare are not kept. One value per name:
    two tasks of a pipeline writing different values for one name are refused (a firing gives one value)."""
    from shared.task import load_pipeline

    pipeline = load_pipeline(text, filename=filename, env_overrides=env, secret_overrides=secrets)
    values: dict[str, str] = {}
    for index, task in enumerate(pipeline.tasks):
        for name, value in (task.secrets or {}).items():
            if values.setdefault(name, value) != value:
                raise UserError(
                    f"tasks of this file give secret {name!r} different values; a schedule keeps one",
                    file=filename,
                    field=f"secrets.{name}",
                    hint=f"task #{index + 1}: leave it null in the file and give it with --secret {name}=...",
                )
    if len(json.dumps(values).encode("utf-8")) > MAX_SECRET_BYTES:
        raise UserError(
            f"the secrets take more than {MAX_SECRET_BYTES // 1024} KiB", field="secrets",
            hint="keep large credentials in a file mount or a bucket",
        )  # fmt: skip
    return _without_secret_values(text), values


def _without_secret_values(text: str) -> str:
    """The text itself when no document writes a secret's value; else the documents again, values nulled."""
    from shared.task.positions import load_documents  # the bounded reader split_secrets' parse passed

    documents = [d.value for d in load_documents(text)]
    holds_values = any(
        any(v is not None for v in d["secrets"].values())
        for d in documents
        if isinstance(d, dict) and isinstance(d.get("secrets"), dict)
    )
    if not holds_values:
        return text
    for document in documents:
        if isinstance(document, dict) and isinstance(document.get("secrets"), dict):
            document["secrets"] = dict.fromkeys(document["secrets"])
    return yaml.safe_dump_all(documents, sort_keys=False)


def _client(settings: Settings) -> Any:
    return aws_client("secretsmanager", settings)


def store_schedule_secrets(settings: Settings, schedule_id: str, values: dict[str, str]) -> str:
    """Create the schedule's secret (a schedule id is new at each create: never one that exists)."""
    name = schedule_secret_name(settings, schedule_id)
    _client(settings).create_secret(
        Name=name, SecretString=json.dumps(values), Description="skyless schedule"
    )
    return name


def read_schedule_secrets(settings: Settings, schedule_id: str) -> dict[str, str] | None:
    """The values, or None when the secret is gone."""
    try:
        answer = _client(settings).get_secret_value(SecretId=schedule_secret_name(settings, schedule_id))
    except ClientError as error:
        if error.response["Error"]["Code"] in ("ResourceNotFoundException", "InvalidRequestException"):
            return None  # InvalidRequest: scheduled for deletion
        raise
    return {str(k): str(v) for k, v in json.loads(answer["SecretString"]).items()}


def delete_schedule_secrets(settings: Settings, schedule_id: str) -> None:
    """Delete at once (no recovery window); a secret already gone is no error."""
    try:
        _client(settings).delete_secret(
            SecretId=schedule_secret_name(settings, schedule_id), ForceDeleteWithoutRecovery=True
        )
    except ClientError as error:
        if error.response["Error"]["Code"] != "ResourceNotFoundException":
            raise
