"""Where the CLI finds the API, first match wins:

1. `--api-url` / `SKYLESS_API_URL` with `--api-key` / `SKYLESS_API_KEY` (a deployed stack);
2. `$SKYLESS_HOME/config.yaml` with `api_url:` and `api_key:`;
3. the embedded local runtime, started on demand.
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated

import typer

from shared.errors import UserError

ApiUrl = Annotated[
    str | None, typer.Option("--api-url", help="The API (else SKYLESS_API_URL, config, local).")
]
ApiKey = Annotated[str | None, typer.Option("--api-key", help="The API key (else SKYLESS_API_KEY).")]


@dataclass(frozen=True)
class ApiTarget:
    url: str
    api_key: str | None
    source: str  # "flags", "environment", "config file <path>" or "local runtime"


def skyless_home() -> Path:
    return Path(os.environ.get("SKYLESS_HOME") or Path.home() / ".skyless")


def config_path() -> Path:
    return skyless_home() / "config.yaml"


def resolve_api(api_url: str | None = None, api_key: str | None = None) -> ApiTarget:
    """The API to talk to. May start the local runtime (which takes a few seconds the first time)."""
    if api_url:
        return ApiTarget(api_url, api_key or os.environ.get("SKYLESS_API_KEY"), "flags")
    if os.environ.get("SKYLESS_API_URL"):
        key = api_key or os.environ.get("SKYLESS_API_KEY")
        return ApiTarget(os.environ["SKYLESS_API_URL"], key, "environment")
    from_file = _read_config_file(config_path())
    if from_file is not None:
        url, key = from_file
        return ApiTarget(url, api_key or key, f"config file {config_path()}")
    # imported late: it is only needed without a deployment, and only with the `local` extra installed
    from cli.local_extra import require_local_extra

    require_local_extra()
    from local_runtime import ensure_local_runtime, running_runtime

    if running_runtime() is None:  # a first start takes seconds: say what is happening, on stderr
        print("Starting the local runtime (stop it with `skyless local down`) …", file=sys.stderr, flush=True)
    info = ensure_local_runtime()
    return ApiTarget(info.api_url, api_key or info.api_key, "local runtime")


def _read_config_file(path: Path) -> tuple[str, str | None] | None:
    try:
        text = path.read_text()
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise UserError(f"cannot read the config file: {exc}", file=str(path)) from exc
    import yaml  # only with a config file (most commands run without one)

    try:
        data = yaml.safe_load(text) or {}
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        raise UserError(
            "the config file is not valid YAML", file=str(path), line=mark.line + 1 if mark else None
        ) from exc
    if not isinstance(data, dict):
        raise UserError("the config file must be a mapping with api_url and api_key", file=str(path))
    url = data.get("api_url")
    if url is None:
        return None
    if not isinstance(url, str) or not url.startswith(("http://", "https://")):
        raise UserError("must be an http(s) URL", file=str(path), field="api_url")
    key = data.get("api_key")
    if key is not None and not isinstance(key, str):
        raise UserError("must be a string", file=str(path), field="api_key")
    return url, key
