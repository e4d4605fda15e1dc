"""Budgets on jobs (shared/budgets/ holds the arithmetic and the records): refuse a launch over a monthly
budget (the owner's, or a team's the owner is a member of), and on each reconcile sweep, for each live job,
notify at 50/80/100 % of its cost cap, of its owner's monthly budget and of each of its owner's teams' (each
notice once: a claim in the budgets partition), and at 100 % stop the job. A team's threshold is told once
to the whole team (every member on their own channels, and the team's Slack channel: the notify function,
shared/notifications/team_notices.py); each member's live job also records it in its timeline, untold.

Stopping goes through the preemption-notice path: the job is marked (`budget_stop`, a conditional write),
each node's next report is answered with `preempt`, the agent passes the notice to the task (SIGTERM),
writes back its MOUNT_CACHED buckets and reports `preempting`; that report ends the job (CANCELLED, with
the arithmetic as its reason) instead of recovering it. A node that never reports again is caught by the
sweep: a job marked longer than `STOP_GRACE_SECONDS` ago is ended and its cluster torn down.

A month's spend is its ended attempts plus its running clusters. Ended attempts are the owner's cost rollups
of the month's UTC days (shared/store/cost_rollups.py: written with each cluster's end, once however often it
ends, split at midnight), so an attempt that began last month counts only this month's hours this month.
Running is each live job's current cluster, while UP, from the later of its launch and the month's start.
A cluster whose job has ended is in neither part until its teardown writes its rollup (seconds; a lost
teardown: until the next sweep ends it). A team's spend is the sum of its members' (a member of two teams
counts in both).

Reads per sweep, beyond the live jobs the sweep already read: per live job with a cap or an owner with a
budget, its cluster (once a sweep); per owner of a live job, the owner's budget record; one Query of the
teams' budgets, and only when there is one, per owner of a live job its teams (one Query) and per team with a
budget its members (one Query); per owner with a budget or in a team with one, the owner's rollups of the
month (one Query, at most a month's days x clouds items, whatever the number of finished jobs), once per
sweep. Outside a sweep (a launch, `budget show`) an owner's live jobs are read from the owner-state index,
one Query per live state, reading only those jobs.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from shared.budgets.limits import THRESHOLDS, Spend, month_of, month_start, notice, refusal, team_notice, usd
from shared.budgets.records import Budget, team_scope, user_scope
from shared.errors import UserError
from shared.jobs.costs import cluster_cost, cost_with
from shared.jobs.messages import cluster_id_for, send_teardown
from shared.states import HAS_NODES, LIVE, JobState, is_terminal
from shared.store.cost_rollups import day_of
from shared.store.models import ClusterModel, JobModel
from shared.wiring import Wiring

STOP_GRACE_SECONDS = 180  # the longest a notice waits for the node's write-back before the sweep ends the job


def job_spend(wiring: Wiring, job: JobModel, now: float, cluster: ClusterModel | None = None) -> float:
    """What the job has cost: its earlier attempts (recorded) plus its current cluster up to `now`."""
    if is_terminal(job.state):
        return float(job.cost or 0)
    if cluster is None and job.cluster_id:
        cluster = wiring.store.cluster(job.cluster_id)
    return round(float(job.cost or 0) + cluster_cost(cluster, now), 6)


def ended_spend(wiring: Wiring, owner: str, now: float) -> float:
    """What the owner's ended attempts cost this month: the rollups of the month's days up to today."""
    pieces = wiring.store.cost_pieces(day_of(month_start(now)), day_of(now), owner)
    return round(sum(piece.cost for piece in pieces), 6)


def running_cost(cluster: ClusterModel | None, since: float, now: float) -> float:
    """$ for the cluster's nodes from the later of its launch and `since` until `now`, while it is UP (an
    ended cluster's cost is in the rollups)."""
    if cluster is None or cluster.state != "UP" or cluster.hourly_price is None:
        return 0.0
    hours = max(0.0, now - max(float(cluster.launched_at), since)) / 3600
    return float(cluster.hourly_price) * int(cluster.num_nodes) * hours


def live_jobs_of(wiring: Wiring, owner: str) -> list[JobModel]:
    """The owner's live jobs: one owner-state index Query per live state, no finished job read."""
    return [job for state in sorted(LIVE) for job in wiring.store.iter_jobs_of(owner, state=state)]


ClusterOf = Callable[[JobModel], ClusterModel | None]


