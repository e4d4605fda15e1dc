"""The control plane's side of a deadline job: launch what the policy answers, and ask it again at the
moment it named, by a delayed message (never a sleeping process).

- **Launch** (`launch_by_policy`, from the provision walk of a job with a deadline): ask `decide` with the
  plan's places and the job's spot history; launch its answer (every refused launch noted for the provider
  report, as the plain walk's); a spot launch refused for capacity is recorded in the history and the
  policy asked again at once; on-demand without capacity drops that
  place's on-demand; quota and credential errors block as in the plain walk. A `Wait` moves the job to
  WAITING with a launch message due at the policy's time.
- **Check** (`check_deadline`, provision queue action `deadline_check`): at the time the policy asked for
  (the safety-net time of a spot cluster still starting, a new try of spot from on-demand) the policy
  is asked about the running cluster; if its answer is another place or market, the new capacity is
  obtained first and the running attempt let go only then (shared/jobs/make_before_break.py); a refused
  launch leaves the running cluster as it is (the policy is asked again at the next check, not at once: a
  check trying every zone would spend the job's hourly refusals in a burst, then probe none for an hour).
  A `Wait` lets the cluster go through recovery.
- **Past the estimate** (shared/jobs/deadlines.py `overrun_decision`): once the work counted reaches the
  job's `--hours`, the rule takes the policy's place in both: on-demand at once, a running cluster kept.
  Every launch and check asks for a check at the moment the estimate will be reached, plus the reaction
  time (unless the policy's comes first), so the overrun is seen when it happens, not at the next preemption.
  The first decision that sees it writes `overran_at` with the timeline's `overrun` event (its facts in the
  detail: the `overrun` notification tells them), conditional on the job's version like every write here,
  so a copy of the message notes and tells nothing twice.
- **No recovery limit**: preemptions never take spot away from a deadline job; its policy alone (whose
  safety net keeps the deadline) decides, for as long as it wants spot.

SQS delays stop at 900 s, so a message due later carries `not_before` and is sent on again until due.
A job holds the time of its one pending check (`next_check_at`); a check that does not match it (a
duplicate, or one a newer decision replaced) is dropped, so duplicates never multiply.
"""

from __future__ import annotations

import time
from typing import Any

from shared.aws.queues import MAX_DELAY_SECONDS
from shared.clouds.errors import CloudError, InvalidLaunchError, NoCapacityError, TransientCloudError
from shared.jobs.blocks import block_for, blocks_json, blocks_of, zone_block
from shared.jobs.deadlines import (
    OVERRUN_KIND,
    candidate_for,
    cheapest_on_demand,
    current_placement,
    deadline_state,
    earliest,
    estimate_reached_at,
    history_json,
    history_of,
    job_probes,
    overrun_decision,
    overrun_facts,
    overrun_note,
    past_estimate,
    policy_config,
    policy_places,
    probe_view,
    with_shared_evidence,
)
from shared.jobs.failover import note_refused_launch
from shared.jobs.launching import (
    fail_provisioning,
    launch_candidate,
    note_spot_refusal,
    record_launch,
    retry_later,
    wait_or_give_up,
)
from shared.jobs.make_before_break import let_go_of_unmoved_extra, market_detail, move_when_obtained
from shared.jobs.messages import ProvisionMessage
from shared.jobs.outcomes import Outcome
from shared.jobs.planning import plan_of
from shared.optimizer.cooling import place_of
from shared.optimizer.probes import with_refusal
from shared.spot_policy import (
    DeadlineState,
    Market,
    PlaceOption,
    SpotHistory,
    UseSpot,
    Wait,
    decide,
    next_check,
)
from shared.states import JobState, is_terminal
from shared.store.models import ClusterModel, JobModel
from shared.wiring import Wiring

CHECKED_STATES = (JobState.SETTING_UP, JobState.RUNNING)


def send_provision_at(wiring: Wiring, body: dict[str, Any], at: float) -> None:
    """A provision message due at `at` (epoch seconds): delayed up to SQS's 900 s, sent on until due."""
    delay = max(0, min(MAX_DELAY_SECONDS, int(at - time.time() + 0.999)))
    wiring.queues.provision.send({**body, "not_before": at}, delay_seconds=delay)


def superseded_wait(job: JobModel, message: ProvisionMessage) -> bool:
    """True for a launch message that must not wake a job in a timed wait (a deadline job's, or a plain spot
    job's waiting on the evidence, shared/jobs/spot_gate.py):

    - a copy of a wait's message that is not its current one, delivered again after the job already woke
      (and perhaps waited anew). Each copy would otherwise walk the places and wait again, sending one more
      launch each round: refused launches doubling with every round;
    - a launch without a time while the wait's own message is still ahead: the fallback of a launch the
      step already did itself (shared/jobs/continuation.py), which ended in this wait. Taken, it walked the
      places again 20 s after every preemption that found no spot, and the job's next probe came 20 s after
      the moment the policy had chosen. Reconcile's redrive of a job stuck past its wait still wakes it."""
    if JobState(job.state) != JobState.WAITING:
        return False
    if message.not_before is None:
        return job.next_check_at is not None and float(job.next_check_at) > time.time() + 1
    return job.next_check_at is None or abs(float(job.next_check_at) - float(message.not_before)) > 1e-3


