"""spot_watch: a cloud says an instance is going away. If it is a node of a live job's current cluster,
recover the job; anything else (our own teardowns, old clusters, unknown instances) changes nothing."""

from __future__ import annotations

from functools import partial
from typing import Any

from shared.events.instances import InstanceEvent, parse_instance_event
from shared.jobs.outcomes import Outcome
from shared.jobs.recovery import recover_job
from shared.states import HAS_NODES, JobState
from shared.wiring import Wiring, current_wiring


def handle_instance_event(event: InstanceEvent, wiring: Wiring | None = None) -> Outcome:
    wiring = wiring or current_wiring()
    ref = wiring.store.node_ref(event.instance_id)
    if ref is None:
        return Outcome.UNKNOWN_JOB
    job = wiring.store.get(ref.job_id)
    if job is None:
        return Outcome.UNKNOWN_JOB
    if job.cluster_id != ref.node_cluster:
        return Outcome.STALE
    if JobState(job.state) not in HAS_NODES:
        return Outcome.ALREADY_DONE
    # Imported here: most instance events are about VMs that are not a live job's (planning and launching
    # are half of what a cold spot_watch would otherwise import).
    from shared.jobs.continuation import FALLBACK_DELAY_SECONDS, replan_and_launch

    cause = f"{event.description} (node rank {int(ref.rank)}, {event.instance_id})"
    warned = event.kind == "spot-warning"
    go_on = partial(replan_and_launch, wiring)  # at once; the messages sent are the fallback
    return recover_job(
        wiring,
        job,
        cause,
        preempted=True,
        warned=warned,
        replan_delay_seconds=FALLBACK_DELAY_SECONDS,
        then=go_on,
    )


def watch_instance_event(body: dict[str, Any], wiring: Wiring | None = None) -> Outcome:
    """An EventBridge event as SQS delivers it. Events about no VM going away change nothing."""
    event = parse_instance_event(body)
    if event is None:
        return Outcome.ALREADY_DONE
    return handle_instance_event(event, wiring)
