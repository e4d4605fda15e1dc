"""Run a task file uploaded under the bucket's `tasks/` prefix.

The submit queue receives S3's event notifications (`s3:ObjectCreated:*` on `tasks/`, `.yaml`/`.yml`).
Each upload is one business identity, bucket/key/ETag: its job id is derived from it, so a re-delivered
event finds the job it already made, and a changed file (a new ETag) runs again.

Who owns the job and which env overrides apply (documented in docs/architecture.md):
- `tasks/<user id>/<any path>.yaml` runs as that user, who must hold a key in the users table; nothing
  else decides it (a bucket policy confines each user's writes to their own prefix). A prefix that names no
  user is refused; `skyless-owner` metadata naming anyone else is refused, never obeyed. A file right
  under `tasks/` runs as the stack's `SKYLESS_UPLOAD_OWNER` (the local runtime's user, `u-local`); the
  SAM template sets none, so in AWS such a file is refused.
- `skyless-env` metadata: a JSON object of env overrides (`{"EPOCHS": "3"}`).
- `skyless-deadline` (`2026-12-01T09:00Z`, or `36h` from the upload's processing) and `skyless-hours` (the
  compute the job needs) metadata: a deadline job (shared/jobs/deadlines.py).
- `skyless-secrets` metadata: the name of a Secrets Manager secret of the owner's holding the values of the
  task's `secrets` (shared/uploads/secret_references.py); never the values themselves.

A file that cannot run gets `<key>.error.json` beside it, holding what `skyless plan --json` prints for
it (`UserError.to_dict()`), a note in the events table under `upload#<key>`, and a call of every
function in `REJECTION_HOOKS` (the notification seam). Nothing is dropped silently.
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import unquote_plus

import yaml

from shared.aws.object_store import ObjectStore
from shared.config import Settings
from shared.config.channels import UploadConfig
from shared.errors import NoOfferingError, TaskFileError, UserError
from shared.events.sqs_batch import MalformedMessage
from shared.jobs.run_status import write_run_status
from shared.task.limits import MAX_TASK_FILE_BYTES, check_task_size
from shared.task.unsupported_fields import pipeline_notes
from shared.uploads.secret_references import check_secrets_given, secret_reference

log = logging.getLogger("skyless.uploads")

TASKS_PREFIX = "tasks/"
TASK_SUFFIXES = (".yaml", ".yml")
ERROR_SUFFIX = ".error.json"
DEFAULT_UPLOAD_OWNER = UploadConfig.default_owner
OWNER_METADATA = "skyless-owner"
ENV_METADATA = "skyless-env"
DEADLINE_METADATA = "skyless-deadline"
HOURS_METADATA = "skyless-hours"
MAX_TASK_BYTES = MAX_TASK_FILE_BYTES  # the one limit `plan`, `launch` and the API check too


@dataclass(frozen=True)
class Upload:
    bucket: str
    key: str
    etag: str

    @property
    def job_id(self) -> str:
        """The job this upload makes: the same for every delivery of the same bytes at the same key."""
        digest = hashlib.sha256(f"{self.bucket}/{self.key}/{self.etag}".encode()).hexdigest()
        return f"job-{digest[:12]}"


@dataclass(frozen=True)
class UploadRejection:
    """What the notification seam receives for a file that could not run."""

    upload: Upload
    owner: str
    error: dict[str, Any]  # UserError.to_dict()
    report_key: str


@dataclass
class UploadOutcome:
    submitted: list[str] = field(default_factory=list)  # job ids (new or already made by an earlier delivery)
    rejected: list[str] = field(default_factory=list)  # keys that got an error report
    ignored: list[str] = field(default_factory=list)  # keys that are not task files, test events


RejectionHook = Callable[[Settings, UploadRejection], None]
REJECTION_HOOKS: list[RejectionHook] = []


def uploads_in(event: dict[str, Any]) -> list[Upload] | None:
    """The task-file uploads an S3 event notification names; None when the body is not an S3 event.

    S3 sends `s3:TestEvent` when a notification is configured (answered with []); keys arrive
    URL-encoded (`+` for a space).
    """
    if event.get("Event") == "s3:TestEvent":
        return []
    records = event.get("Records")
    if not isinstance(records, list):
        return None
    uploads = []
    for index, record in enumerate(records):
        try:
            if record.get("eventSource") != "aws:s3" or not str(record.get("eventName", "")).startswith(
                "ObjectCreated"
            ):
                continue
            s3 = record["s3"]
            key = unquote_plus(s3["object"]["key"])
            bucket = s3["bucket"]["name"]
            etag = str(s3["object"].get("eTag", "")).strip('"')
        except (KeyError, TypeError, AttributeError) as exc:
            raise MalformedMessage(f"Records[{index}] is not an S3 event record ({exc!r:.80})") from None
        if not isinstance(bucket, str) or not bucket or not key:
            raise MalformedMessage(f"Records[{index}] names no bucket or key")
        uploads.append(Upload(bucket, key, etag))
    return uploads


def is_task_key(key: str) -> bool:
    return key.startswith(TASKS_PREFIX) and key.lower().endswith(TASK_SUFFIXES)


def owner_of(key: str) -> str | None:
    """The user the key names (`tasks/<user id>/...`); for a file right under `tasks/`, the stack's default
    upload owner (None in AWS: the SAM template sets SKYLESS_UPLOAD_OWNER empty). Never the metadata."""
    parts = key[len(TASKS_PREFIX) :].split("/")
    if len(parts) >= 2:
        return parts[0] or None
    return UploadConfig.from_env().default_owner


def check_owner(settings: Settings, key: str, owner: str | None, metadata: dict[str, str]) -> str:
    """The owner the upload runs as; a UserError (its report goes beside the file) for a key that names
    nobody, a user id the users table does not hold, or metadata claiming another owner."""
    from shared.store.users import user_exists

    rest = key.removeprefix(TASKS_PREFIX)
    if owner is None:
        raise UserError(
            "whose task is this? a task file runs as the user its key names: tasks/<user id>/...",
            file=key,
            hint=f"upload it as tasks/<your user id>/{rest.split('/', 1)[-1]}",
        )
    if not user_exists(owner, settings):
        raise UserError(
            f"no skyless user has the id {owner[:64]!r}: a task file runs as the user its key names "
            "(tasks/<user id>/...)",
            file=key,
            hint="upload it as tasks/<your user id>/...; an admin's `skyless admin users list` shows ids",
        )
    claimed = metadata.get(OWNER_METADATA)
    if claimed is not None and claimed != owner:
        raise UserError(
            f"the {OWNER_METADATA} metadata names {claimed[:64]!r}, but this file's key names {owner!r}: "
            "an upload runs as the user its key names, and metadata cannot change that",
            file=key,
            field=f"x-amz-meta-{OWNER_METADATA}",
            hint=f"to run it as {claimed[:64]!r}, that user uploads it under tasks/{claimed[:64]}/",
        )
    return owner


def env_of(key: str, metadata: dict[str, str]) -> dict[str, str]:
    raw = metadata.get(ENV_METADATA)
    if not raw:
        return {}
    try:
        env = json.loads(raw)
    except json.JSONDecodeError:
        env = None
    if not isinstance(env, dict) or not all(isinstance(v, str | int | float) for v in env.values()):
        raise UserError(
            f"the {ENV_METADATA} metadata is not a JSON object of strings",
            file=key,
            field=f"x-amz-meta-{ENV_METADATA}",
            hint='e.g. {"EPOCHS": "3"}',
        )
    return {str(k): str(v) for k, v in env.items()}


def deadline_of(key: str, metadata: dict[str, str]) -> tuple[str | None, float | None]:
    """The upload's deadline and hours metadata (both checked by submit_job)."""
    raw = metadata.get(HOURS_METADATA)
    try:
        hours = float(raw) if raw else None
    except ValueError:
        raise UserError(f"the {HOURS_METADATA} metadata is not a number: {raw!r}", file=key,
                        field=f"x-amz-meta-{HOURS_METADATA}", hint="e.g. 12 or 0.5") from None  # fmt: skip
    return metadata.get(DEADLINE_METADATA) or None, hours