def defer_if_early(wiring: Wiring, message: ProvisionMessage) -> bool:
    """True (and the message sent on) when a `not_before` message came before its time."""
    if message.not_before is None or message.not_before <= time.time() + 1:
        return False
    send_provision_at(wiring, message.as_body(), message.not_before)
    return True


def launch_by_policy(wiring: Wiring, job: JobModel) -> Outcome:
    plan = plan_of(job)
    if plan is None:
        return fail_provisioning(wiring, job, "no plan to provision")
    candidates = plan.tasks[int(job.task_index)].candidates
    blocks = blocks_of(job)
    places, by_key = policy_places(wiring.catalog, candidates, blocks)
    cooling, refusals = wiring.cooldowns.evidence()
    history = with_shared_evidence(history_of(job), by_key, cooling)
    config = policy_config(wiring.settings)
    if not _noted_overrun(wiring, job, deadline_state(job, None, time.time()), None, places):
        return Outcome.ALREADY_DONE
    tried: list[str] = []
    for _ in range(2 * len(places) + 2):
        if not places:
            break
        now = time.time()
        probes = job_probes(wiring.settings, job.job_id, refusals, now, history)
        state = deadline_state(job, None, now)
        decision = overrun_decision(state, places) or decide(
            state, places, probe_view(history, by_key, probes, config.retry), config
        )
        if isinstance(decision, Wait):
            return _wait(wiring, job, decision, history, blocks)
        market = Market.SPOT if isinstance(decision, UseSpot) else Market.ON_DEMAND
        option = next(o for o in places if o.place == decision.place)
        planned = by_key[decision.place]
        candidate = candidate_for(option, planned, market)
        try:
            nodes = launch_candidate(wiring, job, candidate)
        except TransientCloudError as error:
            note_refused_launch(wiring, job, candidate, error)
            if int(job.transient_retries) < wiring.settings.max_transient_retries:
                return retry_later(wiring, job, candidates.index(planned), blocks, error)
            blocks.append(zone_block(candidate, f"transient: {error.message}"))
            places = [o for o in places if o.place != option.place]
        except InvalidLaunchError as error:
            return fail_provisioning(wiring, job, f"{decision.place}: {error.message}")
        except NoCapacityError as error:
            note_spot_refusal(wiring, job, candidate, error)
            note_refused_launch(wiring, job, candidate, error)
            tried.append(f"{decision.place} ({market}): {error.message}")
            if market is Market.SPOT:
                history[option.place] = history.get(option.place, SpotHistory()).refused(now)
                zone = place_of(candidate.cloud, candidate.region, candidate.zone)
                refusals = with_refusal(refusals, zone, now, f"{job.job_id}-{int(job.attempt)}")
            else:
                places = [_without_on_demand(o) if o.place == option.place else o for o in places]
                places = [o for o in places if o.spot_price is not None or o.on_demand_price is not None]
        except CloudError as error:
            note_refused_launch(wiring, job, candidate, error)
            block = block_for(candidate, error)
            blocks.append(block)
            tried.append(f"{decision.place}: {error.message}")
            places = [o for o in places if not _covers(block, by_key[o.place])]
        else:
            if market is Market.SPOT:
                history[option.place] = history.get(option.place, SpotHistory()).launched(now)
            reached = estimate_reached_at(job, state, config.reaction, launched_at=time.time())
            check_at = earliest(next_check(decision), reached)
            changes = {
                "market": market.value,
                "policy_reason": decision.reason,
                "spot_history": history_json(history),
                "next_check_at": check_at,
            }
            index = candidates.index(planned)
            detail = market_detail(candidate, decision.place, decision.reason)
            outcome = record_launch(
                wiring, job, candidate, index, blocks, nodes, extra_changes=changes, extra_detail=detail
            )
            if outcome is Outcome.DONE and check_at is not None:
                send_provision_at(wiring, _check_body(job), check_at)
            return outcome
    return wait_or_give_up(wiring, job, blocks, tried)