def month_spend(
    wiring: Wiring,
    owner: str,
    now: float,
    live_jobs: Iterable[JobModel] | None = None,
    cluster_of: ClusterOf | None = None,
) -> Spend:
    """The owner's spend this month: ended attempts (rollups) and running clusters up to `now`, of
    `live_jobs` (the owner's; read from the owner-state index when None)."""
    jobs = live_jobs_of(wiring, owner) if live_jobs is None else live_jobs
    cluster_of = cluster_of or (lambda job: wiring.store.cluster(job.cluster_id))
    since = month_start(now)
    running = sum(
        running_cost(cluster_of(job), since, now)
        for job in jobs
        if job.owner == owner and job.cluster_id and not is_terminal(job.state)
    )
    return Spend(ended_spend(wiring, owner, now), round(running, 6))


def team_spend(
    wiring: Wiring,
    team: str,
    now: float,
    by_member: dict[str, Spend] | None = None,
    member_spend: Callable[[str], Spend] | None = None,
) -> Spend:
    """The team's spend this month: its members' (`by_member` keeps each member's, read once; `member_spend`
    reads one, `month_spend` by default)."""
    by_member = {} if by_member is None else by_member
    member_spend = member_spend or (lambda member: month_spend(wiring, member, now))
    finished = live = 0.0
    for member in sorted(wiring.budgets.members_of(team)):
        if member not in by_member:
            by_member[member] = member_spend(member)
        finished += by_member[member].finished
        live += by_member[member].live
    return Spend(round(finished, 6), round(live, 6))


def team_budget_words(team: str, now: float) -> str:
    return f"monthly budget of team {team} for {month_of(now)}"


def check_launch_allowed(wiring: Wiring, owner: str, now: float | None = None) -> None:
    """Refuse (UserError naming the arithmetic) a launch by an owner whose monthly budget, or whose team's,
    is spent."""
    now = now or time.time()
    by_member: dict[str, Spend] = {}
    budget = wiring.budgets.get(user_scope(owner))
    if budget is not None and budget.monthly_limit > 0:
        spent = by_member[owner] = month_spend(wiring, owner, now)
        if spent.total >= budget.monthly_limit:
            what = f"monthly budget of {month_of(now)}"
            hint = "`skyless budget show` says it; `skyless budget set --monthly USD` raises it"
            raise UserError(refusal(what, spent, budget.monthly_limit), field="budget", hint=hint)
    team_budgets = wiring.budgets.team_budgets()
    if not team_budgets:
        return
    for team in sorted(wiring.budgets.teams_of(owner) & team_budgets.keys()):
        limit = team_budgets[team].monthly_limit
        spent = team_spend(wiring, team, now, by_member)
        if spent.total >= limit:
            hint = f"`skyless budget show --team {team}` says it; an admin raises it (`budget set --team`)"
            raise UserError(refusal(team_budget_words(team, now), spent, limit), field="budget", hint=hint)


