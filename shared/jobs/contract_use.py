"""The deployment's contracts at plan time, what live jobs hold of each reservation now, and how much of
each reservation a cost report's jobs used.

The deployment's contracts are what an admin stored (`skyless admin contracts set FILE`,
shared/store/contract_records.py), read at most once a minute per warm process (`STORED_TTL_SECONDS`; at once
in the process that stored them); where none are stored, the operator's file `SKYLESS_CONTRACTS_FILE`
(shared/config/catalog.py `ContractsConfig`: the local runtime, tests), read again when it changes. A job is
planned at the deployment's contracts and those of its owner's teams, never another team's. A reservation's
free count is its size minus the nodes of the live jobs whose current candidate is in it: read from the
live-jobs index (live jobs only, never a scan of every job), counting jobs that hold or are about to hold
nodes there. Two jobs planned at the same moment may both see the last free nodes; the second launch is then
refused by the cloud (a capacity error) and fails over to the list-price place right behind the reserved one
in its plan.
"""

from __future__ import annotations

import dataclasses
import re
import threading
import time
import zlib
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from shared.config import Settings
from shared.config.catalog import ContractsConfig
from shared.errors import UserError
from shared.jobs.cost_report import AttemptCost
from shared.optimizer import Contracts, Plan, Reservation, TeamPrices, contracts_from_config, merged_contracts
from shared.states import JobState
from shared.store import tenancy
from shared.store.contract_records import StoredContracts
from shared.store.job_store import JobStore
from shared.store.models import JobModel
from shared.task.positions import Document, YamlSyntaxError, load_documents
from shared.wiring import Wiring, wiring_for

# States in which a job's current candidate holds (or is being given) its nodes.
HOLDING = frozenset(
    {JobState.PLANNED, JobState.PROVISIONING, JobState.WAITING, JobState.SETTING_UP, JobState.RUNNING}
)

FILE_KEYS = ("contracts", "teams", "aws", "gcp")
FIELD_PARTS = re.compile(r"([^.\[\]]+)|\[(\d+)\]")  # "teams.ml.contracts.reservations[0].count"
STORED_TTL_SECONDS = 60.0  # how stale a warm process's view of the stored contracts may be


@dataclass(frozen=True)
class DeploymentContracts:
    """The contracts file: what every user's jobs are planned at, and what each team's members get on top."""

    everyone: Contracts
    teams: dict[str, Contracts]

    def for_teams(self, teams: Iterable[str]) -> Contracts:
        """The deployment's contracts, then those of each of `teams` that has some (in name order)."""
        return merged_contracts(self.everyone, *(self.teams[t] for t in sorted(teams) if t in self.teams))

    def every_reservation(self) -> Contracts:
        return merged_contracts(self.everyone, *self.teams.values())


_read: dict[Path, tuple[tuple[int, int], DeploymentContracts]] = {}
_stored: dict[str, tuple[float, StoredContracts | None]] = {}  # events table -> (read at, what was there)
_parsed: dict[tuple[str, int], DeploymentContracts] = {}  # (events table, version) -> its contracts
_lock = threading.Lock()


def deployment_prices(
    wiring: Wiring, job: JobModel, config: ContractsConfig | None = None
) -> TeamPrices | None:
    """The prices a plan of `job` honours: the deployment's contracts and those of its owner's teams; None
    when there are none. Another team's reservations and discounts are never offered."""
    return prices_for(wiring, job.owner, job.job_id, config)


def prices_for(
    wiring: Wiring, owner: str, job_id: str | None = None, config: ContractsConfig | None = None
) -> TeamPrices | None:
    """`deployment_prices` for whatever `owner` plans (a dry run: `job_id` None, nothing excluded)."""
    declared = declared_contracts(wiring, config)
    if declared is None:
        return None
    teams = tenancy.teams_of(wiring.settings, owner) if declared.teams else set()
    contracts = declared.for_teams(teams)
    if not contracts:
        return None
    in_use = reserved_in_use(wiring.store, exclude=job_id) if contracts.reservations else {}
    return TeamPrices(contracts, in_use, at=datetime.now(UTC))


def declared_contracts(wiring: Wiring, config: ContractsConfig | None = None) -> DeploymentContracts | None:
    """The contracts an admin stored, else those of the operator's file, else None (list price)."""
    stored = stored_contracts(wiring)
    if stored is not None and stored.text:
        key = (wiring.settings.table_name("events"), stored.version)
        with _lock:
            parsed = _parsed.get(key)
        if parsed is None:
            parsed = parse_contracts(stored.text, stored.file)
            with _lock:
                _parsed[key] = parsed
        return parsed
    config = config or ContractsConfig.from_env()
    return read_contracts(config.path) if config.path is not None else None


