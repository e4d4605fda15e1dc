"""`sky.AWS()` and its kin, for `Resources(cloud=skyless.AWS())` as SkyPilot scripts write it: each names a
cloud skyless launches on (`str(cloud)` is the task file's `cloud:` value)."""

from __future__ import annotations


class Cloud:
    """A cloud, by name."""

    _NAME = ""

    def canonical_name(self) -> str:
        return self._NAME

    def __str__(self) -> str:
        return self._NAME

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Cloud) and other._NAME == self._NAME

    def __hash__(self) -> int:
        return hash(self._NAME)


class AWS(Cloud):
    _NAME = "aws"


class GCP(Cloud):
    _NAME = "gcp"


class Azure(Cloud):
    _NAME = "azure"


class Lambda(Cloud):
    _NAME = "lambda"


class RunPod(Cloud):
    _NAME = "runpod"
