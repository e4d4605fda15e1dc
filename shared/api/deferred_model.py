"""The base of every API body: its validator and serializer are built on first use, not at import.

The API defines ~150 models and a request uses a few: built at import (pydantic's default) they cost a
cold API start ~0.1 s of CPU. `model_rebuild` (which a deferred model's first use calls) is not
thread-safe before pydantic 2.14 and the local runtime serves the API on threads: builds take a lock.
"""

from __future__ import annotations

import threading
from typing import Any

from pydantic import BaseModel, ConfigDict

_building = threading.RLock()


class DeferredModel(BaseModel):
    model_config = ConfigDict(defer_build=True)

    @classmethod
    def model_rebuild(
        cls,
        *,
        force: bool = False,
        raise_errors: bool = True,
        _parent_namespace_depth: int = 2,
        _types_namespace: Any = None,
    ) -> bool | None:
        depth = _parent_namespace_depth + 1 if _parent_namespace_depth > 0 else 0  # this frame is one more
        with _building:
            return super().model_rebuild(
                force=force,
                raise_errors=raise_errors,
                _parent_namespace_depth=depth,
                _types_namespace=_types_namespace,
            )
