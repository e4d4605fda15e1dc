"""Going on in the same process: after a step that asked for the next one by message, a warm handler may
do that next step itself at once instead of waiting for the message's delivery. The message stays the
durable path (a crash here leaves it to do the work); its later delivery finds the step done and is a
no-op. This is what keeps a preemption's replacement launch to one invocation instead of three."""

from __future__ import annotations

from shared.jobs.outcomes import Outcome
from shared.jobs.planning import plan_job
from shared.jobs.provisioning import provision_job
from shared.wiring import Wiring

FALLBACK_DELAY_SECONDS = 20  # the optimize message of a recovery that goes on here waits this long


def replan_and_launch(wiring: Wiring, job_id: str, attempt: int) -> Outcome:
    """After a recovery moved the job to RECOVERING (and sent its optimize message): plan, then launch.
    Where this process may not launch (`relaunch_in_same_call` off: Lambda's spot_watch, whose role cannot
    start instances), the launch message the plan sent is left to provision."""
    planned = plan_job({"job_id": job_id, "attempt": attempt}, wiring)
    if planned != Outcome.DONE or not wiring.settings.relaunch_in_same_call:
        return planned
    return provision_job({"job_id": job_id, "attempt": attempt, "action": "launch"}, wiring)
