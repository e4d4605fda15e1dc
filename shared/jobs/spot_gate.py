"""A plain spot job's launches (no deadline) on the shared evidence of spot capacity, the rule deadline jobs
follow too (shared/optimizer/probes.py):

- **A waiting zone is not probed.** The provision walk passes over a spot candidate whose zone is still
  waiting after refused spot launches (any job's, decaying) or, once the job's own refused spot launches in
  the last hour reached SKYLESS_SPOT_REFUSALS_PER_HOUR, every spot candidate until the oldest is an hour
  old. The walk treats such a candidate as refused for this step only (a block that is never stored), so
  it goes on to the other zones, regions and clouds of the plan, and to on-demand where the task allows it.
- **Each refusal counts at once**: a spot launch refused in this walk is added to the evidence the walk
  reads (and written for every job, shared/jobs/launching.py), so the cap holds within one step.
- **Nothing left: the job waits until a place may be probed again** (the earliest zone wait or the cap's
  end), a delayed launch message that carries its time. The job is never failed for it: SkyPilot's managed
  jobs retry a launch without limit (`sky/jobs/recovery_strategy.py`: `launch()` is
  `_launch(max_retry=None)`, recovery's last step retries forever), and spot capacity comes back: a round
  in which only spot was short (refused or held back) does not count against a first launch's
  SKYLESS_MAX_WAIT_RETRIES; one with another failure (on-demand without capacity, quota, a transient error)
  counts as before.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from datetime import UTC, datetime

from shared.clouds.errors import CloudError, NoCapacityError
from shared.jobs.blocks import zone_block
from shared.jobs.launching import wait_delay, wait_or_give_up
from shared.jobs.outcomes import Outcome
from shared.optimizer.cooling import place_of
from shared.optimizer.plan import Block, Candidate
from shared.optimizer.probes import Refusal, SpotProbes, spot_probes, with_refusal
from shared.store.models import JobModel
from shared.wiring import Wiring

HELD = "no capacity: spot waits"  # the reason of a step's block; "no capacity" keeps it in failover's list


@dataclass
class SpotGate:
    """One provision step's view of the evidence: read once (at the first spot candidate), then kept up to
    date with the step's own refusals."""

    wiring: Wiring
    job_id: str
    who: str  # "<job id>-<attempt>", as refusals are recorded
    refusals: dict[str, list[Refusal]] | None = None
    held: dict[Block, float] = field(default_factory=dict)  # block -> when its place may be probed
    seen: set[str] = field(default_factory=set)  # spot places held or refused in this step
    other_failed: bool = False  # a launch of this step failed otherwise: on-demand, quota, transient

    @classmethod
    def of(cls, wiring: Wiring, job_id: str, attempt: int) -> SpotGate:
        return cls(wiring, job_id, f"{job_id}-{attempt}")

    def hold(self, candidate: Candidate, now: float | None = None) -> Block | None:
        """A block for this step when the evidence says not to launch spot on `candidate` yet; else None."""
        if not candidate.use_spot:
            return None
        now = time.time() if now is None else now
        place = place_of(candidate.cloud, candidate.region, candidate.zone)
        probes = self._probes(now)
        until = probes.not_before(place)
        if until is None:
            return None
        self.seen.add(place)
        capped = probes.budget_until() == until
        why = "this job's refused launches reached the hourly limit" if capped else "refused launches"
        block = zone_block(candidate, f"{HELD} after {why}; next probe at {_clock(until)}")
        self.held[block] = until
        return block

    def failed(self, candidate: Candidate, error: CloudError, now: float | None = None) -> None:
        """A launch of this step failed; a spot launch refused for capacity is evidence (already written to
        the store for every job, shared/jobs/launching.py)."""
        if not candidate.use_spot or not isinstance(error, NoCapacityError):
            self.other_failed = True
            return
        now = time.time() if now is None else now
        place = place_of(candidate.cloud, candidate.region, candidate.zone)
        self.refusals = with_refusal(self._read(now), place, now, self.who)
        self.seen.add(place)

    def wake_at(self, now: float | None = None) -> float | None:
        """The earliest moment a spot place this step held or was refused in may be probed again."""
        if not self.seen:
            return None
        now = time.time() if now is None else now
        probes = self._probes(now)
        times = [probes.not_before(place) for place in self.seen]
        return min((t for t in times if t is not None), default=now)

    def stored(self, blocks: list[Block]) -> list[Block]:
        """`blocks` without this step's holds: the evidence, not the job, keeps them."""
        return [b for b in blocks if b not in self.held]

    def _read(self, now: float) -> dict[str, list[Refusal]]:
        if self.refusals is None:
            _, read = self.wiring.cooldowns.evidence(now)
            self.refusals = {place: list(listed) for place, listed in read.items()}
        return self.refusals

    def _probes(self, now: float) -> SpotProbes:
        settings = self.wiring.settings
        return spot_probes(self._read(now), self.job_id, now, retry=float(settings.deadline_retry_seconds),
                           per_hour=int(settings.spot_refusals_per_hour))  # fmt: skip


def _clock(at: float) -> str:
    return datetime.fromtimestamp(at, UTC).strftime("%H:%M:%S UTC")


def wait_for_capacity(
    wiring: Wiring, job: JobModel, blocks: list[Block], tried: list[str], gate: SpotGate
) -> Outcome:
    """Nothing of the plan launched: WAITING until the first spot place the step held back or was refused
    in may be probed again, or the round's backoff when a launch failed otherwise (on-demand without
    capacity, quota, a transient error), whichever comes first; with no spot place in the step, the
    backoff."""
    wake = gate.wake_at()
    if wake is None:
        return wait_or_give_up(wiring, job, blocks, tried)
    now = time.time()
    if gate.other_failed:
        wake = min(wake, now + wait_delay(int(job.wait_rounds)))
    why = "no candidate had capacity" if tried else "every spot place of the plan waits on refused launches"
    until = max(wake, now + 1)
    return wait_or_give_up(wiring, job, blocks, tried, until=until, counted=gate.other_failed, why=why)
