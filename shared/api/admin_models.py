"""The bodies of the HTTPS API's /admin routes (an admin key only) and the team views members read."""

from __future__ import annotations

from pydantic import Field

from shared.api.cluster_models import ClusterView
from shared.api.deferred_model import DeferredModel
from shared.api.models import JobSummary


class CreateUserRequest(DeferredModel):
    name: str = Field(min_length=1, max_length=64, description="Who the user is (shown in listings).")
    admin: bool = Field(False, description="The new key may administer users, teams and grants.")


class NewUserResponse(DeferredModel):
    user_id: str
    name: str
    admin: bool
    api_key: str = Field(description="Shown once; only its hash is kept.")


class UserView(DeferredModel):
    user_id: str
    name: str
    admin: bool
    keys: int
    teams: list[str]


class UserList(DeferredModel):
    users: list[UserView]


class RevokeUserResponse(DeferredModel):
    user_id: str
    revoked_keys: int


class CreateTeamRequest(DeferredModel):
    team: str = Field(min_length=1, max_length=63)


class MemberRequest(DeferredModel):
    user_id: str = Field(min_length=1, max_length=64)
    team_admin: bool | None = Field(
        None,
        description="True: the member administers the team (sets its budget); False: no more; None: as is.",
    )


class TeamView(DeferredModel):
    team: str
    members: list[str]


class TeamList(DeferredModel):
    teams: list[TeamView]


class GrantRequest(DeferredModel):
    bucket: str = Field(min_length=3, max_length=63)
    user: str | None = Field(None, max_length=64, description="The user id granted (or give `team`).")
    team: str | None = Field(None, max_length=63, description="The team granted (or give `user`).")
    prefix: str = Field("", max_length=1024, description="Only this part of the bucket ('' all of it).")
    write: bool = Field(False, description="Tasks may write (MOUNT modes); otherwise read-only.")


class RevokeGrantRequest(DeferredModel):
    bucket: str = Field(min_length=3, max_length=63)
    user: str | None = Field(None, max_length=64)
    team: str | None = Field(None, max_length=63)
    prefix: str = Field("", max_length=1024)


class GrantView(DeferredModel):
    bucket: str
    grantee: str
    prefix: str
    write: bool
    granted_by: str | None = None


class OwnedBucketView(DeferredModel):
    bucket: str
    store: str
    owner: str
    created_by_job: str | None


class BucketList(DeferredModel):
    grants: list[GrantView]
    owned: list[OwnedBucketView] = Field(description="Buckets skyless created for a user (the registry).")


class AuditEntryView(DeferredModel):
    at: str
    actor: str
    action: str
    target: str
    detail: dict[str, object]


class AuditLog(DeferredModel):
    entries: list[AuditEntryView]


class MyTeams(DeferredModel):
    teams: list[TeamView]


class TeamJob(JobSummary):
    owner: str


class TeamJobList(DeferredModel):
    team: str
    jobs: list[TeamJob]


class TeamCluster(ClusterView):
    owner: str


class TeamClusterList(DeferredModel):
    team: str
    clusters: list[TeamCluster]


class ContractsRequest(DeferredModel):
    file: str = Field(max_length=256, description="The file's name, as errors and `show` name it.")
    text: str = Field(max_length=64 * 1024, description="The contracts file's YAML text.")


class ContractsView(DeferredModel):
    version: int = Field(description="Grows by one with each change; 0: never set.")
    file: str
    text: str = Field(description="The YAML (a non-admin: the deployment's part and their teams' parts).")
    teams: list[str] = Field(description="The teams whose part `text` holds.")
    set_by: str | None = Field(None, description="The admin who set this version (admins only).")
    set_at: float | None = None
