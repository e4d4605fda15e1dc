"""Entries skyless keeps in `~/.ssh/config` for named clusters on clouds, so that plain `ssh NAME` and VS Code
Remote-SSH reach the head node. Each entry sits between two marker lines and is replaced or removed whole;
the rest of the file is left exactly as it was. (The local cloud gets none: its nodes are folders on this
machine with no sshd; `skyless ssh NAME` opens a shell in them directly.)"""

from __future__ import annotations

import os
import re
from pathlib import Path

BEGIN = "# >>> skyless cluster {name} >>>"
END = "# <<< skyless cluster {name} <<<"


def host_block(name: str, host: str, user: str, identity_file: Path) -> str:
    return "\n".join(
        [
            BEGIN.format(name=name),
            f"Host {name}",
            f"  HostName {host}",
            f"  User {user}",
            f"  IdentityFile {identity_file}",
            "  IdentitiesOnly yes",
            "  StrictHostKeyChecking accept-new",
            END.format(name=name),
            "",
        ]
    )


def _block_pattern(name: str) -> re.Pattern[str]:
    return re.compile(
        re.escape(BEGIN.format(name=name)) + r".*?" + re.escape(END.format(name=name)) + r"\n?", re.S
    )


def with_host(text: str, name: str, block: str) -> str:
    """`text` with the cluster's entry replaced by `block` (or added, first: ssh takes the first match)."""
    pattern = _block_pattern(name)
    if pattern.search(text):
        return pattern.sub(lambda _: block, text, count=1)
    return block + ("\n" + text if text else "")


def without_host(text: str, name: str) -> str:
    return _block_pattern(name).sub("", text)


def config_path() -> Path:
    return Path(os.path.expanduser("~")) / ".ssh" / "config"


def write_host(name: str, host: str, user: str, identity_file: Path, path: Path | None = None) -> Path:
    path = path or config_path()
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    current = path.read_text() if path.exists() else ""
    path.write_text(with_host(current, name, host_block(name, host, user, identity_file)))
    path.chmod(0o600)
    return path


def remove_host(name: str, path: Path | None = None) -> bool:
    path = path or config_path()
    if not path.exists():
        return False
    current = path.read_text()
    updated = without_host(current, name)
    if updated != current:
        path.write_text(updated)
        return True
    return False
