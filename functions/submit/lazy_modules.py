"""A module imported when one of its names is first read: the API's cold start imports the views (and
everything they import) of the route it serves, not of all ~60. Declare it for the type checker too:

    if TYPE_CHECKING:
        from functions.submit import job_views
    else:
        job_views = module_on_first_use("functions.submit.job_views")
"""

from __future__ import annotations

import importlib
from typing import Any


class _ModuleOnFirstUse:
    def __init__(self, name: str) -> None:
        self._name = name

    def __getattr__(self, attribute: str) -> Any:
        return getattr(importlib.import_module(self._name), attribute)  # thread-safe: the import lock

    def __repr__(self) -> str:
        return f"<module {self._name!r}, imported on first use>"


def module_on_first_use(name: str) -> Any:
    return _ModuleOnFirstUse(name)
