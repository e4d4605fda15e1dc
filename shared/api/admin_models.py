"""The bodies of the HTTPS API's /admin routes (an admin key only) and the team views members read."""

from __future__ import annotations

from pydantic import BaseModel, Field

from shared.api.cluster_models import ClusterView
from shared.api.models import JobSummary


class CreateUserRequest(BaseModel):
    name: str = Field(min_length=1, max_length=64, description="Who the user is (shown in listings).")
    admin: bool = Field(False, description="The new key may administer users, teams and grants.")


class NewUserResponse(BaseModel):
    user_id: str
    name: str
    admin: bool
    api_key: str = Field(description="Shown once; only its hash is kept.")


class UserView(BaseModel):
    user_id: str
    name: str
    admin: bool
    keys: int
    teams: list[str]


class UserList(BaseModel):
    users: list[UserView]


class RevokeUserResponse(BaseModel):
    user_id: str
    revoked_keys: int


class CreateTeamRequest(BaseModel):
    team: str = Field(min_length=1, max_length=63)


class MemberRequest(BaseModel):
    user_id: str = Field(min_length=1, max_length=64)
    team_admin: bool | None = Field(
        None,
        description="True: the member administers the team (sets its budget); False: no more; None: as is.",
    )


class TeamView(BaseModel):
    team: str
    members: list[str]


class TeamList(BaseModel):
    teams: list[TeamView]


class GrantRequest(BaseModel):
    bucket: str = Field(min_length=3, max_length=63)
    user: str | None = Field(None, max_length=64, description="The user id granted (or give `team`).")
    team: str | None = Field(None, max_length=63, description="The team granted (or give `user`).")
    prefix: str = Field("", max_length=1024, description="Only this part of the bucket ('' all of it).")
    write: bool = Field(False, description="Tasks may write (MOUNT modes); otherwise read-only.")


class RevokeGrantRequest(BaseModel):
    bucket: str = Field(min_length=3, max_length=63)
    user: str | None = Field(None, max_length=64)
    team: str | None = Field(None, max_length=63)
    prefix: str = Field("", max_length=1024)


class GrantView(BaseModel):
    bucket: str
    grantee: str
    prefix: str
    write: bool
    granted_by: str | None = None


class OwnedBucketView(BaseModel):
    bucket: str
    store: str
    owner: str
    created_by_job: str | None


class BucketList(BaseModel):
    grants: list[GrantView]
    owned: list[OwnedBucketView] = Field(description="Buckets skyless created for a user (the registry).")


class AuditEntryView(BaseModel):
    at: str
    actor: str
    action: str
    target: str
    detail: dict[str, object]


class AuditLog(BaseModel):
    entries: list[AuditEntryView]


class MyTeams(BaseModel):
    teams: list[TeamView]


class TeamJob(JobSummary):
    owner: str


class TeamJobList(BaseModel):
    team: str
    jobs: list[TeamJob]


class TeamCluster(ClusterView):
    owner: str


class TeamClusterList(BaseModel):
    team: str
    clusters: list[TeamCluster]


class ContractsRequest(BaseModel):
    file: str = Field(max_length=256, description="The file's name, as errors and `show` name it.")
    text: str = Field(max_length=64 * 1024, description="The contracts file's YAML text.")


class ContractsView(BaseModel):
    version: int = Field(description="Grows by one with each change; 0: never set.")
    file: str
    text: str = Field(description="The YAML (a non-admin: the deployment's part and their teams' parts).")
    teams: list[str] = Field(description="The teams whose part `text` holds.")
    set_by: str | None = Field(None, description="The admin who set this version (admins only).")
    set_at: float | None = None