def check_deadline(wiring: Wiring, message: ProvisionMessage) -> Outcome:
    from shared.jobs.recovery import recover_job

    job = wiring.store.get(message.job_id)
    if job is None:
        return Outcome.UNKNOWN_JOB
    if message.attempt != job.attempt:
        return Outcome.STALE
    if job.deadline_at and is_terminal(job.state):  # a move this check began may have obtained a cluster
        plan = plan_of(job)
        clouds = {c.cloud for c in plan.tasks[int(job.task_index)].candidates} if plan is not None else set()
        let_go_of_unmoved_extra(wiring, job, clouds)
    if not job.deadline_at or JobState(job.state) not in CHECKED_STATES:
        return Outcome.ALREADY_DONE
    if job.next_check_at is None or abs(float(job.next_check_at) - float(message.not_before or 0)) > 1e-3:
        return Outcome.STALE  # a newer decision replaced this check, or this is a duplicate already acted on
    if defer_if_early(wiring, message):
        return Outcome.RETRY_LATER
    plan = plan_of(job)
    cluster = wiring.store.cluster(job.cluster_id)
    current = current_placement(cluster)
    if plan is None or current is None:
        return Outcome.ALREADY_DONE
    candidates = plan.tasks[int(job.task_index)].candidates
    places, by_key = policy_places(wiring.catalog, candidates, blocks_of(job))
    now = time.time()
    state = deadline_state(job, current, now)
    cooling, refusals = wiring.cooldowns.evidence(now)
    history = with_shared_evidence(history_of(job), by_key, cooling)
    config = policy_config(wiring.settings)
    probes = job_probes(wiring.settings, job.job_id, refusals, now, history)
    decision = overrun_decision(state, places) or decide(
        state, places, probe_view(history, by_key, probes, config.retry), config
    )
    if isinstance(decision, Wait):
        cause = f"deadline policy: {decision.reason}"
        return recover_job(
            wiring, job, cause, preempted=False, counts_as_restart=True, spends_a_restart=False,
            extra_detail={"policy_wait": True},  # told as the policy's stop, not a preemption
        )  # fmt: skip
    market = Market.SPOT if isinstance(decision, UseSpot) else Market.ON_DEMAND
    check_at = next_check(decision)
    reason = decision.reason
    if decision.place != current.place or market is not current.market:
        option = next(o for o in places if o.place == decision.place)
        planned = by_key[decision.place]
        candidate = candidate_for(option, planned, market)
        moved_check = earliest(check_at, estimate_reached_at(job, state, config.reaction, launched_at=now))
        outcome, history, refused = move_when_obtained(
            wiring, job, cluster, candidate, candidates.index(planned),  # type: ignore[arg-type]
            place=decision.place, reason=decision.reason, history=history, check_at=moved_check,
        )  # fmt: skip
        if refused is None:
            if outcome is Outcome.DONE and moved_check is not None:
                send_provision_at(wiring, {**_check_body(job), "attempt": int(job.attempt) + 1}, moved_check)
            return outcome
        check_at = now + float(wiring.settings.deadline_retry_seconds)  # asked again, with the refusal known
        reason = f"stayed on {current.place} ({current.market}): {refused}"
    check_at = earliest(check_at, estimate_reached_at(job, state, config.reaction))
    changes = {"policy_reason": reason, "next_check_at": check_at, "spot_history": history_json(history)}
    if not _noted_overrun(wiring, job, state, cluster, places, changes):
        return Outcome.ALREADY_DONE
    if check_at is not None:
        send_provision_at(wiring, _check_body(job), check_at)
    return Outcome.DONE


def _wait(
    wiring: Wiring, job: JobModel, decision: Wait, history: dict[str, SpotHistory], blocks: list[Any]
) -> Outcome:
    changes = {
        "spot_history": history_json(history),
        "policy_reason": decision.reason,
        "market": None,
        "next_check_at": decision.until,  # the one launch this wait sends: any other copy is stale
        "candidate_index": 0,
        "blocklist": blocks_json(blocks),
    }
    if not wiring.store.move(job, JobState.WAITING, f"deadline policy: {decision.reason}", changes=changes):
        return Outcome.ALREADY_DONE
    body = {"job_id": job.job_id, "attempt": int(job.attempt), "action": "launch"}
    send_provision_at(wiring, body, decision.until)
    return Outcome.RETRY_LATER


def _noted_overrun(
    wiring: Wiring,
    job: JobModel,
    state: DeadlineState,
    cluster: ClusterModel | None,
    places: list[PlaceOption],
    changes: dict[str, Any] | None = None,
) -> bool:
    """Save `changes` (if any) and, at the first decision past the estimate, `overran_at` with the timeline's
    overrun event (which the `overrun` notification tells), in one conditional write: a copy of the step
    notes nothing twice. False when the job changed under this step (a copy of its message acted first)."""
    first_past = past_estimate(state) and job.overran_at is None
    if not first_past:
        return True if changes is None else wiring.store.save_progress(job, changes)
    note = overrun_note(job, on_demand=cheapest_on_demand(places) is not None)
    facts = overrun_facts(job, state, cluster, places)
    changes = {**(changes or {}), "overran_at": state.now}
    return wiring.store.save_progress(job, changes, note, kind=OVERRUN_KIND, detail=facts)


def _check_body(job: JobModel) -> dict[str, Any]:
    return {"job_id": job.job_id, "attempt": int(job.attempt), "action": "deadline_check"}


def _covers(block: Any, candidate: Any) -> bool:
    return bool(block.covers(candidate.cloud, candidate.region, candidate.zone, candidate.instance_type))


def _without_on_demand(option: PlaceOption) -> PlaceOption:
    return PlaceOption(option.place, option.spot_price, None, option.region)