def submit_uploads(settings: Settings, event: dict[str, Any]) -> UploadOutcome:
    """Every task file the event names: submitted once per bucket/key/ETag, or given an error report."""
    uploads = uploads_in(event)
    if uploads is None:
        raise MalformedMessage("neither an S3 event notification nor a schedule firing")
    outcome = UploadOutcome()
    for upload in uploads:
        if not is_task_key(upload.key):
            outcome.ignored.append(upload.key)
            continue
        submit_upload(settings, upload, outcome)
    return outcome


def submit_upload(settings: Settings, upload: Upload, outcome: UploadOutcome) -> None:
    from shared.jobs.submission import SubmitJob, submit_job
    from shared.wiring import wiring_for

    wiring = wiring_for(settings)
    if upload.bucket != settings.bucket:  # the stack's bucket is the one that notifies us; no other is read
        log.warning("upload event of another bucket ignored: %s/%s", upload.bucket[:80], upload.key[:200])
        outcome.ignored.append(upload.key)
        return
    if wiring.store.get(upload.job_id) is not None:
        outcome.submitted.append(upload.job_id)  # a re-delivery: this upload already ran
        return
    fetched = wiring.objects.read_version(upload.key, upload.etag, MAX_TASK_BYTES)
    if fetched is None:  # overwritten since: the newer upload's own event runs it
        outcome.ignored.append(upload.key)
        return
    body, metadata = fetched.body, fetched.metadata
    owner: str | None = None  # known once checked: a report about a file of nobody's notifies nobody
    try:
        owner = check_owner(settings, upload.key, owner_of(upload.key), metadata)
        check_task_size(len(body), upload.key)
        text = body.decode("utf-8", errors="replace")
        env = env_of(upload.key, metadata)
        deadline, hours = deadline_of(upload.key, metadata)
        reference = secret_reference(settings, upload.key, metadata, owner=owner)
        secrets = check_secrets_given(text, filename=upload.key, env=env, reference=reference)
        pipeline = check_task_runs(text, filename=upload.key, env=env, secrets=secrets)  # what it runs by
        notes = pipeline_notes(pipeline)
        command = SubmitJob(
            owner=owner, pipeline=pipeline, task_text=text, filename=upload.key, job_id=upload.job_id,
            source="upload", source_ref=upload.key, deadline=deadline, hours=hours,
        )  # fmt: skip
        job = submit_job(wiring, command)
    except UserError as error:
        if error.field in ("deadline", "hours"):  # named as the uploader set them
            error.field, error.file = f"x-amz-meta-skyless-{error.field}", upload.key
        if not _already_rejected(wiring.objects, upload):  # a re-delivery records and notifies nothing new
            reject(settings, upload, owner or "", error)
        outcome.rejected.append(upload.key)
        return
    source = {"bucket": upload.bucket, "key": upload.key, "etag": upload.etag}
    write_run_status(settings, job.job_id, job.state, source=source, notes=notes)
    # a fixed file: the report about its earlier, bad version no longer applies
    wiring.objects.delete(upload.key + ERROR_SUFFIX)
    outcome.submitted.append(job.job_id)


