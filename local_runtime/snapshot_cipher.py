"""The local runtime's snapshot is sealed with a key kept beside it, 0600 (Fernet: AES-CBC + HMAC-SHA256).

Why the whole snapshot and not chosen fields: it copies every table item, bucket object, queue message and
Secrets Manager value of the stack, and a secret may sit in any of them (a task's `secrets:`, kept in
`runs/<job>/secrets.json`; a task file with inline secrets under `tasks/` or in a schedule; a webhook URL).
Sealing all of it keeps every one of them out of clear text without a list to keep in step with the code.
The key is a separate file: a snapshot that is copied, backed up or attached to a bug report reveals
nothing without it. Someone who can read the owner's files can read both; that is the limit of any
secret kept on the same disk.
"""

from __future__ import annotations

import os
from pathlib import Path

from cryptography.fernet import Fernet, InvalidToken

from local_runtime.private_files import PRIVATE_FILE_MODE, private_dir

KEY_FILE = "snapshot.key"


class SnapshotKeyError(Exception):
    """The snapshot cannot be opened: its key is missing or is not the key it was sealed with."""


def snapshot_key(local_dir: Path, *, create: bool = True) -> bytes:
    """The key in `local_dir/snapshot.key`, made once (0600) when `create`."""
    path = local_dir / KEY_FILE
    if create and not path.exists():
        private_dir(local_dir)
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, PRIVATE_FILE_MODE)
        except FileExistsError:
            pass  # another process made it first
        else:
            with os.fdopen(fd, "wb") as out:
                out.write(Fernet.generate_key())
    try:
        return path.read_bytes().strip()
    except FileNotFoundError:
        raise SnapshotKeyError(f"{path} is missing") from None


def seal(data: bytes, key: bytes) -> str:
    return Fernet(key).encrypt(data).decode("ascii")


def unseal(token: str, key: bytes) -> bytes:
    try:
        return Fernet(key).decrypt(token.encode("ascii"))
    except (InvalidToken, ValueError):
        raise SnapshotKeyError("the snapshot was sealed with another key") from None
