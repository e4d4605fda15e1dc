"""How big a task file skyless takes, checked the same way by `plan`, `launch` (before it uploads
anything), the API, cluster routes, schedules and bucket uploads, so a file `plan` accepts is never
refused later for its size or shape. The YAML limits are enforced while the text is composed
(shared/task/bounded_yaml.py), before any alias is expanded."""

from __future__ import annotations

from pathlib import Path

from shared.errors import TaskFileError

# The API carries a task as text inside a JSON body of at most 1 MiB (escaping can double it), and the
# submit function keeps it with the job: 256 KiB leaves room for both. Real task files are a few KiB.
MAX_TASK_FILE_BYTES = 256 * 1024
# Real task files nest 5-8 levels, hold a few hundred values and at most a handful of documents; these
# leave them far behind while keeping every walk of a parsed file (line positions, pydantic, JSON, the
# optimizer's one pass per task) within a fraction of a second and tens of MiB.
MAX_YAML_DEPTH = 64
MAX_YAML_DOCUMENTS = 64
MAX_YAML_NODES = 20_000  # values, every alias (*name) counted as the whole value it stands for
MAX_YAML_EXPANDED_CHARS = 1024 * 1024  # scalar text, aliases counted the same way
MAX_PARSE_SECONDS = 3.0  # CPU seconds of the parsing thread; the largest files the limits allow take ~1 s


def _size(count: int) -> str:
    return f"{count / 1024 / 1024:.1f} MiB" if count >= 1024 * 1024 else f"{count / 1024:.0f} KiB"


def check_task_size(size_bytes: int, filename: str) -> None:
    """A TaskFileError naming the file, its size and the limit when the file is too big."""
    if size_bytes > MAX_TASK_FILE_BYTES:
        raise TaskFileError(
            f"the task file is {_size(size_bytes)}; skyless takes task files of at most "
            f"{_size(MAX_TASK_FILE_BYTES)} ({MAX_TASK_FILE_BYTES} bytes)",
            file=filename,
            hint="move data out of the file: into the workdir, file_mounts or a bucket",
        )


def read_task_file(path: Path) -> str:
    """A task file's text; a TaskFileError naming it when it is missing, unreadable or too big."""
    try:
        size = path.stat().st_size
    except FileNotFoundError:
        raise TaskFileError("no such task file", file=str(path)) from None
    except OSError as error:
        raise TaskFileError(f"cannot read the task file: {error.strerror}", file=str(path)) from None
    check_task_size(size, str(path))
    try:
        return path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as error:
        raise TaskFileError(f"cannot read the task file: {error}", file=str(path)) from None
