"""`skyless launch | queue | status | logs | cancel`: jobs, through the HTTPS API. With a cluster name (and
`launch -c NAME`) they act on a named cluster instead (cli/cluster_commands.py).

Exit codes: 0 success (launch: the job SUCCEEDED), 1 the job ended otherwise, 2 an error (the
request, the task file or the API), 130 interrupted (the job keeps running).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.table import Table

from cli import cluster_commands, sky_flags
from cli.client_config import ApiKey, ApiUrl
from cli.client_session import client_session
from cli.clock_format import age as _age
from cli.clock_format import clock as _clock
from cli.clock_format import when as _when
from cli.console import stderr_console, stdout_console
from cli.job_group_views import follow_group_logs, print_group_tasks
from cli.launch_prep import PreparedLaunch, local_file_mounts, local_workdirs, prepare_launch
from cli.log_streams import LogStreams, print_job_log, write_log
from cli.money_format import dollars
from shared.errors import UserError
from shared.states import LIVE

if TYPE_CHECKING:  # the API client and its models load when a verb calls the API, not with the command
    from cli.api_client import SkylessClient
    from cli.api_rows import JobRow
    from shared.api.models import JobDetail, JobSummary, TimelineEvent

__all__ = ["PreparedLaunch", "local_file_mounts", "local_workdirs", "prepare_launch"]  # their old home

_client = client_session  # notify, ssh and cost commands open their session through this name

console = stdout_console()
errors = stderr_console()

STATE_STYLE = {
    "SUCCEEDED": "green",
    "FAILED": "red",
    "FAILED_SETUP": "red",
    "FAILED_NO_RESOURCE": "red",
    "CANCELLED": "yellow",
    "RUNNING": "cyan",
    "RECOVERING": "magenta",
    "WAITING": "yellow",
}

JobId = Annotated[str, typer.Argument(help="The job id (from `skyless launch` or `skyless queue`).")]


def register(app: typer.Typer) -> None:
    """Add this area's verbs to the `skyless` command."""
    app.command("queue")(queue)
    app.command("status")(status)
    app.command("logs")(logs)
    app.command("cancel")(cancel)


def queue(
    clusters: Annotated[
        list[str] | None,
        typer.Argument(metavar="[CLUSTER]...", help="Clusters: their job queues (none: your managed jobs)."),
    ] = None,
    skip_finished: sky_flags.SkipFinished = False,
    all_jobs: Annotated[
        bool, typer.Option("--all", "-a", help="Finished jobs too (the default; -s leaves them out).")
    ] = False,
    all_users: sky_flags.AllUsers = False,
    state: Annotated[
        list[str] | None,
        typer.Option("--state", help="Only jobs in this state (repeatable, or comma-separated)."),
    ] = None,
    since: Annotated[
        str | None, typer.Option("--since", help="Only jobs submitted since: 2d, 12h, or an ISO 8601 time.")
    ] = None,
    name: Annotated[str | None, typer.Option("--name", help="Only jobs whose name contains this.")] = None,
    limit: Annotated[int, typer.Option("--limit", min=1, max=1000, help="At most this many jobs.")] = 50,
    as_json: Annotated[bool, typer.Option("--json", help="Print the jobs as JSON.")] = False,
    cursor: Annotated[
        str | None, typer.Option("--cursor", help="The page after the one that printed this cursor.")
    ] = None,
    api_url: ApiUrl = None,
    api_key: ApiKey = None,
) -> None:
    """Your jobs, newest first: where they run, what they cost, how they were submitted; with cluster
    names, each cluster's job queue (SkyPilot's `sky queue`)."""
    if skip_finished and all_jobs:
        errors.print("[red]error:[/red] --skip-finished: not with --all (one leaves finished jobs out)")
        raise typer.Exit(2)
    if all_users and clusters:
        sky_flags.note("--all-users: a cluster's queue is its owner's: showing your clusters' queues")
    with _client(api_url, api_key) as client:
        if clusters:
            for cluster in clusters:
                cluster_commands.print_queue(client, cluster, as_json=as_json, skip_finished=skip_finished)
            return
        states = (
            ",".join(state) if state else (",".join(sorted(s.value for s in LIVE)) if skip_finished else None)
        )
        page, everyone = sky_flags.every_user_or_own(
            all_users,
            lambda every: client.job_rows(
                state=states, since=since, name=name, limit=limit, cursor=cursor, all_users=every
            ),
        )
    if as_json:
        typer.echo(json.dumps(page["jobs"], indent=2))
        return
    _print_jobs(page["jobs"], with_owner=everyone)
    if page["cursor"] and everyone:  # it may stop after a month of days with no job: older ones may follow
        typer.echo(f"Older jobs: skyless queue -u --cursor '{page['cursor']}' (with the same filters)")
    elif page["cursor"]:
        typer.echo(f"More jobs: skyless queue --cursor '{page['cursor']}' (with the same filters)")


