"""Going on in the same process: after a step that asked for the next one by message, a warm handler may
do that next step itself at once instead of waiting for the message's delivery. The message stays the
durable path (a crash here leaves it to do the work); its later delivery finds the step done and is a
no-op. This is what keeps a preemption's replacement launch to one invocation instead of three."""

from __future__ import annotations

from shared.jobs.messages import ProvisionMessage
from shared.jobs.outcomes import Outcome
from shared.jobs.planning import plan_read_job
from shared.jobs.provisioning import launch_read_job
from shared.optimizer.cooling import Cooling
from shared.store.job_store import Cooldowns
from shared.store.models import JobModel
from shared.wiring import Wiring

FALLBACK_DELAY_SECONDS = 20  # a message this process does the work of itself is delivered this much later

Evidence = tuple[list[Cooling], dict[str, list[tuple[float, str]]]]


class CooldownsReadOnce:
    """The cool-down record read once for one plan-and-launch: the plan's ordering (cooling places) and the
    launch's spot gate (refused launches) come from the same GetItem, milliseconds apart, where each read
    it before. A refusal this call writes drops the read, so nothing after it reads around its own write;
    another job's write between the two uses is the race the two reads already had."""

    def __init__(self, record: Cooldowns) -> None:
        self.record = record
        self._evidence: Evidence | None = None

    def preemptions(self) -> dict[str, list[str]]:
        return self.record.preemptions()

    def refused(self, cloud: str, region: str, zone: str | None, who: str, at: float | None = None) -> None:
        self._evidence = None
        self.record.refused(cloud, region, zone, who, at)

    def cooling(self, now: float | None = None) -> list[Cooling]:
        return self.evidence(now)[0]

    def evidence(self, now: float | None = None) -> Evidence:
        if self._evidence is None:
            self._evidence = self.record.evidence(now)
        return self._evidence


def replan_and_launch(wiring: Wiring, job: JobModel) -> Outcome:
    """After a recovery moved `job` to RECOVERING (and sent its optimize message): plan, then launch, on the
    job as that move left it (each write is conditional on it; no read in between). Where this process may
    not launch (`relaunch_in_same_call` off: Lambda's spot_watch, whose role cannot start instances), the
    launch message the plan sends goes at once to provision; where it launches itself, that message is only
    the fallback and waits FALLBACK_DELAY_SECONDS: sent at once, provision launched the same attempt beside
    this call, and one of the two launches and its cluster record were wasted (and on a cloud whose launch
    is not idempotent, a second cluster)."""
    same_call = wiring.settings.relaunch_in_same_call
    delay = FALLBACK_DELAY_SECONDS if same_call else 0
    if same_call:
        wiring = wiring.with_cooldowns(CooldownsReadOnce(wiring.cooldowns))
    planned = plan_read_job(wiring, job, launch_delay_seconds=delay)
    if planned != Outcome.DONE or not same_call:
        return planned
    return launch_read_job(wiring, job, ProvisionMessage(job_id=job.job_id, attempt=int(job.attempt)))
