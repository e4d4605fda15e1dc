"""The embedded local default: the whole control plane on this machine.

`ensure_local_runtime() -> RuntimeInfo(api_url, api_key, aws_endpoint_url, ...)` is what the CLI calls:
it returns the running daemon (found through $SKYLESS_HOME/local/runtime.json) or starts one.
"""

from local_runtime.daemon_control import (
    LocalRuntimeError,
    ensure_local_runtime,
    running_runtime,
    start_local_runtime,
    stop_local_runtime,
)
from local_runtime.runtime_file import RuntimeInfo

__all__ = [
    "LocalRuntimeError",
    "RuntimeInfo",
    "ensure_local_runtime",
    "running_runtime",
    "start_local_runtime",
    "stop_local_runtime",
]
