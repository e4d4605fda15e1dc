"""The base of every task-file model: strict types, and unknown fields rejected with a "did you mean"."""

from __future__ import annotations

import difflib
from typing import Any, ClassVar

from pydantic import BaseModel, ConfigDict, model_validator
from pydantic_core import PydanticCustomError

# Fields SkyPilot renamed: the old name gets the new one as its hint, like SkyPilot does.
RENAMED_FIELDS = {"spot_recovery": "job_recovery"}


def did_you_mean(name: str, known: list[str]) -> str:
    """A hint naming the closest known field, or "" when nothing is close."""
    if name in RENAMED_FIELDS and RENAMED_FIELDS[name] in known:
        return f"Instead of {name!r}, did you mean {RENAMED_FIELDS[name]!r}?"
    close = difflib.get_close_matches(name, known, n=1, cutoff=0.6)
    return f"Instead of {name!r}, did you mean {close[0]!r}?" if close else ""


class SpecModel(BaseModel):
    """Strict like SkyPilot's JSON schema: no coercion of "true"/"4", no unknown keys."""

    model_config = ConfigDict(strict=True, extra="forbid", populate_by_name=True)
    _what: ClassVar[str] = "field"

    @classmethod
    def known_fields(cls) -> list[str]:
        names = []
        for name, info in cls.model_fields.items():
            names.append(info.alias or name)
        return names

    @model_validator(mode="before")
    @classmethod
    def _reject_unknown_fields(cls, data: Any) -> Any:
        if isinstance(data, dict):
            known = cls.known_fields()
            allowed = set(known) | set(cls.model_fields)
            for key in data:
                if key not in allowed:
                    public = ", ".join(k for k in known if not k.startswith("_"))
                    hint = did_you_mean(str(key), known) or f"expected one of: {public}"
                    raise PydanticCustomError(
                        "unknown_field",
                        "unknown {what} '{field}'",
                        {"what": cls._what, "field": key, "hint": hint},
                    )
        return data
