"""What a team's members see of each other: the team's jobs and clusters, read-only. A caller who is not a
member is answered as if the team did not exist; nothing here changes a job or a cluster (cancel, stop, down
and the rest stay their owner's, through the owner-only routes)."""

from __future__ import annotations

from typing import Any

from shared.config import Settings
from shared.errors import NotFoundError
from shared.store import tenancy


def _members(settings: Settings, team: str, caller: str) -> list[str]:
    members = tenancy.members_of(settings, team) if tenancy.TEAM_NAME.match(team) else set()
    if caller not in members:
        raise NotFoundError(f"no team {team}", field="team", hint="`skyless team list` shows your teams")
    return sorted(members)


def is_team_admin(settings: Settings, team: str, user_id: str) -> bool:
    """`user_id` is a member of `team` made its admin (`skyless admin teams add --team-admin`)."""
    return bool(tenancy.TEAM_NAME.match(team)) and tenancy.is_team_admin(settings, team, user_id)


def my_teams(settings: Settings, caller: str) -> dict[str, list[str]]:
    """The caller's teams and their members."""
    return {
        team: sorted(tenancy.members_of(settings, team))
        for team in sorted(tenancy.teams_of(settings, caller))
    }


def team_jobs(settings: Settings, team: str, caller: str, where: Any = None) -> list[tuple[str, Any]]:
    """(owner, job view) of every member's jobs matching `where`, newest first (a query per member)."""
    from shared.jobs.job_listing import list_jobs
    from shared.wiring import wiring_for

    wiring = wiring_for(settings)
    found = [
        (member, job)
        for member in _members(settings, team, caller)
        for job in list_jobs(wiring, owner=member, where=where)
    ]
    return sorted(found, key=lambda pair: pair[1].created_at or "", reverse=True)


def team_job(settings: Settings, team: str, caller: str, job_id: str) -> Any:
    """One member's job in full; NotFoundError when it is no member's."""
    from shared.jobs.views import get_job
    from shared.wiring import wiring_for

    members = _members(settings, team, caller)
    wiring = wiring_for(settings)
    job = wiring.store.get(job_id)
    if job is None or job.owner not in members:
        raise NotFoundError(f"no job {job_id}", field="job_id")
    return get_job(wiring, job_id, owner=job.owner)


def team_clusters(settings: Settings, team: str, caller: str) -> list[tuple[str, dict[str, Any]]]:
    from shared.clusters.views import list_clusters

    return [
        (member, cluster)
        for member in _members(settings, team, caller)
        for cluster in list_clusters(settings, owner=member)
    ]