def check_task_runs(
    text: str, *, filename: str, env: dict[str, str], secrets: dict[str, str] | None = None
) -> Any:
    """What `skyless plan` checks: the file loads and some offering can run it (errors name the file,
    and the line of the field an optimizer error comes from). Answers the pipeline."""
    from shared.catalog.model import load_default_catalog
    from shared.optimizer import plan_pipeline
    from shared.optimizer.errors import locate_plan_error
    from shared.task.loader import load_pipeline

    try:
        pipeline = load_pipeline(text, filename=filename, env_overrides=env, secret_overrides=secrets or {})
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        raise TaskFileError(
            f"not readable as YAML: {exc}", file=filename, line=mark.line + 1 if mark is not None else None
        ) from None
    try:
        plan_pipeline(pipeline, load_default_catalog())
    except UserError as error:
        if isinstance(error, NoOfferingError):
            locate_plan_error(error, text, filename)
        error.file = error.file or filename
        error.notes = pipeline_notes(pipeline)  # type: ignore[attr-defined]  # the report says them too
        raise
    return pipeline


def reject(settings: Settings, upload: Upload, owner: str, error: UserError) -> None:
    """Write the report beside the file, record it, and tell the notification seam."""
    from shared.wiring import wiring_for

    report = {**error.to_dict(), "bucket": upload.bucket, "key": upload.key, "etag": upload.etag}
    if getattr(error, "notes", None):
        report["notes"] = error.notes  # type: ignore[attr-defined]
    report_key = upload.key + ERROR_SUFFIX
    wiring = wiring_for(settings)
    wiring.objects.put_json(report_key, report)
    wiring.store.note(
        f"upload#{upload.key}", "upload_rejected", str(error), {"etag": upload.etag, "owner": owner}
    )
    rejection = UploadRejection(upload, owner, error.to_dict(), report_key)
    for hook in REJECTION_HOOKS:
        try:
            hook(settings, rejection)
        except Exception:  # a failed notification never loses the report
            log.exception("upload rejection hook %r failed", hook)


def _already_rejected(objects: ObjectStore, upload: Upload) -> bool:
    text = objects.get_text(upload.key + ERROR_SUFFIX)
    if text is None:
        return False
    try:
        report = json.loads(text)
    except ValueError:
        return False
    return isinstance(report, dict) and report.get("etag") == upload.etag
