"""Crashes between calls: every store, queue and cloud call the control plane makes goes through a proxy
that may end the process (a SimulatedCrash) just before the call or just after it (the call's effect is
done, its answer lost). A crash is a BaseException, so no `except Exception` in the code under test can
mistake it for an error it handles: it unwinds the whole operation, as a killed Lambda would."""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Callable
from typing import Any


class SimulatedCrash(BaseException):
    """The process running an operation died here."""


class FaultInjector:
    """`rate`: the chance that a call is preceded or followed by a crash. `every_point`: besides, the first
    call of each adapter method crashes before it, and the next one after it, so that every crash point the
    run reaches is exercised at least once, however rare the call."""

    def __init__(self, rng: random.Random, rate: float, every_point: bool = True) -> None:
        self.rng = rng
        self.rate = rate
        self.every_point = every_point
        self.enabled = True
        self.calls = 0
        self.crashes: Counter[str] = Counter()  # by "<adapter>.<method>:before|after"
        self.called: set[str] = set()  # "<adapter>.<method>" called; crash points: these x before/after

    def around(self, label: str, call: Callable[[], Any]) -> Any:
        self.calls += 1
        self.called.add(label)
        if self._crashes_here(f"{label}:before"):
            raise SimulatedCrash(f"before {label}")
        result = call()
        if self._crashes_here(f"{label}:after"):
            raise SimulatedCrash(f"after {label}")
        return result

    def _crashes_here(self, point: str) -> bool:
        if not self.enabled:
            return False
        first = self.every_point and point not in self.crashes
        if first or self.rng.random() < self.rate / 2:
            self.crashes[point] += 1
            return True
        return False


class Faulty:
    """A proxy whose method calls go through the injector; `pure` names methods that only build values
    (no I/O), which are passed through as they are."""

    def __init__(self, target: Any, injector: FaultInjector, name: str, pure: frozenset[str] = frozenset()):
        self._target = target
        self._injector = injector
        self._name = name
        self._pure = pure

    def __getattr__(self, attribute: str) -> Any:
        value = getattr(self._target, attribute)
        if (
            attribute.startswith("_")
            or attribute in self._pure
            or isinstance(value, type)
            or not callable(value)
        ):
            return value

        def call(*args: Any, **kwargs: Any) -> Any:
            return self._injector.around(f"{self._name}.{attribute}", lambda: value(*args, **kwargs))

        return call
