"""What `sky launch | exec | jobs launch` take besides a task file, turned into task-file text: an inline
command for ENTRYPOINT (`sky launch -c dev 'nvidia-smi'`), and the task options SkyPilot applies on top of
the file (`-n/--name`, `--workdir`, `--git-url`/`--git-ref`, `--image-id`, `--disk-size`, `--disk-tier`,
`--network-tier`, `--ports`, `--job-recovery`, `--no-setup`).

SkyPilot (sky/client/cli/command.py, `_make_task_or_dag_from_entrypoint_with_overrides`) treats ENTRYPOINT
as a YAML file when it is one readable YAML file, and as a bash command otherwise (a task named
`sky-cmd`); a path ending in .yaml that cannot be read is a mistake, not a command. The result here is
task-file text that `launch` validates and submits as it would the file itself: a field skyless does
not act on gets the same note whether it came from the file or from a flag.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

import yaml

from shared.errors import UserError
from shared.task import read_task_file

INLINE_TASK_NAME = "sky-cmd"  # SkyPilot's name for a task given as a command


@dataclass(frozen=True)
class Entrypoint:
    text: str  # task-file text
    filename: str  # the file, or `<command>` for an inline command (what errors name)
    command: str | None = None  # the inline command, when it is one


def read_entrypoint(words: list[str] | None, *, allow_empty: bool = False) -> Entrypoint:
    """A task file (one argument naming a YAML file) or a command (anything else), as SkyPilot reads
    ENTRYPOINT; with `allow_empty` (`launch -c NAME` alone) no entrypoint is a task with nothing to run."""
    if not words:
        if allow_empty:
            return Entrypoint(yaml.safe_dump({"name": INLINE_TASK_NAME}), "<command>", "")
        raise UserError("give a task file (YAML) or a command to run", field="ENTRYPOINT")
    joined = " ".join(words)
    path = Path(joined).expanduser()
    if _names_a_yaml_file(joined):
        return Entrypoint(
            read_task_file(path), str(path)
        )  # a missing .yaml file is an error, never a command
    if path.is_file() and _is_yaml_mapping(path):
        return Entrypoint(read_task_file(path), str(path))
    return Entrypoint(inline_task(joined), "<command>", joined)


def inline_task(command: str) -> str:
    return yaml.safe_dump({"name": INLINE_TASK_NAME, "run": command}, sort_keys=False)


def _names_a_yaml_file(text: str) -> bool:
    try:
        parts = shlex.split(text)
    except ValueError:  # unbalanced quotes: a command, for the shell on the node to refuse
        return False
    return len(parts) == 1 and parts[0].endswith((".yaml", ".yml"))


def _is_yaml_mapping(path: Path) -> bool:
    try:
        with path.open(encoding="utf-8") as handle:
            first = next(iter(yaml.safe_load_all(handle)), None)
    except (OSError, UnicodeDecodeError, yaml.YAMLError):
        return False
    return isinstance(first, dict)


@dataclass(frozen=True)
class TaskEdits:
    """Task options from the command line; None (or empty, or False) = not given."""

    name: str | None = None
    workdir: str | None = None
    git_url: str | None = None
    git_ref: str | None = None
    image_id: str | None = None
    disk_size: int | None = None
    disk_tier: str | None = None
    network_tier: str | None = None
    ports: tuple[str, ...] = ()
    job_recovery: str | None = None
    no_setup: bool = False

    def given(self) -> dict[str, Any]:
        values = {f.name: getattr(self, f.name) for f in fields(self)}
        return {name: value for name, value in values.items() if value not in (None, (), False)}


RESOURCE_EDITS = ("image_id", "disk_size", "disk_tier", "network_tier", "ports", "job_recovery")


def apply_edits(text: str, edits: TaskEdits, *, filename: str) -> str:
    """The task file with the command line's task options applied (the original text when none is given:
    its line numbers stay right for errors). A file of several tasks takes none of them, as in SkyPilot,
    which refuses DAG files at `launch`: here the options are refused, naming the first."""
    given = edits.given()
    if not given:
        return text
    if edits.git_url is not None and edits.workdir is not None:
        raise UserError("cannot be given with --workdir (as in sky)", field="--git-url")
    if edits.workdir is not None and not Path(edits.workdir).expanduser().is_dir():
        raise UserError(f"{edits.workdir} is not a directory", field="--workdir")
    documents = [d for d in yaml.safe_load_all(text) if d is not None]
    if len(documents) != 1 or not isinstance(documents[0], dict):
        flag = "--" + next(iter(given)).replace("_", "-")
        raise UserError("applies to a file of one task; this file holds several", file=filename, field=flag)
    task = dict(documents[0])
    if edits.name is not None:
        task["name"] = edits.name
    if edits.workdir is not None:
        task["workdir"] = str(Path(edits.workdir).expanduser().resolve())
    if edits.git_url is not None or edits.git_ref is not None:
        task["workdir"] = _git_workdir(task.get("workdir"), edits, filename)
    if edits.no_setup:
        task.pop("setup", None)
    resources = dict(task.get("resources") or {})
    for key in RESOURCE_EDITS:
        value = getattr(edits, key)
        if value in (None, ()):
            continue
        resources[key] = _port_values(value) if key == "ports" else value
    if resources:
        task["resources"] = resources
    return yaml.safe_dump(task, sort_keys=False)


def _git_workdir(workdir: Any, edits: TaskEdits, filename: str) -> dict[str, Any]:
    """SkyPilot's `Task.update_workdir`: --git-url makes the workdir a clone of it (a file's local workdir is
    replaced; a file's git workdir keeps its ref unless --git-ref gives one); --git-ref alone changes a
    file's git workdir. SkyPilot drops a lone --git-ref when the workdir is not git; skyless refuses it."""
    if isinstance(workdir, dict):
        found = dict(workdir)
    elif edits.git_url is None:
        raise UserError(
            "needs --git-url, or a git workdir in the task file (workdir: {url: ...})",
            file=filename,
            field="--git-ref",
        )
    else:
        found = {}
    if edits.git_url is not None:
        found["url"] = edits.git_url
    if edits.git_ref is not None:
        found["ref"] = edits.git_ref
    return found


def _port_values(ports: tuple[str, ...]) -> list[int | str]:
    """`--ports 8080 --ports 9000-9010` as the task file writes them (a number stays a number)."""
    return [int(p) if p.isdigit() else p for p in ports]
