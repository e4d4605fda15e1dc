"""A typed client of the skyless HTTPS API; the CLI uses it, and so can any Python program.

from cli.api_client import SkylessClient
client = SkylessClient("https://…/api", api_key="sky_…")
job = client.submit_job(open("task.yaml").read(), filename="task.yaml")
print(client.get_job(job.job_id).state)
"""

from __future__ import annotations

import io
import tarfile
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

from cli.api_http import ApiError, ApiHttp, ApiUnreachableError, put_upload
from shared.errors import UserError

if TYPE_CHECKING:  # each loads with the call that answers it: printing a table needs none of them
    from cli.api_rows import ClusterRow, JobPage
    from shared.api.budget_models import BudgetResponse
    from shared.api.cluster_models import (
        ClusterDetail,
        ClusterJob,
        ClusterLaunchResponse,
        ClusterLogsResponse,
        ClusterView,
        SshAccess,
    )
    from shared.api.cost_models import CostReportResponse
    from shared.api.models import (
        JobDetail,
        JobList,
        JobSummary,
        LogsResponse,
        SubmitJobResponse,
        UploadResponse,
    )
    from shared.api.report_models import ProviderScorecardResponse
    from shared.api.storage_models import BucketView

__all__ = ["ApiError", "ApiUnreachableError", "SkylessClient"]

TERMINAL_STATES = frozenset({"SUCCEEDED", "FAILED", "FAILED_SETUP", "FAILED_NO_RESOURCE", "CANCELLED"})
SKIPPED_IN_WORKDIR = frozenset({".git", "__pycache__", ".venv", ".mypy_cache", ".pytest_cache"})


