"""Make before break: a running job moves to another place or market (the deadline policy's on-demand -> spot)
by first obtaining the new capacity, and lets the running attempt go only once it has it.

1. The next attempt's cluster is launched while the job stays on its running attempt (the launch is
   idempotent per attempt: a duplicate check gets the same nodes). Its agents hold the next attempt's boot
   token and are answered "not yet" (425) until the job is on their attempt (shared/jobs/node_claims.py).
2. Refused (no capacity, quota, a transient error): the running cluster is untouched; the refusal is the
   place's spot history and a launch request the provider report counts (its note), and the policy is asked
   again at its next check. Obtained, the launch is counted by its cluster record (step 3), not noted.
3. Obtained: the job moves to RECOVERING on the next attempt (the old agents get 410 and stop), the earlier
   attempts are fenced (terminated, and the cloud asked until they are gone: shared/jobs/fencing.py), and
   only then is the new cluster recorded (RECOVERING -> SETTING_UP), which is when its agents get their
   config and start the task. If the cloud has not let go yet, the job goes through the ordinary launch
   (PLANNED, a launch message), whose fence waits; the launch finds the same nodes again.

So one task runs per job at any time; an extra cluster exists only while booting, for the length of this
step, or (a crash between the launch and the move) until the check's redelivery. A crash after the move
(the check is stale then: the job is on the next attempt) is taken up by the optimize message sent before
the move, FOLLOW_UP_SECONDS later: it re-plans the RECOVERING job, whose launch fences the earlier attempt
and finds the obtained nodes again; when this step finished, the message finds the job moved on and does
nothing. (Without it, only reconcile's redrive of stuck jobs took the move up: the chaos run at 1,000 jobs
saw an extra live 1,720 s.) A crash between the launch and the move whose job then ends before the check's
redelivery (its task exited, or it was cancelled) leaves an extra that nothing recorded and no move will
take: the redelivery, finding the job over, terminates it (`let_go_of_unmoved_extra`). Before, only the
orphan reaper ended it, after its grace: the chaos test once found it running after the run's reconcile.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable
from typing import Any

from shared.clouds.errors import CloudError, NoCapacityError
from shared.jobs.blocks import blocks_of
from shared.jobs.costs import cost_with
from shared.jobs.deadlines import cluster_ended, history_json
from shared.jobs.failover import note_refused_launch
from shared.jobs.fencing import FENCE_RETRY_SECONDS, fence_earlier_attempts
from shared.jobs.launching import launch_candidate, note_spot_refusal, record_launch
from shared.jobs.messages import cluster_id_for, send_launch, send_optimize
from shared.jobs.outcomes import Outcome
from shared.jobs.tokens import attempt_fields
from shared.optimizer.plan import Candidate
from shared.spot_policy import Market, SpotHistory
from shared.states import JobState, is_terminal
from shared.store.models import ClusterModel, JobModel
from shared.wiring import Wiring

FOLLOW_UP_SECONDS = 15  # after a move, when the next attempt's re-plan comes in case this step died
logger = logging.getLogger("skyless.make_before_break")


def market_detail(candidate: Candidate, place: str, reason: str) -> dict[str, Any]:
    """What a deadline job's launch event says of its market (the `market` notification reads it): the
    market, where, why the policy chose it, and the cluster's price per hour."""
    return {
        "market": (Market.SPOT if candidate.use_spot else Market.ON_DEMAND).value,
        "place": place,
        "policy_reason": reason,
        "hourly_price": round(candidate.hourly_price * candidate.num_nodes, 6),
    }


