"""Where the local runtime lives on disk: $SKYLESS_HOME/local/{runtime.json,runtime.log,state/}."""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass
from pathlib import Path

from local_runtime.private_files import write_private
from shared.config.env_names import ENV_HOME

DEFAULT_MOTO_PORT = 5566
DEFAULT_API_PORT = 5567


def skyless_home() -> Path:
    """$SKYLESS_HOME, or ~/.skyless."""
    return Path(os.environ.get(ENV_HOME) or Path.home() / ".skyless")


def local_dir(home: Path | None = None) -> Path:
    return (home or skyless_home()) / "local"


def runtime_json_path(home: Path | None = None) -> Path:
    return local_dir(home) / "runtime.json"


def runtime_log_path(home: Path | None = None) -> Path:
    return local_dir(home) / "runtime.log"


@dataclass(frozen=True)
class RuntimeInfo:
    """What a client needs to use a running local runtime (the contents of runtime.json)."""

    api_url: str
    api_key: str
    aws_endpoint_url: str
    pid: int
    moto_port: int
    api_port: int
    home: str

    def to_json(self) -> str:
        return json.dumps(asdict(self), indent=2)


def read_runtime_info(home: Path | None = None) -> RuntimeInfo | None:
    """The recorded runtime, or None when there is none (or the file is unreadable)."""
    path = runtime_json_path(home)
    try:
        data = json.loads(path.read_text())
        return RuntimeInfo(**data)
    except (OSError, ValueError, TypeError):
        return None


def write_runtime_info(info: RuntimeInfo) -> None:
    """Write runtime.json atomically, readable only by this user (it holds the API key)."""
    write_private(runtime_json_path(Path(info.home)), info.to_json())


def remove_runtime_info(home: Path | None = None) -> None:
    runtime_json_path(home).unlink(missing_ok=True)
