"""Budgets on jobs (shared/budgets/ holds the arithmetic and the records): refuse a launch over a monthly
budget (the owner's, or a team's the owner is a member of), and on each reconcile sweep, for each live job,
notify at 50/80/100 % of its cost cap, of its owner's monthly budget and of each of its owner's teams' (each
notice once: a claim in the budgets partition; a team's once per member with a live job, to that member's
channels), and at 100 % stop the job.

Stopping goes through the preemption-notice path: the job is marked (`budget_stop`, a conditional write),
each node's next report is answered with `preempt`, the agent passes the notice to the task (SIGTERM),
writes back its MOUNT_CACHED buckets and reports `preempting`; that report ends the job (CANCELLED, with
the arithmetic as its reason) instead of recovering it. A node that never reports again is caught by the
sweep: a job marked longer than `STOP_GRACE_SECONDS` ago is ended and its cluster torn down.

A team's spend is the sum of its members' (a member of two teams counts in both).

Reads per sweep, beyond the live jobs the sweep already read: per live job with a cap, its cluster; per
owner of a live job, the owner's budget record; one Query of the teams' budgets, and only when there is one,
per owner of a live job its teams (one Query) and per team with a budget its members (one Query); per owner
with a budget or in a team with one, the owner's jobs of this month (one Query on the owner index), once per
sweep.
"""

from __future__ import annotations

import time
from typing import Any

from shared.budgets.limits import THRESHOLDS, Spend, month_of, month_start, notice, refusal, usd
from shared.budgets.records import Budget, team_scope, user_scope
from shared.errors import UserError
from shared.jobs.costs import cluster_cost, cost_with
from shared.jobs.messages import cluster_id_for, send_teardown
from shared.states import HAS_NODES, JobState, is_terminal
from shared.store.models import JobModel
from shared.wiring import Wiring

STOP_GRACE_SECONDS = 180  # the longest a notice waits for the node's write-back before the sweep ends the job


def job_spend(wiring: Wiring, job: JobModel, now: float) -> float:
    """What the job has cost: its earlier attempts (recorded) plus its current cluster up to `now`."""
    if is_terminal(job.state):
        return float(job.cost or 0)
    cluster = wiring.store.cluster(job.cluster_id) if job.cluster_id else None
    return round(float(job.cost or 0) + cluster_cost(cluster, now), 6)


def month_spend(wiring: Wiring, owner: str, now: float) -> Spend:
    """The owner's spend this month: jobs submitted this month (ended, and live up to `now`)."""
    finished = live = 0.0
    for job in wiring.store.iter_jobs_of(owner, since=month_start(now)):
        if is_terminal(job.state):
            finished += float(job.cost or 0)
        else:
            live += job_spend(wiring, job, now)
    return Spend(round(finished, 6), round(live, 6))


def team_spend(wiring: Wiring, team: str, now: float, by_member: dict[str, Spend] | None = None) -> Spend:
    """The team's spend this month: its members' (`by_member` keeps each member's, read once)."""
    by_member = {} if by_member is None else by_member
    finished = live = 0.0
    for member in sorted(wiring.budgets.members_of(team)):
        if member not in by_member:
            by_member[member] = month_spend(wiring, member, now)
        finished += by_member[member].finished
        live += by_member[member].live
    return Spend(round(finished, 6), round(live, 6))


def team_budget_words(team: str, now: float) -> str:
    return f"monthly budget of team {team} for {month_of(now)}"


def check_launch_allowed(wiring: Wiring, owner: str, now: float | None = None) -> None:
    """Refuse (UserError naming the arithmetic) a launch by an owner whose monthly budget, or whose team's,
    is spent."""
    now = now or time.time()
    budget = wiring.budgets.get(user_scope(owner))
    if budget is not None and budget.monthly_limit > 0:
        spent = month_spend(wiring, owner, now)
        if spent.total >= budget.monthly_limit:
            what = f"monthly budget of {month_of(now)}"
            hint = "`skyless budget show` says it; `skyless budget set --monthly USD` raises it"
            raise UserError(refusal(what, spent, budget.monthly_limit), field="budget", hint=hint)
    team_budgets = wiring.budgets.team_budgets()
    if not team_budgets:
        return
    by_member: dict[str, Spend] = {}
    for team in sorted(wiring.budgets.teams_of(owner) & team_budgets.keys()):
        limit = team_budgets[team].monthly_limit
        spent = team_spend(wiring, team, now, by_member)
        if spent.total >= limit:
            hint = f"`skyless budget show --team {team}` says it; an admin raises it (`budget set --team`)"
            raise UserError(refusal(team_budget_words(team, now), spent, limit), field="budget", hint=hint)


class BudgetSweep:
    """One reconcile sweep's budget checks; owners' monthly spend is read once per sweep."""

    def __init__(self, wiring: Wiring, now: float) -> None:
        self.wiring, self.now = wiring, now
        self._budgets: dict[str, Budget | None] = {}
        self._spend: dict[str, Spend] = {}
        self._team_budgets: dict[str, Budget] | None = None
        self._teams_of: dict[str, set[str]] = {}
        self._team_spend: dict[str, Spend] = {}

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
                self._team_spend[team] = team_spend(self.wiring, team, self.now, self._spend)
            budget, month = self._team_budgets[team], month_of(self.now)
            limits.append((team_budget_words(team, self.now), f"{team_scope(team)}#{month}#{owner}",
                           budget.monthly_limit, budget.action, self._team_spend[team].total))  # fmt: skip
        return limits

    def check(self, job: JobModel) -> str | None:
        """Notify and stop as the job's limits say; answers "stopping", "ended", "warned" or None."""
        if job.group_tasks or is_terminal(job.state):
            return None
        if job.budget_stop:
            return self._end_if_unanswered(job)
        limits: list[tuple[str, str, float, str, float]] = []  # (what, notice scope, limit, action, spent)
        if job.max_cost:
            spent = job_spend(self.wiring, job, self.now)
            action = job.max_cost_action or "stop"
            limits.append(
                (f"cost cap of job {job.job_id}", f"job#{job.job_id}", float(job.max_cost), action, spent)
            )
        budget = self.budget_of(job.owner)
        if budget is not None and budget.monthly_limit > 0:
            if job.owner not in self._spend:
                self._spend[job.owner] = month_spend(self.wiring, job.owner, self.now)
            month = month_of(self.now)
            limits.append((f"monthly budget of {month}", f"{budget.scope}#{month}", budget.monthly_limit,
                           budget.action, self._spend[job.owner].total))  # fmt: skip
        limits.extend(self.team_limits(job.owner))
        outcome = None
        for what, scope, limit, action, spent in limits:
            percent = 100.0 * spent / limit
            for threshold in THRESHOLDS:
                if percent >= threshold and self.wiring.budgets.claim_notice(f"notice#{scope}#{threshold}"):
                    text = notice(what, threshold, spent, limit, action)
                    detail = {"percent": threshold, "spent": spent, "limit": limit, "action": action}
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