def move_when_obtained(
    wiring: Wiring,
    job: JobModel,
    cluster: ClusterModel,
    candidate: Candidate,
    index: int,
    *,
    place: str,
    reason: str,
    history: dict[str, SpotHistory],
    check_at: float | None,
) -> tuple[Outcome, dict[str, SpotHistory], str | None]:
    """Launch the next attempt on `candidate`, then hand the job over to it. Returns the outcome, the
    history (with this launch's result) and, when the launch was refused, why (the job stayed put)."""
    market = Market.SPOT if candidate.use_spot else Market.ON_DEMAND
    next_attempt = int(job.attempt) + 1
    now = time.time()
    try:
        nodes = launch_candidate(wiring, job, candidate, attempt=next_attempt)
    except CloudError as error:
        note_spot_refusal(wiring, job, candidate, error)
        note_refused_launch(wiring, job, candidate, error)
        if market is Market.SPOT and isinstance(error, NoCapacityError):
            history[place] = history.get(place, SpotHistory()).refused(now)
        return Outcome.DONE, history, f"{place} ({market}): {error.message}"
    if market is Market.SPOT:
        history[place] = history.get(place, SpotHistory()).launched(now)
    changes: dict[str, Any] = {
        **attempt_fields(wiring.settings, job.job_id, next_attempt),
        "cluster_id": None,
        "candidate_index": index,
        "wait_rounds": 0,
        "transient_retries": 0,
        "cost": cost_with(job, cluster),
        **cluster_ended(job, cluster, preempted=False, now=now),
        "next_check_at": None,
    }
    changes["spot_history"] = history_json(history)
    cause = f"deadline policy: {reason}; {len(nodes)} node(s) obtained on {place} ({market}) first"
    detail = {"cluster": job.cluster_id, "planned_move": True}  # not a preemption (shared/notifications)
    send_optimize(wiring, job.job_id, next_attempt, delay_seconds=FOLLOW_UP_SECONDS)  # taken up if we die
    if not wiring.store.move(job, JobState.RECOVERING, cause, changes=changes, detail=detail):
        latest = wiring.store.get(job.job_id)
        if latest is None or is_terminal(latest.state):  # cancelled meanwhile: what we made must not stay
            wiring.providers.provider_for(candidate.cloud).terminate(cluster_id_for(job.job_id, next_attempt))
        return Outcome.ALREADY_DONE, history, None
    moved = wiring.store.get(job.job_id)
    assert moved is not None
    fence = fence_earlier_attempts(wiring, moved)
    if not fence.fenced:
        if wiring.store.move(moved, JobState.PLANNED, "waiting for the earlier attempt to be gone"):
            send_launch(wiring, job.job_id, next_attempt, delay_seconds=FENCE_RETRY_SECONDS)
        return Outcome.RETRY_LATER, history, None
    extra = {"market": market.value, "policy_reason": reason, "next_check_at": check_at}
    outcome = record_launch(
        wiring, moved, candidate, index, blocks_of(moved), nodes,
        extra_changes=extra, extra_detail=market_detail(candidate, place, reason),
    )  # fmt: skip
    fence.write_down(wiring, job.job_id, next_attempt)
    return outcome, history, None


def let_go_of_unmoved_extra(wiring: Wiring, job: JobModel, clouds: Iterable[str]) -> None:
    """`job` is over at the attempt a check was for: its next attempt's cluster, if a step that died between
    the launch and the move obtained one on one of `clouds`, is nobody's. Terminated, and said in the
    timeline; a cloud that cannot be asked is left to the orphan reaper."""
    extra = cluster_id_for(job.job_id, int(job.attempt) + 1)
    providers = {wiring.providers.provider_name(cloud): cloud for cloud in clouds}
    for name, cloud in sorted((n, c) for n, c in providers.items() if n is not None):
        try:
            provider = wiring.providers.provider_for(cloud)
            if not [n for n in provider.describe(extra) if n.state != "terminated"]:
                continue
            provider.terminate(extra)
        except CloudError as error:
            logger.warning("%s: %s cannot end %s: %s", job.job_id, name, extra, error.message)
            continue
        message = f"cluster {extra} terminated: the job was over before it moved onto it"
        wiring.store.note(job.job_id, "teardown", message, {"cluster": extra})
