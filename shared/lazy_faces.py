"""A package face whose names are imported on first use (PEP 562 `__getattr__`), so importing one module
of a package does not import all of it: `shared.jobs.blocks` needs `shared.optimizer.plan`, not the
optimizer and the task file models behind it. Handlers' cold starts pay only for what they use."""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any


def lazy_face(package: str, where: dict[str, str]) -> Callable[[str], Any]:
    """The package's `__getattr__`: each public name of `where` (name -> module) imported when asked for."""

    def __getattr__(name: str) -> Any:
        module = where.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(module), name)
        importlib.import_module(package).__dict__[name] = value
        return value

    return __getattr__