def _print_jobs(jobs: list[JobRow], *, with_owner: bool = False) -> None:
    table = Table(title=f"{len(jobs)} job(s)" + (" of every user" if with_owner else ""))
    columns = (
        *(("USER",) if with_owner else ()),
        "ID",
        "JOB",
        "NAME",
        "STATE",
        "CLOUD/REGION",
        "INSTANCE",
        "SPOT",
        "RECOVERIES",
        "COST",
        "SOURCE",
        "AGE",
    )
    for column in columns:
        table.add_column(
            column,
            no_wrap=column in ("ID", "JOB", "STATE"),
            justify="right" if column in ("ID", "COST") else "left",
        )
    for job in jobs:
        table.add_row(
            *((_escape(job["owner"] or "-"),) if with_owner else ()),
            "-" if job.get("job_number") is None else str(job["job_number"]),
            job["job_id"],
            _escape(job["name"] or "-"),
            _state(job["state"]),
            "/".join(p for p in (job["cloud"], job["region"]) if p) or "-",
            job["instance_type"] or "-",
            _yes_no(job["use_spot"]),
            str(job["recoveries"]),
            dollars(job["cost"]),
            _escape(_source(job)),
            _age(job["created_at"]),
        )
    console.print(table)


def _source(job: JobRow) -> str:
    if job["source"] is None:
        return "-"
    return f"{job['source']} {job['source_ref']}" if job["source_ref"] else job["source"]


def status(
    names: Annotated[
        list[str] | None,
        typer.Argument(metavar="[JOB_ID | CLUSTER]...", help="Job ids or cluster names (none: everything)."),
    ] = None,
    as_json: Annotated[
        bool, typer.Option("--json", help="Print it as JSON (a job: plan, cluster, timeline).")
    ] = False,
    ip: Annotated[bool, typer.Option("--ip", help="The head node's IP address of one cluster.")] = False,
    endpoints: Annotated[
        bool, typer.Option("--endpoints", help="Every open port of one cluster as host:port.")
    ] = False,
    endpoint: Annotated[
        int | None, typer.Option("--endpoint", help="This port of one cluster as host:port.")
    ] = None,
    show_all: Annotated[
        bool,
        typer.Option("--all", "-a", help="Everything in full (as -v).", rich_help_panel=sky_flags.SKY_PANEL),
    ] = False,
    verbose: sky_flags.Verbose = False,
    refresh: sky_flags.Refresh = False,
    all_users: sky_flags.AllUsers = False,
    show_managed_jobs: Annotated[
        bool,
        typer.Option(
            "--show-managed-jobs/--no-show-managed-jobs",
            help="Also list your managed jobs.",
            rich_help_panel=sky_flags.SKY_PANEL,
        ),
    ] = True,
    api_url: ApiUrl = None,
    api_key: ApiKey = None,
) -> None:
    """Your clusters and jobs; or one job (place, plan, timeline), or one cluster (nodes, timeline)."""
    del show_all, verbose  # skyless's tables already show every column
    if refresh:
        sky_flags.note(sky_flags.REFRESH_NOTE)
    names = names or []
    if all_users and names:
        sky_flags.note("--all-users: a named job or cluster is shown only to its owner")
    if ip or endpoints or endpoint is not None:
        if sum((ip, endpoints, endpoint is not None)) > 1:
            errors.print("[red]error:[/red] give one of --ip, --endpoint PORT and --endpoints (as in sky)")
            raise typer.Exit(2)
        if len(names) != 1 or cluster_commands.is_job_id(names[0]):
            errors.print("[red]error:[/red] --ip/--endpoint(s): name exactly one cluster")
            raise typer.Exit(2)
        with _client(api_url, api_key) as client:
            code = cluster_commands.print_address(client, names[0], ip=ip, port=endpoint, endpoints=endpoints)
        raise typer.Exit(code)
    with _client(api_url, api_key) as client:
        if not names:
            clusters, everyone = sky_flags.every_user_or_own(
                all_users, lambda every: client.cluster_rows(all_users=every)
            )
            jobs = client.job_rows(all_users=everyone)["jobs"] if show_managed_jobs else []
            if as_json:
                typer.echo(json.dumps({"clusters": clusters, "jobs": jobs}, indent=2))
                return
            cluster_commands.print_clusters(clusters, with_owner=everyone)
            if show_managed_jobs:
                _print_jobs(jobs, with_owner=everyone)
            return
        for name in names:
            if not cluster_commands.is_job_id(name):
                cluster_commands.print_cluster(client, name, as_json=as_json)
                continue
            _print_job(client.get_job(name), as_json=as_json)


