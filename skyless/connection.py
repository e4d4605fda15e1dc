"""Where the SDK's calls go (the API the CLI would use), and what a task turns into before it is sent:
validated, SkyPilot's config applied, its workdir and local file mounts uploaded."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from cli.api_client import SkylessClient
    from skyless.task import Task

_target: dict[str, str | None] = {"api_url": None, "api_key": None}


def api_login(api_url: str | None = None, api_key: str | None = None) -> None:
    """Send later calls to this API (else SKYLESS_API_URL, ~/.skyless/config.yaml, or the local runtime,
    started on first use), as `sky.api_login` points the SDK at a server."""
    _target.update(api_url=api_url, api_key=api_key)


@contextmanager
def connected() -> Iterator[SkylessClient]:
    from cli.api_client import SkylessClient
    from cli.client_config import resolve_api

    target = resolve_api(_target["api_url"], _target["api_key"])
    with SkylessClient(target.url, target.api_key) as client:
        yield client


@dataclass(frozen=True)
class Submission:
    """A task ready to send: its text, where it may run, its uploaded files, and what was not applied."""

    text: str
    filename: str
    clouds: list[str] | None
    workdir_key: str | None
    mount_keys: dict[str, str]
    task_notes: list[str]  # fields of the task skyless reads but does not act on
    config_notes: list[str]  # keys of SkyPilot's config file, applied or not


def say_notes(notes: list[str]) -> None:
    for note in notes:
        print(f"note: {note}", file=sys.stderr)


def submission(client: SkylessClient, task: Task, clouds: list[str] | None = None) -> Submission:
    """Validate `task` as the API will, apply SkyPilot's config file, and upload the workdir and the local
    file mounts (a mistake in the task or the config is raised before anything is uploaded)."""
    from cli.job_commands import prepare_launch
    from cli.sky_config import apply_sky_config
    from cli.task_options import resource_overrides

    prepared = prepare_launch(task.to_yaml(), task.filename, {}, {}, resource_overrides())
    configured = apply_sky_config(prepared.text, task.filename, clouds)
    workdir_key = client.upload_workdir(prepared.workdirs[0]) if prepared.workdirs else None
    mount_keys = {
        remote: client.upload_path(source, field=f"file_mounts.{remote}")
        for remote, source in prepared.mounts.items()
    }
    return Submission(configured.text, task.filename, configured.clouds, workdir_key, mount_keys,
                      prepared.notes, configured.notes)  # fmt: skip
