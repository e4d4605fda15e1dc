"""One plan-and-launch reads the cool-down record once (shared/jobs/continuation.py), never around its own
writes."""

from __future__ import annotations

from shared.store.job_store import CooldownsReadOnce
from shared.store.memory import MemoryJobStore

NOW = 1_800_000_000.0
ZONE = "aws/us-east-1/us-east-1a"


class CountedReads:
    def __init__(self, store: MemoryJobStore) -> None:
        self.inner, self.reads = store.cooldowns, 0

    def __getattr__(self, name: str) -> object:
        return getattr(self.inner, name)

    def evidence(self, now: float | None = None) -> object:
        self.reads += 1
        return self.inner.evidence(now)


def test_the_plan_and_the_gate_share_one_read_and_a_refusal_written_drops_it() -> None:
    store = MemoryJobStore()
    counted = CountedReads(store)
    once = CooldownsReadOnce(counted)  # type: ignore[arg-type]
    assert once.cooling(NOW) == [] and once.evidence(NOW)[1] == {}
    assert counted.reads == 1
    once.refused("aws", "us-east-1", "us-east-1a", "job-1-0", at=NOW)
    assert once.evidence(NOW)[1] == {ZONE: [(NOW, "job-1-0")]}  # its own write is read back
    assert counted.reads == 2
    assert store.cooldowns.evidence(NOW)[1] == {ZONE: [(NOW, "job-1-0")]}  # written through to the record
