"""The deployment's contracts at plan time, what live jobs hold of each reservation now, and how much of
each reservation a cost report's jobs used.

The contracts file (`SKYLESS_CONTRACTS_FILE`, shared/config/catalog.py `ContractsConfig`) is read once per
warm process and again when it changes. A reservation's free count is its size minus the nodes of the live
jobs whose current candidate is in it: read from the live-jobs index (live jobs only, never a scan of every
job), counting jobs that hold or are about to hold nodes there. Two jobs planned at the same moment may both
see the last free nodes; the second launch is then refused by the cloud (a capacity error) and fails over
to the list-price place right behind the reserved one in its plan.
"""

from __future__ import annotations

import threading
import zlib
from collections import Counter
from collections.abc import Iterable
from datetime import UTC, datetime
from pathlib import Path

import yaml

from shared.config.catalog import ContractsConfig
from shared.errors import UserError
from shared.jobs.cost_report import AttemptCost
from shared.optimizer import Contracts, Plan, Reservation, TeamPrices, contracts_from_config
from shared.states import JobState
from shared.store.job_store import JobStore
from shared.store.models import JobModel

# States in which a job's current candidate holds (or is being given) its nodes.
HOLDING = frozenset(
    {JobState.PLANNED, JobState.PROVISIONING, JobState.WAITING, JobState.SETTING_UP, JobState.RUNNING}
)

_read: dict[Path, tuple[float, Contracts]] = {}
_lock = threading.Lock()


def deployment_prices(
    store: JobStore, job_id: str, config: ContractsConfig | None = None
) -> TeamPrices | None:
    """The prices a plan of `job_id` honours, or None when the deployment declares no contracts."""
    config = config or ContractsConfig.from_env()
    if config.path is None:
        return None
    contracts = read_contracts(config.path)
    if not contracts:
        return None
    in_use = reserved_in_use(store, exclude=job_id) if contracts.reservations else {}
    return TeamPrices(contracts, in_use, at=datetime.now(UTC))


def read_contracts(path: Path) -> Contracts:
    """The contracts of a file (cached by modification time). A bad file is a UserError naming it."""
    try:
        stamp = path.stat().st_mtime
    except OSError as error:
        raise UserError(f"cannot read the deployment's contracts: {error.strerror}", file=str(path)) from None
    with _lock:
        cached = _read.get(path)
        if cached is not None and cached[0] == stamp:
            return cached[1]
    try:
        values = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    except yaml.YAMLError as error:
        mark = getattr(error, "problem_mark", None)
        raise UserError("not valid YAML", file=str(path), line=mark.line + 1 if mark else None) from None
    if not isinstance(values, dict):
        raise UserError("must be a mapping with a contracts key", file=str(path))
    contracts = contracts_from_config(values, str(path))
    with _lock:
        _read[path] = (stamp, contracts)
    return contracts


def reserved_in_use(store: JobStore, exclude: str | None = None) -> dict[str, int]:
    """Reservation id -> nodes the live jobs (but `exclude`) hold or are launching there now."""
    used: Counter[str] = Counter()
    for job in store.live_jobs():
        if job.job_id == exclude or JobState(job.state) not in HOLDING:
            continue
        reservation, nodes = _current_reservation(job)
        if reservation is not None:
            used[reservation] += nodes
    return dict(used)


def _current_reservation(job: JobModel) -> tuple[str | None, int]:
    if (
        job.plan_z
    ):  # as shared/jobs/planning.py stores it (imported from there, planning would import us back)
        plan: Plan | None = Plan.model_validate_json(zlib.decompress(job.plan_z))
    else:
        plan = Plan.model_validate_json(job.plan) if job.plan else None
    if plan is None or int(job.task_index) >= len(plan.tasks):
        return None, 0
    candidates = plan.tasks[int(job.task_index)].candidates
    index = int(job.candidate_index)
    if index >= len(candidates):
        return None, 0
    current = candidates[index]
    return current.reservation, current.num_nodes


def reservation_use(
    contracts: Contracts, attempts: Iterable[AttemptCost], since: float, until: float
) -> list[dict[str, object]]:
    """Per reservation, over [since, until): node-hours paid for (its count through the part of its term in
    the window), used (on-demand attempts at $0/h in its place: only a reserved candidate is priced so), and
    idle, with the idle hours' cost where the reservation declares its hourly price."""
    uses = []
    for r in contracts.reservations:
        start = max(since, r.start.timestamp() if r.start else since)
        end = min(until, r.end.timestamp() if r.end else until)
        paid = r.count * max(end - start, 0.0) / 3600
        used = 0.0
        for a in attempts:
            if a.use_spot or a.hourly_price != 0 or not _in_reservation(a, r):
                continue
            ran = min(a.ended_at if a.ended_at is not None else until, end) - max(a.started_at, start)
            used += a.num_nodes * max(ran, 0.0) / 3600
        idle = max(paid - used, 0.0)
        uses.append({
            "reservation": r.id, "cloud": r.cloud, "place": r.place, "instance_type": r.instance_type,
            "count": r.count, "paid_hours": round(paid, 4), "used_hours": round(used, 4),
            "idle_hours": round(idle, 4),
            "idle_cost": None if r.hourly_price is None else round(idle * r.hourly_price, 2),
        })  # fmt: skip
    return uses


def deployment_reservation_use(
    attempts: Iterable[AttemptCost], since: float, until: float
) -> list[dict[str, object]]:
    """`reservation_use` of the deployment's contracts file; [] when it declares none."""
    path = ContractsConfig.from_env().path
    if path is None:
        return []
    return reservation_use(read_contracts(path), attempts, since, until)


def _in_reservation(a: AttemptCost, r: Reservation) -> bool:
    return (a.cloud, a.region, a.instance_type) == (r.cloud, r.region, r.instance_type) and (
        r.zone is None or a.zone == r.zone
    )