def _print_job(job: JobDetail, *, as_json: bool) -> None:
    if as_json:
        typer.echo(json.dumps(job.model_dump(mode="json"), indent=2))
        return
    number = "" if job.job_number is None else f" (ID {job.job_number})"
    console.print(f"[bold]{job.job_id}[/bold]{number} {_escape(job.name or '')}  {_state(job.state)}")
    where = f"  where: {_place(job)}  instance: {job.instance_type or '-'}"
    console.print(f"{where}  spot: {_yes_no(job.use_spot)}")
    console.print(
        f"  attempt: {job.attempt}  recoveries: {job.recoveries}  cost so far: ${job.cost:.4f}"
        f"  submitted: {_when(job.created_at)}"
    )
    if job.reason:
        console.print(f"  reason: {_escape(job.reason)}")
    if job.max_cost is not None:
        console.print(f"  cost cap: ${job.max_cost:.2f} ({100 * job.cost / job.max_cost:.0f} % used)")
    if job.budget_stop and not job.reason:
        console.print(f"  stopping: {_escape(job.budget_stop)}")
    if job.deadline is not None:
        d = job.deadline
        progress = (
            f"work done: {d.work_done_hours:.2f} h, past its {d.hours:g} h estimate (the rest is unknown)"
            if d.past_estimate
            else f"work done: {d.work_done_hours:.2f} of {d.hours:g} h  slack: {d.slack_hours:.2f} h"
        )
        console.print(f"  deadline: {d.deadline}  {progress}  market: {(d.market or '-').replace('_', '-')}")
        if d.why:
            console.print(f"  why: {_escape(d.why)}")
    _print_places(job)
    print_group_tasks(console, job)
    for note in job_notes(job):
        console.print(f"  [yellow]note:[/yellow] {_escape(note)}", soft_wrap=True)
    timeline = Table(title="timeline", show_edge=False)
    for column in ("TIME", "EVENT", "STATE", "MESSAGE"):
        timeline.add_column(column)
    for event in job.timeline:
        timeline.add_row(
            _clock(event.time), event.kind, _state(event.state) if event.state else "", event.message
        )
    console.print(timeline)


def job_notes(job: JobDetail) -> list[str]:
    """What the submission said about the task (fields read but not acted on), from its first event."""
    notes = next((e.detail.get("notes") for e in job.timeline if e.detail.get("notes")), None)
    return [str(note) for note in notes or []]


