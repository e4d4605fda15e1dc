"""The secrets of an uploaded task file: named by reference, never carried in the upload.

Object metadata is readable by anyone who may read the object (`HeadObject`), is copied with it, and is kept
for the object's life, so a value there would be a secret in clear text beside the task. An upload names a
Secrets Manager secret instead: `x-amz-meta-skyless-secrets: <name>` means the secret
`<prefix>/uploads/<owner>/<name>`, a JSON object `{"HF_TOKEN": "..."}` whose values fill the task's `secrets`.

- The owner's own namespace only: the name is read under the owner of the upload, so an upload can use only
  secrets made for that owner (in AWS, grant each user `secretsmanager:CreateSecret`/`PutSecretValue` on
  `<prefix>/uploads/<their user id>/*`, as bucket writes on `tasks/<their user id>/*`). The submit function
  may read `<prefix>/uploads/*` and nothing else of Secrets Manager's but the stack's own secrets.
- Only for the owner the bucket vouches for: the user of a file's `tasks/<user id>/` prefix (or, directly
  under `tasks/`, the local runtime's user); metadata never names the owner (shared/uploads/intake.py).
- A missing secret, or one without a value the task needs, is a rejection (`<key>.error.json`) naming the
  secret and the line of the task's field. Values are never in a report, a log or a table.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

import yaml
from botocore.exceptions import ClientError

from shared.aws.sessions import aws_client
from shared.config import Settings
from shared.errors import TaskFileError, UserError

SECRETS_METADATA = "skyless-secrets"
FIELD = f"x-amz-meta-{SECRETS_METADATA}"
NAME_PATTERN = re.compile(r"[A-Za-z0-9_+=.@-]+(/[A-Za-z0-9_+=.@-]+)*")
MAX_NAME_CHARS = 256
UNREADABLE = (
    "ResourceNotFoundException",
    "AccessDeniedException",
    "InvalidRequestException",
    "DecryptionFailure",
)


@dataclass(frozen=True)
class SecretReference:
    name: str  # the full Secrets Manager name
    values: dict[str, str] | None  # None: no such secret (or this stack may not read it)


def upload_secret_name(settings: Settings, owner: str, name: str) -> str:
    return f"{settings.prefix}/uploads/{owner}/{name}"


def secret_reference(
    settings: Settings, key: str, metadata: dict[str, str], *, owner: str
) -> SecretReference | None:
    """The secret the upload names and its values; None when it names none. UserError (naming the metadata
    field) for a name that is not one."""
    raw = metadata.get(SECRETS_METADATA, "").strip()
    if not raw:
        return None
    if len(raw) > MAX_NAME_CHARS or ".." in raw or not NAME_PATTERN.fullmatch(raw):
        raise UserError(
            f"not a secret name: {raw[:60]!r}",
            file=key,
            field=FIELD,
            hint="letters, digits and _+=.@- in /-separated parts, e.g. hf or team/hf",
        )
    name = upload_secret_name(settings, owner, raw)
    if not NAME_PATTERN.fullmatch(name):
        raise UserError(f"owner {owner[:40]!r} cannot have secrets (its id is no secret name)", file=key,
                        field=FIELD)  # fmt: skip
    try:
        answer = aws_client("secretsmanager", settings).get_secret_value(SecretId=name)
    except ClientError as error:
        if error.response["Error"]["Code"] in UNREADABLE:
            return SecretReference(name, None)
        raise
    return SecretReference(name, _values(answer.get("SecretString"), name, key))


def _values(text: Any, name: str, key: str) -> dict[str, str]:
    try:
        values = json.loads(text) if isinstance(text, str) else None
    except ValueError:
        values = None
    if not isinstance(values, dict) or not all(isinstance(v, str | int | float) for v in values.values()):
        raise UserError(
            f"the secret {name} named by {FIELD} is not a JSON object of strings",
            file=key,
            field=FIELD,
            hint='store it as {"HF_TOKEN": "..."}',
        )  # never its text: it may hold the value
    return {str(k): str(v) for k, v in values.items()}


def check_secrets_given(
    text: str, *, filename: str, env: dict[str, str], reference: SecretReference | None
) -> dict[str, str]:
    """The values the task's null secrets get; a TaskFileError naming the first one without a value (its
    line, and the secret that should have held it), or a UserError for a named secret that does not exist."""
    from shared.task import load_pipeline
    from shared.task.loader import task_field_line

    values = (reference.values or {}) if reference else {}
    try:
        pipeline = load_pipeline(
            text, filename=filename, env_overrides=env, secret_overrides=values, defer_secrets=True
        )
    except yaml.YAMLError:
        return values  # not readable: the task check says so
    for index, names in sorted(pipeline.deferred_secrets.items()):
        missing = names[0]
        if reference is None:
            why, hint = "no value", f"name a Secrets Manager secret holding it with {FIELD} (README: Uploads)"
        elif reference.values is None:
            why, hint = f"no value: the secret {reference.name} named by {FIELD} does not exist", None
        else:
            why, hint = f"no value: the secret {reference.name} named by {FIELD} has no {missing!r}", None
        raise TaskFileError(
            f"secret {missing!r} has {why}",
            file=filename,
            line=task_field_line(text, index, ("secrets", missing)),
            field=f"secrets.{missing}",
            hint=hint,
        )
    if reference is not None and reference.values is None:
        raise UserError(f"the secret {reference.name} does not exist (or this stack may not read it)",
                        file=filename, field=FIELD)  # fmt: skip
    return values