class SkylessClient:
    def __init__(
        self,
        base_url: str,
        api_key: str | None,
        *,
        timeout: float = 30.0,
    ) -> None:
        self.http = ApiHttp(base_url, api_key, timeout=timeout)
        self.base_url = self.http.base_url

    def close(self) -> None:
        pass  # each call opens and closes its own connection

    def __enter__(self) -> SkylessClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # jobs

    def submit_job(
        self,
        task: str,
        *,
        filename: str = "task.yaml",
        env: dict[str, str] | None = None,
        minimize: str = "cost",
        clouds: list[str] | None = None,
        workdir_key: str | None = None,
        file_mount_keys: dict[str, str] | None = None,
        notify: dict[str, str] | None = None,
        deadline: str | None = None,
        hours: float | None = None,
        secrets: dict[str, str] | None = None,
        max_cost: float | None = None,
        max_cost_action: str = "stop",
        data_gb: dict[str, float] | None = None,
    ) -> SubmitJobResponse:
        """`file_mount_keys`: for each file mount with a local source, remote path -> `upload_path` key.
        `notify`: `{"slack_webhook"?, "email"?}` for this job instead of the user's notification settings.
        `deadline` (`2026-12-01T09:00Z` or `36h`) with `hours` (the compute it needs): finish by then.
        `secrets`: values of the task's `secrets` (never stored in a table)."""
        body = _task_body(task, filename, env, minimize, clouds)
        if secrets:
            body["secrets"] = secrets
        if workdir_key:
            body["workdir_key"] = workdir_key
        if file_mount_keys:
            body["file_mount_keys"] = file_mount_keys
        if notify:
            body["notify"] = notify
        if deadline is not None:
            body["deadline"] = deadline
        if hours is not None:
            body["hours"] = hours
        if max_cost is not None:
            body["max_cost"] = max_cost
            body["max_cost_action"] = max_cost_action
        if data_gb:
            body["data_gb"] = data_gb
        from shared.api.models import SubmitJobResponse

        return SubmitJobResponse.model_validate(self._call("POST", "/jobs", json=body))

    def plan(
        self,
        task: str,
        *,
        filename: str = "task.yaml",
        env: dict[str, str] | None = None,
        minimize: str = "cost",
        clouds: list[str] | None = None,
        data_gb: dict[str, float] | None = None,
    ) -> dict[str, Any]:
        body = _task_body(task, filename, env, minimize, clouds)
        if data_gb:
            body["data_gb"] = data_gb
        return self._call("POST", "/plan", json=body)

    def list_jobs(
        self,
        *,
        state: str | None = None,
        since: str | None = None,
        name: str | None = None,
        limit: int | None = None,
    ) -> list[JobSummary]:
        """Newest first. `state`: comma-separated states; `since`: `2d`, `12h` or an ISO 8601 time;
        `name`: part of the job's name; `limit`: at most this many (the API's default is 200)."""
        return self.job_page(state=state, since=since, name=name, limit=limit).jobs

    def job_page(
        self,
        *,
        state: str | None = None,
        since: str | None = None,
        name: str | None = None,
        limit: int | None = None,
        cursor: str | None = None,
    ) -> JobList:
        """One page of `list_jobs`; its `cursor` (None on the last page) asks for the next."""
        from shared.api.models import JobList

        return JobList.model_validate(
            self.job_rows(state=state, since=since, name=name, limit=limit, cursor=cursor)
        )

    def job_rows(
        self,
        *,
        state: str | None = None,
        since: str | None = None,
        name: str | None = None,
        limit: int | None = None,
        cursor: str | None = None,
        all_users: bool = False,
    ) -> JobPage:
        """`job_page` as the API's JSON, for a table (no model built); `all_users`: every user's jobs, each
        with its owner (an admin key; any other is refused with 403)."""
        filters = {"state": state, "since": since, "name": name, "limit": limit, "cursor": cursor}
        if all_users:
            filters["all_users"] = "true"
        params = {key: value for key, value in filters.items() if value not in (None, "")}
        page: JobPage = self._call("GET", "/jobs", params=params)
        return page

    def cost_report(self, *, days: int = 7, by: str = "cloud", all_users: bool = False) -> CostReportResponse:
        """What jobs cost in the last `days` UTC days, per attempt and against on-demand; `all_users`
        needs an admin key."""
        params: dict[str, str | int] = {"days": days, "by": by}
        if all_users:
            params["all_users"] = "true"
        from shared.api.cost_models import CostReportResponse

        return CostReportResponse.model_validate(self._call("GET", "/costs", params=params))

    def budget(self, user_id: str | None = None, team: str | None = None) -> BudgetResponse:
        """A monthly budget (the caller's, with an admin key `user_id`'s, or a team's) and this month's
        spend."""
        params = {"team": team} if team else {"user_id": user_id} if user_id else None
        from shared.api.budget_models import BudgetResponse

        return BudgetResponse.model_validate(self._call("GET", "/budget", params=params))

    def set_budget(self, body: dict[str, Any]) -> BudgetResponse:
        """`{"monthly": USD, "action": "stop"|"warn", "user_id"? | "team"?}` (PUT /budget)."""
        from shared.api.budget_models import BudgetResponse

        return BudgetResponse.model_validate(self._call("PUT", "/budget", json=body))

    def provider_scorecard(self, *, days: int = 30, all_users: bool = False) -> ProviderScorecardResponse:
        """What each cloud, region and instance family delivered to jobs of the last `days` days."""
        params: dict[str, str | int] = {"days": days}
        if all_users:
            params["all_users"] = "true"
        answer = self._call("GET", "/reports/providers", params=params)
        from shared.api.report_models import ProviderScorecardResponse

        return ProviderScorecardResponse.model_validate(answer)

    def get_job(self, job_id: str) -> JobDetail:
        from shared.api.models import JobDetail

        return JobDetail.model_validate(self._call("GET", f"/jobs/{_segment(job_id)}"))

    def cancel_job(self, job_id: str) -> JobDetail:
        from shared.api.models import JobDetail

        return JobDetail.model_validate(self._call("POST", f"/jobs/{_segment(job_id)}/cancel"))

    def read_logs(self, job_id: str, *, rank: int = 0, after: str | None = None) -> LogsResponse:
        params: dict[str, str | int] = {"rank": rank}
        if after:
            params["after"] = after
        data = self._call("GET", f"/jobs/{_segment(job_id)}/logs", params=params)
        from shared.api.models import LogsResponse

        return LogsResponse.model_validate(data)

    # named clusters

    def launch_on_cluster(
        self,
        name: str,
        task: str,
        *,
        filename: str = "task.yaml",
        env: dict[str, str] | None = None,
        secrets: dict[str, str] | None = None,
        minimize: str = "cost",
        clouds: list[str] | None = None,
        workdir_key: str | None = None,
        file_mount_keys: dict[str, str] | None = None,
        fast: bool = False,
        idle_minutes: int | None = None,
        down: bool | None = None,
    ) -> ClusterLaunchResponse:
        """`launch -c NAME`: provision the cluster if new, reuse it if UP, start it if STOPPED; then
        queue the task on it."""
        body = _task_body(task, filename, env, minimize, clouds)
        body.update({"fast": fast, "file_mount_keys": file_mount_keys or {}})
        if secrets:
            body["secrets"] = secrets
        if workdir_key:
            body["workdir_key"] = workdir_key
        if idle_minutes is not None:
            body["idle_minutes"] = idle_minutes
        if down is not None:
            body["down"] = down
        answer = self._call("POST", f"/clusters/{_segment(name)}/launch", json=body)
        from shared.api.cluster_models import ClusterLaunchResponse

        return ClusterLaunchResponse.model_validate(answer)

    def exec_on_cluster(
        self,
        name: str,
        *,
        task: str | None = None,
        command: str | None = None,
        filename: str = "task.yaml",
        env: dict[str, str] | None = None,
        secrets: dict[str, str] | None = None,
        workdir_key: str | None = None,
        file_mount_keys: dict[str, str] | None = None,
    ) -> ClusterJob:
        """Queue a task file or a command on an UP cluster (no setup)."""
        body: dict[str, Any] = {"filename": filename, "env": env or {}}
        if secrets:
            body["secrets"] = secrets
        body["file_mount_keys"] = file_mount_keys or {}
        given = (("task", task), ("command", command), ("workdir_key", workdir_key))
        body.update({k: v for k, v in given if v})
        from shared.api.cluster_models import ClusterJob

        return ClusterJob.model_validate(self._call("POST", f"/clusters/{_segment(name)}/exec", json=body))

    def list_clusters(self) -> list[ClusterView]:
        from shared.api.cluster_models import ClusterList

        return ClusterList.model_validate({"clusters": self.cluster_rows()}).clusters

    def cluster_rows(self, *, all_users: bool = False) -> list[ClusterRow]:
        """`list_clusters` as the API's JSON, for a table (no model built); `all_users` as in `job_rows`."""
        params = {"all_users": "true"} if all_users else None
        rows: list[ClusterRow] = self._call("GET", "/clusters", params=params)["clusters"]
        return rows

    def get_cluster(self, name: str) -> ClusterDetail:
        from shared.api.cluster_models import ClusterDetail

        return ClusterDetail.model_validate(self._call("GET", f"/clusters/{_segment(name)}"))

    def cluster_queue(self, name: str) -> list[ClusterJob]:
        from shared.api.cluster_models import ClusterQueue

        return ClusterQueue.model_validate(self._call("GET", f"/clusters/{_segment(name)}/queue")).jobs

    def cluster_logs(
        self, name: str, job: int | str = "latest", *, rank: int = 0, after: str | None = None
    ) -> ClusterLogsResponse:
        params: dict[str, str | int] = {"rank": rank}
        if after:
            params["after"] = after
        path = f"/clusters/{_segment(name)}/jobs/{_segment(str(job))}/logs"
        from shared.api.cluster_models import ClusterLogsResponse

        return ClusterLogsResponse.model_validate(self._call("GET", path, params=params))

    def cancel_cluster_job(self, name: str, job: int | str) -> list[int]:
        """Cancel one job of the cluster ("all": every live job); answers the numbers cancelled."""
        path = f"/clusters/{_segment(name)}/jobs/{_segment(str(job))}/cancel"
        from shared.api.cluster_models import ClusterCancelResponse

        return ClusterCancelResponse.model_validate(self._call("POST", path)).cancelled

    def cluster_action(self, name: str, action: str) -> ClusterView:
        """`stop`, `start` or `down`."""
        from shared.api.cluster_models import ClusterView

        return ClusterView.model_validate(self._call("POST", f"/clusters/{_segment(name)}/{action}"))

    def set_autostop(self, name: str, idle_minutes: int, *, down: bool = False) -> ClusterView:
        body = {"idle_minutes": idle_minutes, "down": down}
        path = f"/clusters/{_segment(name)}/autostop"
        from shared.api.cluster_models import ClusterView

        return ClusterView.model_validate(self._call("POST", path, json=body))

    def ssh_access(
        self, name: str, *, public_key: str | None = None, caller_cidr: str | None = None
    ) -> SshAccess:
        body = {k: v for k, v in (("public_key", public_key), ("caller_cidr", caller_cidr)) if v}
        from shared.api.cluster_models import SshAccess

        return SshAccess.model_validate(self._call("POST", f"/clusters/{_segment(name)}/ssh", json=body))

    # buckets skyless made (`skyless storage ls | delete`)

    def list_storage(self) -> list[BucketView]:
        """The caller's buckets, as task files' `file_mounts` named them."""
        from shared.api.storage_models import BucketList

        return BucketList.model_validate(self._call("GET", "/storage")).buckets

    def delete_storage(self, name: str) -> BucketView:
        """Delete a bucket skyless created for one of the caller's jobs (refused for any other)."""
        from shared.api.storage_models import BucketView

        return BucketView.model_validate(self._call("DELETE", f"/storage/{_segment(name)}"))

    # workdir uploads

    def create_upload(
        self, *, filename: str = "workdir.tar.gz", size_bytes: int | None = None
    ) -> UploadResponse:
        body: dict[str, Any] = {"filename": filename}
        if size_bytes is not None:
            body["size_bytes"] = size_bytes
        from shared.api.models import UploadResponse

        return UploadResponse.model_validate(self._call("POST", "/uploads", json=body))

    def upload_workdir(self, workdir: Path) -> str:
        """Tar and gzip `workdir`, PUT it where the API says, and answer the key to submit with."""
        return self._put_upload(tar_workdir(workdir), "workdir.tar.gz", "workdir")

    def upload_path(self, source: Path, *, field: str = "file_mounts") -> str:
        """Tar and gzip a file or a folder (a file mount's source), upload it, answer its key."""
        return self._put_upload(tar_path(source, field=field), "mount.tar.gz", field)

    def _put_upload(self, payload: bytes, filename: str, field: str) -> str:
        upload = self.create_upload(filename=filename, size_bytes=len(payload))
        put_upload(upload.url, payload, upload.headers, field=field)
        return upload.key

    def openapi(self) -> dict[str, Any]:
        return self._call("GET", "/openapi.json")

    def _call(self, method: str, path: str, **kwargs: Any) -> Any:
        return self.http.call(method, path, **kwargs)


def tar_workdir(workdir: Path) -> bytes:
    if not workdir.is_dir():
        raise UserError(f"workdir {workdir} is not a directory", field="workdir")
    return tar_path(workdir, field="workdir")


def tar_path(source: Path, *, field: str) -> bytes:
    """A folder as `./…` members (VCS and cache folders left out); a file as its one member."""
    if not source.exists():
        raise UserError(f"{source} does not exist", field=field)

    def keep(info: tarfile.TarInfo) -> tarfile.TarInfo | None:
        return None if Path(info.name).name in SKIPPED_IN_WORKDIR else info

    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
        if source.is_dir():
            tar.add(source, arcname=".", filter=keep)
        else:
            tar.add(source, arcname=source.name)
    return buffer.getvalue()


def _task_body(
    task: str, filename: str, env: dict[str, str] | None, minimize: str, clouds: list[str] | None
) -> dict[str, Any]:
    body: dict[str, Any] = {"task": task, "filename": filename, "env": env or {}, "minimize": minimize}
    if clouds:
        body["clouds"] = clouds
    return body


def _segment(job_id: str) -> str:
    return quote(job_id, safe="")