def logs(
    job_id: Annotated[
        str, typer.Argument(help="A job id, or a cluster name (then JOB: its job, default the last).")
    ],
    cluster_job: Annotated[
        str | None, typer.Argument(metavar="[JOB]", help="With a cluster: the job number.")
    ] = None,
    rank: Annotated[
        int | None, typer.Option("--rank", min=0, help="Only this node's log (default: every node's).")
    ] = None,
    follow: Annotated[
        bool,
        typer.Option(
            "--follow/--no-follow",
            "-f",
            help="Follow the log until the job ends (as SkyPilot, the default); --no-follow prints the "
            "log so far, all of it, and exits.",
        ),
    ] = True,
    tail: Annotated[
        int,
        typer.Option(
            "--tail", min=0, help="Start with the last N lines of the log so far (0, the default: all)."
        ),
    ] = 0,
    api_url: ApiUrl = None,
    api_key: ApiKey = None,
) -> None:
    """A job's log: every node's, lines prefixed `(head, rank=0)`, `(worker1, rank=1)`, … (or --rank N)."""
    if not cluster_commands.is_job_id(job_id):
        if tail:
            errors.print("[red]error:[/red] --tail is for a managed job's log, not a cluster's job")
            raise typer.Exit(2)
        with _client(api_url, api_key) as client:
            code = cluster_commands.print_logs(client, job_id, cluster_job, follow)
        raise typer.Exit(code)
    with _client(api_url, api_key) as client:
        numbered = not job_id.startswith("job-")  # a job number (`3`): read once for the id it names
        group = client.get_job(job_id) if rank is None or numbered else None
        if group is not None:
            job_id = group.job_id
        if group is not None and group.group:  # a job group: every task's log, `[task]` before each line
            if tail:
                errors.print("[red]error:[/red] --tail is for one task's log; give the task's job id")
                raise typer.Exit(2)
            return follow_group_logs(client, group, console, follow=follow)
        print_job_log(client, job_id, rank=rank, follow=follow, tail=tail)


def cancel(
    job_ids: Annotated[
        list[str] | None,
        typer.Argument(
            metavar="[JOB_ID]... | CLUSTER [JOB]...",
            help="Job ids (from `skyless queue`), or a cluster name followed by its job numbers.",
            show_default=False,
        ),
    ] = None,
    all_jobs: Annotated[
        bool,
        typer.Option("--all", "-a", help="Every job of yours that has not ended (with a cluster: its jobs)."),
    ] = False,
    all_users: Annotated[
        bool,
        typer.Option(
            "--all-users",
            "-u",
            help="With a cluster: every job on it (all of a cluster's jobs are its owner's).",
        ),
    ] = False,
    yes: sky_flags.Yes = False,
    async_call: sky_flags.Async = False,
    api_url: ApiUrl = None,
    api_key: ApiKey = None,
) -> None:
    """Cancel jobs; their nodes are torn down. Cancelling a cancelled job again is harmless. With a cluster
    name first: jobs of that cluster (`skyless cancel NAME 3`, `skyless cancel NAME --all`; the cluster
    alone: its latest job that has not ended, as `sky cancel NAME`)."""
    del yes, async_call  # skyless never asks, and a cancel is accepted at once
    if job_ids and not cluster_commands.is_job_id(job_ids[0]):
        cluster, numbers = job_ids[0], job_ids[1:]
        if any(not n.isdigit() for n in numbers):
            errors.print(
                "[red]error:[/red] give the cluster's job numbers (from `skyless queue NAME`), or --all"
            )
            raise typer.Exit(2)
        with _client(api_url, api_key) as client:
            return cluster_commands.cancel_on_cluster(client, cluster, numbers, all_jobs or all_users)
    if all_users:
        errors.print("[red]error:[/red] --all-users: for a cluster's jobs; managed jobs are only ever yours")
        raise typer.Exit(2)
    if not job_ids and not all_jobs:
        errors.print("[red]error:[/red] name the jobs to cancel, or --all")
        raise typer.Exit(2)
    if job_ids and all_jobs:
        errors.print("[red]error:[/red] give job ids or --all, not both")
        raise typer.Exit(2)
    failed = False
    with _client(api_url, api_key) as client:
        from cli.api_client import TERMINAL_STATES

        targets = job_ids or [j.job_id for j in client.list_jobs() if j.state not in TERMINAL_STATES]
        if not targets:
            console.print("No job to cancel.")
        for job_id in targets:
            try:
                job = client.cancel_job(job_id)
            except UserError as exc:  # one job's refusal (finished, unknown) does not stop the others
                errors.print(f"[red]error:[/red] {_escape(job_id)}: {_escape(str(exc))}")
                failed = True
                continue
            console.print(f"Job [bold]{job.job_id}[/bold]: {_state(job.state)}")
    if failed:
        raise typer.Exit(2)


