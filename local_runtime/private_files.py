"""Files and folders of the local runtime that only their owner may read: folders 0700, files 0600.

The local runtime keeps an API key, the agent secret, the snapshot key and a copy of every table, object
and secret under $SKYLESS_HOME; on a shared machine nobody else may read them. Creating with the mode
(rather than chmod afterwards) leaves no moment in which the file is readable by others.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

PRIVATE_DIR_MODE = 0o700
PRIVATE_FILE_MODE = 0o600


def private_dir(path: Path) -> Path:
    """`path` (and missing parents) created 0700; an existing folder is narrowed to 0700."""
    path.mkdir(mode=PRIVATE_DIR_MODE, parents=True, exist_ok=True)
    if stat.S_IMODE(path.stat().st_mode) != PRIVATE_DIR_MODE:
        path.chmod(PRIVATE_DIR_MODE)
    return path


def write_private(path: Path, data: str | bytes) -> None:
    """Write `path` atomically (a crash mid-write leaves the previous file), readable by its owner only."""
    private_dir(path.parent)
    tmp = path.with_name(path.name + ".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, PRIVATE_FILE_MODE)
    with os.fdopen(fd, "wb") as out:
        out.write(data.encode("utf-8") if isinstance(data, str) else data)
    os.chmod(tmp, PRIVATE_FILE_MODE)  # O_CREAT's mode does not apply to a tmp file left by a crash
    os.replace(tmp, path)


def open_private_log(path: Path) -> int:
    """A file descriptor appending to `path`, created 0600 (an existing log is narrowed to 0600)."""
    private_dir(path.parent)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, PRIVATE_FILE_MODE)
    os.fchmod(fd, PRIVATE_FILE_MODE)
    return fd
