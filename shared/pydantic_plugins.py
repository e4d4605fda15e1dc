"""With plugins off (`PYDANTIC_DISABLE_PLUGINS`, which the SAM template sets), pydantic's plugin lookup
answers "none" without importing `importlib.metadata` (15-60 ms of a Lambda cold start).

pydantic imports its plugin loader, and with it `importlib.metadata`, when it builds the first model, even
though `get_plugins()` then returns () at once when plugins are off. Installed before pydantic is imported
(`shared/__init__.py`), this module stands in for that loader with the same answer. With plugins on, or
once pydantic's own loader is loaded, it does nothing.
"""

from __future__ import annotations

import sys
import types
from collections.abc import Iterable
from typing import Any

from shared.config.control_plane import PYDANTIC_PLUGINS_OFF, pydantic_plugins_off

LOADER = "pydantic.plugin._loader"
OFF = PYDANTIC_PLUGINS_OFF


def get_plugins() -> Iterable[Any]:
    return ()


def install() -> bool:
    """Stand in for pydantic's plugin loader when plugins are off; answers whether it did."""
    if not pydantic_plugins_off() or LOADER in sys.modules:
        return False
    loader = types.ModuleType(LOADER, __doc__)
    loader.get_plugins = get_plugins  # type: ignore[attr-defined]
    sys.modules[LOADER] = loader
    return True