def stored_contracts(wiring: Wiring, *, fresh: bool = False) -> StoredContracts | None:
    """The stored contracts item, as read at most `STORED_TTL_SECONDS` ago by this process (`fresh`: now)."""
    table = wiring.settings.table_name("events")
    now = time.monotonic()
    with _lock:
        cached = _stored.get(table)
    if not fresh and cached is not None and now - cached[0] < STORED_TTL_SECONDS:
        return cached[1]
    stored = wiring.contracts.get()
    remember_stored(wiring, stored)
    return stored


def remember_stored(wiring: Wiring, stored: StoredContracts | None) -> None:
    """What this process just stored (or read) is what its next plans use, without waiting out the TTL."""
    with _lock:
        _stored[wiring.settings.table_name("events")] = (time.monotonic(), stored)


def read_contracts(path: Path) -> DeploymentContracts:
    """The contracts of a file (cached by modification time and size); see `parse_contracts`."""
    try:
        status = path.stat()
        stamp = (status.st_mtime_ns, status.st_size)
        with _lock:
            cached = _read.get(path)
            if cached is not None and cached[0] == stamp:
                return cached[1]
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as error:
        why = getattr(error, "strerror", None) or "not UTF-8 text"
        raise UserError(f"cannot read the deployment's contracts: {why}", file=str(path)) from None
    declared = parse_contracts(text, str(path))
    with _lock:
        _read[path] = (stamp, declared)
    return declared


def contracts_values(text: str, where: str) -> dict[str, Any]:
    """The YAML mapping of a contracts file, read with the bounded loader (shared/task/bounded_yaml.py), its
    top-level keys checked. A UserError naming `where` (and the line) otherwise."""
    return _checked(_document(text, where), where)


def _document(text: str, where: str) -> Document | None:
    try:
        documents = load_documents(text)
    except YamlSyntaxError as error:
        raise UserError(error.message, file=where, line=error.line) from None
    if len(documents) > 1:
        raise UserError("must be one YAML document", file=where, line=documents[1].start_line)
    return documents[0] if documents else None


def _checked(document: Document | None, where: str) -> dict[str, Any]:
    values = (document.value if document else None) or {}
    if not isinstance(values, dict):
        raise UserError("must be a mapping with a contracts key", file=where)
    unknown = sorted(str(k) for k in set(values) - set(FILE_KEYS))
    if unknown:
        line = document.line_of((unknown[0],)) if document else None
        raise UserError(
            f"unknown key {unknown[0]!r}", file=where, line=line, hint=f"use {', '.join(FILE_KEYS)}"
        )
    return values


def parse_contracts(text: str, where: str) -> DeploymentContracts:
    """The contracts of a file's text; a bad one is a UserError naming `where`, the key and its line:

    ```yaml
    contracts: {discounts: [...], reservations: [...]}   # everyone's (shared/optimizer/contract_terms.py)
    teams:
      ml: {contracts: {...}}                              # members of team ml, on top
    ```
    """
    document = _document(text, where)
    values = _checked(document, where)
    try:
        teams = values.get("teams") or {}
        if not isinstance(teams, dict):
            raise UserError("must map team names to their contracts", file=where, field="teams")
        return DeploymentContracts(
            contracts_from_config(values, where),
            {str(name): _team_contracts(name, section, where) for name, section in teams.items()},
        )
    except UserError as error:
        if error.line is not None or not error.field or document is None:
            raise
        path = tuple(int(i) if i else k for k, i in FIELD_PARTS.findall(error.field))
        raise dataclasses.replace(error, line=document.line_of(path)) from None


def _team_contracts(name: object, section: object, where: str) -> Contracts:
    key = f"teams.{name}"
    if not isinstance(section, dict) or set(section) - {"contracts"}:
        raise UserError("must be a mapping with one key, contracts", file=where, field=key)
    try:
        return contracts_from_config(section, where)
    except UserError as error:
        raise UserError(error.message, file=where, field=f"{key}.{error.field}", hint=error.hint) from None


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
        plan: Plan | None = Plan.from_json(zlib.decompress(job.plan_z))
    else:
        plan = Plan.from_json(job.plan) if job.plan else None
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
    settings: Settings, owner: str | None, attempts: Iterable[AttemptCost], since: float, until: float
) -> list[dict[str, object]]:
    """`reservation_use` of the reservations `owner` may use (every one for None, an admin's report); [] when
    the deployment declares none."""
    declared = declared_contracts(wiring_for(settings))
    if declared is None:
        return []
    if owner is None:
        contracts = declared.every_reservation()
    else:
        contracts = declared.for_teams(tenancy.teams_of(settings, owner) if declared.teams else set())
    return reservation_use(contracts, attempts, since, until)


def _in_reservation(a: AttemptCost, r: Reservation) -> bool:
    return (a.cloud, a.region, a.instance_type) == (r.cloud, r.region, r.instance_type) and (
        r.zone is None or a.zone == r.zone
    )
