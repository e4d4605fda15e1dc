"""Optimize: plan the job's pipeline (with its blocklist), store the plan, and ask for a launch."""

from __future__ import annotations

import dataclasses
import json
import time
import zlib
from typing import Any

from shared.config.control_plane import ReliabilityPriorConfig
from shared.errors import NoOfferingError, UserError
from shared.jobs.blocks import blocks_of, sticky
from shared.jobs.job_groups import tell_group
from shared.jobs.messages import OptimizeMessage, send_launch
from shared.jobs.outcomes import Outcome
from shared.jobs.task_records import read_pipeline_of
from shared.optimizer.cooling import order_for_cooling
from shared.optimizer.placement import Source
from shared.optimizer.plan import Block, Candidate, Plan
from shared.optimizer.reliability import SNAPSHOT_KEY, PlaceRecord, snapshot_records, weigh_by_scorecard
from shared.optimizer.spread import DEFAULT_KEPT, MAX_RANKED, spread_candidates
from shared.states import JobState
from shared.store.models import JobModel
from shared.wiring import Wiring, current_wiring

PLANNABLE = (JobState.PENDING, JobState.RECOVERING)
KEPT_PER_TASK = DEFAULT_KEPT  # candidates a job keeps per task; a re-plan reaches past them
PRIOR_READ_TTL_SECONDS = 300  # a warm process re-reads the scorecard snapshot this often
_prior_reads: dict[str, tuple[float, list[PlaceRecord]]] = {}


def plan_job(body: dict[str, Any], wiring: Wiring | None = None) -> Outcome:
    wiring = wiring or current_wiring()
    message = OptimizeMessage.from_body(body)
    job = wiring.store.get(message.job_id)
    if job is None:
        return Outcome.UNKNOWN_JOB
    if message.attempt != job.attempt:
        return Outcome.STALE
    return plan_read_job(wiring, job)


def plan_read_job(wiring: Wiring, job: JobModel, *, launch_delay_seconds: int = 0) -> Outcome:
    """Plan `job` as read, or as a move of this call left it (the move to PLANNED is conditional on the
    state and version in hand). `launch_delay_seconds`: the launch message is only the fallback of a
    caller that goes on to launch itself (shared/jobs/continuation.py); sent at once, provision would
    launch the same attempt beside it."""
    if JobState(job.state) not in PLANNABLE:
        return Outcome.ALREADY_DONE
    try:
        plan = make_plan(wiring, job)
    except UserError as error:
        failed = wiring.store.move(job, JobState.FAILED, f"no plan: {error}", changes={"reason": str(error)})
        if failed:
            tell_group(wiring, job)
        return Outcome.DONE if failed else Outcome.ALREADY_DONE
    top = plan.tasks[int(job.task_index)].chosen
    moved = wiring.store.move(
        job,
        JobState.PLANNED,
        f"planned {candidate_text(top)}",
        changes={**plan_fields(plan), "candidate_index": 0},
    )
    if not moved:
        return Outcome.ALREADY_DONE
    # Were this process to die here, the launch message is lost: reconcile re-sends it for stuck PLANNED jobs.
    send_launch(wiring, job.job_id, int(job.attempt), delay_seconds=launch_delay_seconds)
    return Outcome.DONE


def make_plan(
    wiring: Wiring, job: JobModel, blocks: list[Block] | None = None, *, fallback: bool = True
) -> Plan:
    """The plan under `blocks` (default: the job's); if they leave nothing and `fallback`, the plan under
    the sticky ones only (a preempted region is better than no place at all). NoOfferingError otherwise."""
    from shared.jobs.contract_use import deployment_prices
    from shared.optimizer import plan_pipeline

    pipeline = read_pipeline_of(wiring, job)
    clouds = set(json.loads(job.clouds)) if job.clouds else None
    served = wiring.providers.served_clouds()
    if served is not None:
        clouds = served if clouds is None else clouds & served  # never plan where nothing can launch
    blocks = blocks_of(job) if blocks is None else blocks
    options: dict[str, Any] = {
        "enabled_clouds": clouds,
        "minimize": job.minimize,
        "max_candidates": MAX_RANKED,
        "prices": deployment_prices(wiring, job),
        "data": sources_of(job),
    }
    try:
        plan = plan_pipeline(pipeline, wiring.catalog, blocklist=blocks, **options)
    except NoOfferingError:
        if not fallback or blocks == sticky(blocks):
            raise
        plan = plan_pipeline(pipeline, wiring.catalog, blocklist=sticky(blocks), **options)
    return shape_failover(wiring, plan)


def sources_of(job: JobModel) -> list[Source]:
    """The buckets the job reads, as submit placed them (shared.storage.gravity)."""
    return [Source(**fields) for fields in json.loads(getattr(job, "data_sources", None) or "[]")]


def sources_field(sources: list[Source]) -> str | None:
    return json.dumps([dataclasses.asdict(s) for s in sources]) if sources else None


def shape_failover(wiring: Wiring, plan: Plan) -> Plan:
    """Each task's failover list as a job keeps it: with the reliability prior on, ranked by the price
    expected from the provider scorecard (shared/optimizer/reliability.py, with notes why); spot candidates
    in zones or regions cooling after preemptions moved last (shared/optimizer/cooling.py, with a note why),
    then cut to a short list that spans clouds, regions and zones (shared/optimizer/spread.py)."""
    spot = any(c.use_spot for t in plan.tasks for c in t.candidates)
    cooling = wiring.cooldowns.cooling() if spot else []
    prior_days = ReliabilityPriorConfig.from_env().days
    places = _scorecard_places(wiring) if prior_days else []
    for task_plan in plan.tasks:
        candidates = task_plan.candidates
        notes: list[str] = []
        if places:
            candidates, notes = weigh_by_scorecard(
                candidates, places, objective=plan.objective, days=prior_days
            )
        ordered, cooling_notes = order_for_cooling(candidates, cooling)
        task_plan.candidates = spread_candidates(ordered, KEPT_PER_TASK)
        plan.notes.extend(n for n in [*notes, *cooling_notes] if n not in plan.notes)
    return plan


def _scorecard_places(wiring: Wiring) -> list[PlaceRecord]:
    """The scorecard snapshot the reconcile sweep keeps (none yet: no prior)."""
    prefix = wiring.settings.prefix
    read_at, places = _prior_reads.get(prefix, (0.0, []))
    if time.monotonic() - read_at > PRIOR_READ_TTL_SECONDS or read_at == 0.0:
        text = wiring.objects.get_text(SNAPSHOT_KEY)
        places = snapshot_records(text) if text else []
        _prior_reads[prefix] = (time.monotonic(), places)
    return places


def candidate_text(candidate: Candidate) -> str:
    market = " (spot)" if candidate.use_spot else ""
    reserved = f" in reservation {candidate.reservation}" if candidate.reservation else ""
    return f"{candidate.place} {candidate.instance_type}{market} at ${candidate.hourly_price:.2f}/h{reserved}"


def plan_fields(plan: Plan) -> dict[str, Any]:
    """The job fields that store a plan (compressed: every later write of the job is billed by its size)."""
    return {"plan_z": zlib.compress(plan.to_json().encode()), "plan": None}


def plan_of(job: JobModel) -> Plan | None:
    if job.plan_z:
        return Plan.from_json(zlib.decompress(job.plan_z))
    return Plan.from_json(job.plan) if job.plan else None