class BudgetSweep:
    """One reconcile sweep's budget checks; owners' monthly spend is read once per sweep. `live_jobs`: the
    jobs the sweep read from the live index (None: each owner's are read from the owner-state index)."""

    def __init__(self, wiring: Wiring, now: float, live_jobs: Sequence[JobModel] | None = None) -> None:
        self.wiring, self.now = wiring, now
        self._live: dict[str, list[JobModel]] | None = None
        if live_jobs is not None:
            self._live = {}
            for job in live_jobs:
                self._live.setdefault(job.owner, []).append(job)
        self._clusters: dict[str, ClusterModel | None] = {}
        self._budgets: dict[str, Budget | None] = {}
        self._spend: dict[str, Spend] = {}
        self._team_budgets: dict[str, Budget] | None = None
        self._teams_of: dict[str, set[str]] = {}
        self._team_spend: dict[str, Spend] = {}

    def cluster_of(self, job: JobModel) -> ClusterModel | None:
        if not job.cluster_id:
            return None
        if job.cluster_id not in self._clusters:
            self._clusters[job.cluster_id] = self.wiring.store.cluster(job.cluster_id)
        return self._clusters[job.cluster_id]

    def month_spend(self, owner: str) -> Spend:
        if owner not in self._spend:
            live = None if self._live is None else self._live.get(owner, [])
            self._spend[owner] = month_spend(self.wiring, owner, self.now, live, self.cluster_of)
        return self._spend[owner]

    def budget_of(self, owner: str) -> Budget | None:
        if owner not in self._budgets:
            self._budgets[owner] = self.wiring.budgets.get(user_scope(owner))
        return self._budgets[owner]

    def team_limits(self, owner: str) -> list[tuple[str, str, float, str, float]]:
        """(what, notice scope, limit, action, spent) of each budget of a team `owner` is a member of."""
        if self._team_budgets is None:
            self._team_budgets = self.wiring.budgets.team_budgets()
        if not self._team_budgets:
            return []
        if owner not in self._teams_of:
            self._teams_of[owner] = self.wiring.budgets.teams_of(owner) & self._team_budgets.keys()
        limits = []
        for team in sorted(self._teams_of[owner]):
            if team not in self._team_spend:
                spend = team_spend(self.wiring, team, self.now, self._spend, self.month_spend)
                self._team_spend[team] = spend
            budget, month = self._team_budgets[team], month_of(self.now)
            limits.append((team_budget_words(team, self.now), f"{team_scope(team)}#{month}#{owner}",
                           budget.monthly_limit, budget.action, self._team_spend[team].total))  # fmt: skip
        return limits

    def _tell_team(self, scope: str, threshold: int, detail: dict[str, Any]) -> None:
        """A team's threshold, once for the whole team (`scope`: `team#<team>#<month>#<member>`): one event in
        the team's partition, which the notify function sends to every member's channels and the team's own
        (shared/notifications/team_notices.py)."""
        _, team, month, _member = scope.split("#")
        if self.wiring.budgets.claim_notice(f"notice#{team_scope(team)}#{month}#{threshold}"):
            text = team_notice(team_budget_words(team, self.now), threshold, detail["spent"], detail["limit"],
                               detail["action"])  # fmt: skip
            self.wiring.store.note(team_scope(team), "budget", text, {**detail, "team": team})

    def check(self, job: JobModel) -> str | None:
        """Notify and stop as the job's limits say; answers "stopping", "ended", "warned" or None."""
        if job.group_tasks or is_terminal(job.state):
            return None
        if job.budget_stop:
            return self._end_if_unanswered(job)
        limits: list[tuple[str, str, float, str, float]] = []  # (what, notice scope, limit, action, spent)
        if job.max_cost:
            spent = job_spend(self.wiring, job, self.now, self.cluster_of(job))
            action = job.max_cost_action or "stop"
            limits.append(
                (f"cost cap of job {job.job_id}", f"job#{job.job_id}", float(job.max_cost), action, spent)
            )
        budget = self.budget_of(job.owner)
        if budget is not None and budget.monthly_limit > 0:
            month = month_of(self.now)
            limits.append((f"monthly budget of {month}", f"{budget.scope}#{month}", budget.monthly_limit,
                           budget.action, self.month_spend(job.owner).total))  # fmt: skip
        limits.extend(self.team_limits(job.owner))
        outcome = None
        for what, scope, limit, action, spent in limits:
            percent = 100.0 * spent / limit
            for threshold in THRESHOLDS:
                if percent >= threshold and self.wiring.budgets.claim_notice(f"notice#{scope}#{threshold}"):
                    text = notice(what, threshold, spent, limit, action)
                    detail: dict[str, Any] = {"percent": threshold, "spent": spent, "limit": limit,
                                              "action": action}  # fmt: skip
                    if scope.startswith("team#"):
                        self._tell_team(scope, threshold, detail)
                        detail["team"] = scope.split("#")[1]  # the job's record; told through the team's
                    self.wiring.store.note(job.job_id, "budget", text, detail)
            if percent >= 100:
                if action == "stop":
                    why = f"{what} reached: spent {usd(spent)} of {usd(limit)}"
                    return "stopping" if self._ask_to_stop(job, why) else None
                outcome = "warned"
        return outcome

    def _ask_to_stop(self, job: JobModel, why: str) -> bool:
        if not self.wiring.store.save_progress(job, {"budget_stop": why}, f"stopping at a checkpoint: {why}"):
            return False
        if JobState(job.state) not in HAS_NODES:  # no node to checkpoint: end it now
            end_stopped_job(self.wiring, job)
        return True

    def _end_if_unanswered(self, job: JobModel) -> str | None:
        if self.now - float(job.updated_at) < STOP_GRACE_SECONDS:
            return None
        return "ended" if end_stopped_job(self.wiring, job) else None


def end_stopped_job(wiring: Wiring, job: JobModel, detail: dict[str, Any] | None = None) -> bool:
    """CANCELLED with the budget's arithmetic as the reason, and the cluster torn down (the node has written
    back, or the grace is over). False when the job moved first."""
    reason = str(job.budget_stop)
    cluster_id = job.cluster_id or cluster_id_for(job.job_id, int(job.attempt))
    changes = {"reason": reason, "cost": cost_with(job, wiring.store.cluster(job.cluster_id))}
    if not wiring.store.move(job, JobState.CANCELLED, f"stopped: {reason}", changes=changes, detail=detail):
        return False
    send_teardown(wiring, job.job_id, int(job.attempt), cluster_id)
    return True
