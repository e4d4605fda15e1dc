"""Whether the local runtime can start here: it needs the `local` extra (moto's server), which the Lambda
bundle and a CLI pointed at a deployed stack do without."""

from __future__ import annotations

import importlib.util
import shlex
import sys
from pathlib import Path

from shared.errors import UserError

LOCAL_EXTRA_MODULES = ("moto", "werkzeug", "flask")
PROJECT_ROOT = Path(__file__).resolve().parent.parent


class LocalExtraMissingError(UserError):
    """No deployment is configured and the local runtime's packages are not installed."""


def install_command() -> str:
    """The exact command that installs the extra into the Python running this CLI."""
    python = shlex.quote(sys.executable)
    if (PROJECT_ROOT / "pyproject.toml").is_file():  # a checkout, installed with -e
        return f"{python} -m pip install -e {shlex.quote(f'{PROJECT_ROOT}[local]')}"
    return f"{python} -m pip install 'skyless[local]'"


def require_local_extra() -> None:
    missing = [name for name in LOCAL_EXTRA_MODULES if importlib.util.find_spec(name) is None]
    if missing:
        raise LocalExtraMissingError(
            "no deployment is configured, and the local runtime needs packages that are not installed "
            f"({', '.join(missing)}). Install them with:  {install_command()}",
            hint="or point the CLI at a deployed stack: --api-url/--api-key, "
            "SKYLESS_API_URL/SKYLESS_API_KEY, or api_url/api_key in ~/.skyless/config.yaml",
        )