def follow_job(
    client: SkylessClient,
    job_id: str,
    *,
    poll_seconds: float = 1.0,
    sleep: Callable[[float], None] = time.sleep,
) -> str:
    """Print each new timeline event and every node's log as they come; answer the terminal state."""
    from cli.api_client import TERMINAL_STATES

    seen: set[tuple[str, str, str]] = set()
    streams = LogStreams(client, job_id)
    state = ""
    with console.status("waiting for the job…") as spinner:
        while True:
            job = client.get_job(job_id)
            for event in job.timeline:
                identity = (event.time, event.kind, event.message or "")
                if identity not in seen:
                    seen.add(identity)
                    console.print(_event_line(event, job), soft_wrap=True)  # a long message stays one line
            state = job.state
            spinner.update(f"{state}…")
            text = streams.read(job)
            _print_log(text)
            if state in TERMINAL_STATES and (streams.finished or not text):
                _print_log(streams.flush())
                break
            if not text:
                sleep(poll_seconds)
    reason = f": {_escape(job.reason)}" if job.reason else ""
    console.print(f"Job [bold]{job_id}[/bold] {_state(state)}{reason}", soft_wrap=True)
    return state


PLACED_STATES = frozenset({"SETTING_UP", "RUNNING", "SUCCEEDED", "FAILED", "FAILED_SETUP", "RECOVERING"})


def _event_line(event: TimelineEvent, job: JobDetail) -> str:
    """`12:00:01 RUNNING  every node is running  aws/us-east-1 m5.large (spot)`; other events by kind."""
    clock = f"[dim]{_clock(event.time)}[/dim] "
    message = event.message or ""
    if event.kind != "state" or not event.state:
        return clock + f"  {_escape(event.kind)}: {_escape(message)}"
    detail: dict[str, Any] = event.detail or {}
    where = "/".join(str(detail[k]) for k in ("cloud", "region", "zone") if detail.get(k))
    instance = str(detail.get("instance_type") or "")
    spot = bool(detail.get("use_spot"))
    if not where and event.state in PLACED_STATES and job.cloud:
        where, instance, spot = _place(job), job.instance_type or "", bool(job.use_spot)
    text = clock + _state(event.state) + (f"  {_escape(message)}" if message else "")
    if where and where not in message:
        text += f"  [blue]{_escape(where)}[/blue] {_escape(instance)}" + (" (spot)" if spot else "")
    return text


def _print_places(job: JobDetail) -> None:
    """Where this attempt failed (and why), and the spot places its plan avoids after preemptions."""
    for place in job.tried:
        family = f" ({place.instance_family} family)" if place.instance_family else ""
        console.print(f"  tried: {_escape(place.place)}{family}: {_escape(place.reason)}", soft_wrap=True)
    for cooling in job.cooling:
        until = _clock(cooling.until)
        refused = f", {cooling.refusals} refused launch(es)" if cooling.refusals else ""
        console.print(
            f"  cooling: {cooling.scope} {_escape(cooling.place)} after {cooling.preemptions} spot "
            f"preemption(s){refused}, until {until}: spot there is tried last",
            soft_wrap=True,
        )
    for line in job.spot_probes:
        console.print(f"  {_escape(line)}", soft_wrap=True)
    notes = (job.plan or {}).get("notes") or []
    for note in notes:
        console.print(f"  plan: {_escape(str(note))}", soft_wrap=True)


def _print_log(text: str) -> None:
    """Log text as it is (see write_log): a line split across reads is printed as one (LogStreams.flush)."""
    write_log(text)


def _state(state: str) -> str:
    style = STATE_STYLE.get(state)
    return f"[{style}]{state}[/{style}]" if style else state


def _place(job: JobSummary) -> str:
    return "/".join(p for p in (job.cloud, job.region) if p) or "-"


def _yes_no(value: bool | None) -> str:
    return {True: "yes", False: "no", None: "-"}[value]


def _escape(text: str) -> str:
    from rich.markup import escape

    return escape(text)
