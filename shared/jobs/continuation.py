"""Going on in the same process: after a step that asked for the next one by message, a warm handler may
do that next step itself at once instead of waiting for the message's delivery. The message stays the
durable path (a crash here leaves it to do the work); its later delivery finds the step done and is a
no-op. This is what keeps a preemption's replacement launch to one invocation instead of three."""

from __future__ import annotations

from shared.jobs.messages import ProvisionMessage
from shared.jobs.outcomes import Outcome
from shared.jobs.planning import plan_read_job
from shared.jobs.provisioning import launch_read_job
from shared.store.job_store import CooldownsReadOnce
from shared.store.models import JobModel
from shared.wiring import Wiring

FALLBACK_DELAY_SECONDS = 20  # a message this process does the work of itself is delivered this much later


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
