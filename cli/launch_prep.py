"""A task checked on this machine before anything is uploaded or submitted: the precise error (file, line,
field) comes before any network call, and the answer says what to upload and what to submit."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from shared.errors import UserError


@dataclass(frozen=True)
class PreparedLaunch:
    text: str  # what is submitted: the file, with the command line's resource overrides applied
    workdirs: list[Path]  # local workdirs to upload
    mounts: dict[str, Path]  # {remote path: local file or folder} to upload
    notes: list[str]  # said once, before submitting: fields not acted on, overrides ignored


def prepare_launch(
    text: str, filename: str, envs: dict[str, str], secrets: dict[str, str], overrides: Any
) -> PreparedLaunch:
    """Validate the task here (a precise error before any upload or network call) as the API will:
    null secrets must have values; answer what to upload and what to submit."""
    from cli.runtime_notes import conda_note
    from shared.task import apply_overrides, container_notes, load_pipeline, pipeline_notes

    load_pipeline(text, filename=filename, env_overrides=envs, secret_overrides=secrets)
    applied = apply_overrides(text, overrides)
    pipeline = load_pipeline(applied.text, filename=filename, env_overrides=envs, secret_overrides=secrets)
    notes = pipeline_notes(pipeline) + container_notes(pipeline)
    notes += [n for n in [conda_note(text, filename)] if n]
    if applied.ignored:
        notes.append("resource overrides ignored: the file holds several tasks (sky launch ignores them too)")
    return PreparedLaunch(
        applied.text,
        local_workdirs(pipeline, filename, text=applied.text),
        local_file_mounts(pipeline, filename),
        notes,
    )


def local_workdirs(pipeline: Any, filename: str, *, text: str | None = None) -> list[Path]:
    """The local workdirs of a validated pipeline (to upload); a UserError for one that is not a folder
    (with the file's `text`, naming the line that writes it)."""
    from shared.task import task_field_line

    found: list[Path] = []
    for index, task in enumerate(pipeline.tasks):
        workdir = task.workdir
        if isinstance(workdir, str) and "://" not in workdir:
            path = Path(workdir).expanduser()
            if not path.is_dir():
                problem = "does not exist" if not path.exists() else "is not a directory"
                line = task_field_line(text, index, ("workdir",)) if text is not None else None
                raise UserError(f"{workdir} {problem}", file=filename, field="workdir", line=line)
            found.append(path.resolve())
    return found


def local_file_mounts(pipeline: Any, filename: str) -> dict[str, Path]:
    """{remote path: local file or folder} of the task's file mounts with a local source (to upload)."""
    from shared.jobs.file_mounts import local_mounts, mount_sources

    found: dict[str, Path] = {}
    for task in pipeline.tasks:  # sources no node can fetch are refused before anything is uploaded
        mount_sources(task, walls=None, filename=filename)
    for task in pipeline.tasks:
        for remote, source in local_mounts(task).items():
            path = Path(source).expanduser()
            if not path.exists():
                raise UserError(f"{source} does not exist", file=filename, field=f"file_mounts.{remote}")
            found[remote] = path.resolve()
    return found
