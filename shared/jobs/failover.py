"""Failover past the stored plan: when every candidate a job keeps has failed, plan again with everything
that failed blocked (zones, regions and instance families, clouds), so the job reaches every feasible place
before it waits. Also: the short account of what was tried that `launch` and `status` show."""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from shared.clouds.errors import CloudAuthError, CloudError, InvalidLaunchError, NoCapacityError, QuotaError
from shared.errors import NoOfferingError
from shared.jobs.planning import make_plan
from shared.optimizer.plan import Block, Candidate, Plan
from shared.store.models import JobModel
from shared.wiring import Wiring

LAUNCH_FAILURES = ("no capacity", "quota", "auth", "transient")  # reasons of blocks a failed launch wrote
MAX_TRIED_SHOWN = 20


def replan_after_failures(
    wiring: Wiring, job: JobModel, blocks: list[Block]
) -> tuple[Plan, list[Block]] | None:
    """The next plan with every block in place; failing that, with only the launch failures blocked
    (a region left after a preemption is better than waiting); with the blocklist it was made under (the
    walk goes on under that one: the dropped blocks would skip every candidate of the plan, for ever);
    None when nothing feasible is left."""
    failures = [b for b in blocks if b.reason.startswith(LAUNCH_FAILURES)]
    for blocklist in (blocks, failures) if failures != blocks else (blocks,):
        try:
            return make_plan(wiring, job, blocklist, fallback=False), blocklist
        except NoOfferingError:
            continue
    return None


def compact_blocks(blocks: list[Block], catalog: Any) -> list[Block]:
    """Zone blocks covering every zone of a region become one region block (same for regions of a cloud):
    the blocklist lives in the job record, which every step rewrites."""
    zones: dict[tuple[str, str], list[Block]] = defaultdict(list)
    for block in blocks:
        if block.zone is not None and block.instance_family is None:
            zones[(block.cloud, block.region or "")].append(block)
    out = list(blocks)
    for (cloud, region), listed in zones.items():
        every = set(catalog.zones(cloud, region))
        if every and every <= {b.zone for b in listed}:
            out = [b for b in out if b not in listed]
            out.append(
                Block(cloud=cloud, region=region, reason=f"{_kind(listed[0])}: every zone of {region}")
            )
    regions: dict[str, list[Block]] = defaultdict(list)
    for block in out:
        if block.region is not None and block.zone is None and block.instance_family is None:
            regions[block.cloud].append(block)
    for cloud, listed in regions.items():
        every_region = set(catalog.regions(cloud))
        if every_region and every_region <= {b.region for b in listed}:
            out = [b for b in out if b not in listed]
            out.append(Block(cloud=cloud, reason=f"{_kind(listed[0])}: every region of {cloud}"))
    return out


def _kind(block: Block) -> str:
    return block.reason.split(":", 1)[0] or "failed"


def tried_text(candidate: Candidate, error_message: str) -> str:
    return f"{candidate.place} {candidate.instance_type}: {error_message}"


def refusals_partition(job_id: str) -> str:
    """Where a job's refused launches are noted: beside its timeline, not in it. A deadline job may be refused
    12 times an hour for days; the timeline is what `status`, `logs` (every second) and the dashboard read."""
    return f"refused#{job_id}"


def note_refusal(wiring: Wiring, job: JobModel, candidate: Candidate, error: str, message: str) -> None:
    """A launch request the cloud refused, as the provider scorecard counts it (shared/reports/);
    `error` is the kind a block names: no capacity, quota, auth, transient."""
    detail = {
        "cloud": candidate.cloud,
        "region": candidate.region,
        "zone": candidate.zone,
        "instance_type": candidate.instance_type,
        "use_spot": candidate.use_spot,
        "error": error,
    }
    if job.refusals_noted is not True:  # marked first: a crash between the two writes loses no refusal
        wiring.store.mark_refusals_noted(job)
    wiring.store.note(refusals_partition(job.job_id), "refused", tried_text(candidate, message), detail)


def note_refused_launch(wiring: Wiring, job: JobModel, candidate: Candidate, error: CloudError) -> None:
    """`note_refusal` with the kind of `error`, for the deadline policy's launches (which block nothing for
    capacity). An invalid request is the job's own fault, not a refusal: not noted, as in the walk."""
    if isinstance(error, InvalidLaunchError):
        return
    kinds = ((NoCapacityError, "no capacity"), (QuotaError, "quota"), (CloudAuthError, "auth"))
    kind = next((name for cls, name in kinds if isinstance(error, cls)), "transient")
    note_refusal(wiring, job, candidate, kind, error.message)


def launched_message(count: int, where: str, tried: list[str]) -> str:
    """`launched 2 node(s) on aws/... after 3 place(s) failed: gcp/... : no capacity; ...`"""
    text = f"launched {count} node(s) on {where}"
    if tried:
        shown = "; ".join(tried[:3]) + ("; …" if len(tried) > 3 else "")
        text += f" after {len(tried)} place(s) failed ({shown})"
    return text
