"""`skyless launch | queue | status | logs | cancel`: jobs, through the HTTPS API. With a cluster name (and
`launch -c NAME`) they act on a named cluster instead (cli/cluster_commands.py).

Exit codes: 0 success (launch: the job SUCCEEDED), 1 the job ended otherwise, 2 an error (the
request, the task file or the API), 130 interrupted (the job keeps running).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.table import Table

from cli import cluster_commands, task_options
from cli.api_client import TERMINAL_STATES, SkylessClient
from cli.client_config import ApiKey, ApiUrl, resolve_api
from cli.console import stderr_console, stdout_console
from cli.job_group_views import follow_group_logs, print_group_tasks
from cli.log_streams import LogStreams
from cli.money_format import dollars
from shared.api.models import JobDetail, JobSummary, TimelineEvent
from shared.errors import UserError
from shared.task import read_task_file

console = stdout_console()
errors = stderr_console()

STATE_STYLE = {
    "SUCCEEDED": "green",
    "FAILED": "red",
    "CANCELLED": "yellow",
    "RUNNING": "cyan",
    "RECOVERING": "magenta",
    "WAITING": "yellow",
}

JobId = Annotated[str, typer.Argument(help="The job id (from `skyless launch` or `skyless queue`).")]


def register(app: typer.Typer) -> None:
    """Add this area's verbs to the `skyless` command."""
    app.command("launch")(launch)
    app.command("queue")(queue)
    app.command("status")(status)
    app.command("logs")(logs)
    app.command("cancel")(cancel)


@contextmanager
def _client(api_url: str | None, api_key: str | None) -> Iterator[SkylessClient]:
    """A client of the configured API; any UserError in the block is printed and exits 2."""
    try:
        target = resolve_api(api_url, api_key)
        with SkylessClient(target.url, target.api_key) as client:
            yield client
    except UserError as exc:
        errors.print(f"[red]error:[/red] {_escape(str(exc))}")
        raise typer.Exit(2) from None
    except KeyboardInterrupt:
        errors.print("interrupted")
        raise typer.Exit(130) from None


def launch(
    file: Annotated[Path, typer.Argument(help="The task file (SkyPilot YAML).")],
    env: task_options.Env = None,
    env_file: task_options.EnvFile = None,
    secret: task_options.Secret = None,
    gpus: task_options.Gpus = None,
    cpus: task_options.Cpus = None,
    memory: task_options.Memory = None,
    instance_type: task_options.InstanceType = None,
    num_nodes: task_options.NumNodes = None,
    use_spot: task_options.UseSpot = None,
    infra: task_options.Infra = None,
    cloud: task_options.Cloud = None,
    region: task_options.Region = None,
    zone: task_options.Zone = None,
    detach: Annotated[bool, typer.Option("--detach", "-d", help="Submit and return.")] = False,
    minimize: Annotated[str, typer.Option("--minimize", help="cost or time.")] = "cost",
    clouds: Annotated[
        str | None, typer.Option("--clouds", help="Only these clouds, comma-separated.")
    ] = None,
    notify_slack: Annotated[
        str | None, typer.Option("--notify-slack", help="Notify this Slack webhook about this job.")
    ] = None,
    notify_email: Annotated[
        str | None, typer.Option("--notify-email", help="Notify this address about this job.")
    ] = None,
    deadline: Annotated[
        str | None,
        typer.Option("--deadline", help="Finish by then for the least money: 2026-12-01T09:00Z or 36h."),
    ] = None,
    hours: Annotated[
        float | None, typer.Option("--hours", help="With --deadline: the compute the job needs, in hours.")
    ] = None,
    cluster: Annotated[
        str | None, typer.Option("--cluster", "-c", help="Run it on this named cluster (made if new).")
    ] = None,
    fast: Annotated[bool, typer.Option("--fast", help="With -c: skip setup on an existing cluster.")] = False,
    idle_minutes: Annotated[
        int | None, typer.Option("--idle-minutes-to-autostop", "-i", min=0, help="With -c: autostop.")
    ] = None,
    down: Annotated[bool, typer.Option("--down", help="With -c: autostop tears the cluster down.")] = False,
    api_url: ApiUrl = None,
    api_key: ApiKey = None,
) -> None:
    """Submit a task file as a managed job, then follow its states and logs until it ends (with -c: on a
    named cluster).

    With --deadline and --hours, skyless chooses spot or on-demand, and where, as the job goes (a skyless
    feature: SkyPilot has no deadline); `skyless plan FILE --deadline ... --hours ...` estimates the cost."""
    if minimize not in ("cost", "time"):
        errors.print(f"[red]error:[/red] --minimize: must be cost or time, not {_escape(minimize)}")
        raise typer.Exit(2)
    given = cluster_commands.no_cluster_options(**{"--fast": fast, "-i": idle_minutes, "--down": down})
    if cluster is None and given:
        errors.print(f"[red]error:[/red] {', '.join(given)} need a cluster: add -c NAME")
        raise typer.Exit(2)
    job_only = {"--deadline": deadline, "--hours": hours}
    managed = cluster_commands.no_cluster_options(
        **job_only, **{"--notify-slack": notify_slack, "--notify-email": notify_email}
    )
    if cluster is not None and managed:
        errors.print(f"[red]error:[/red] {', '.join(managed)}: for managed jobs, not with -c NAME")
        raise typer.Exit(2)
    try:  # everything the file and the options can get wrong, before any upload or network call
        text = read_task_file(file)
        envs = task_options.env_values(env, env_file)
        secrets = task_options.pairs(secret, "--secret")
        overrides = task_options.resource_overrides(
            gpus=gpus, cpus=cpus, memory=memory, instance_type=instance_type, num_nodes=num_nodes,
            use_spot=use_spot, infra=infra, cloud=cloud, region=region, zone=zone,
        )  # fmt: skip
        prepared = prepare_launch(text, str(file), envs, secrets, overrides)
    except UserError as exc:
        errors.print(f"[red]error:[/red] {_escape(str(exc))}")
        raise typer.Exit(2) from None
    for note in prepared.notes if cluster is None else ():  # a cluster's launch answer says its own
        console.print(f"[yellow]note:[/yellow] {_escape(note)}", soft_wrap=True)
    cloud_list = [c.strip() for c in clouds.split(",") if c.strip()] if clouds else None
    with _client(api_url, api_key) as client:
        workdir_key = None
        if prepared.workdirs:
            console.print(f"Uploading workdir {prepared.workdirs[0]} …")
            workdir_key = client.upload_workdir(prepared.workdirs[0])
        mount_keys: dict[str, str] = {}
        for remote, source in prepared.mounts.items():
            console.print(f"Uploading file mount {source} -> {remote} …")
            mount_keys[remote] = client.upload_path(source, field=f"file_mounts.{remote}")
        if cluster is not None:
            code = cluster_commands.launch_on_cluster(
                client, cluster, file, prepared.text, env=envs, secrets=secrets, minimize=minimize,
                clouds=cloud_list, workdir_key=workdir_key, mount_keys=mount_keys, fast=fast,
                idle_minutes=idle_minutes, down=down or None, detach=detach,
            )  # fmt: skip
            raise typer.Exit(code)
        notify = {k: v for k, v in (("slack_webhook", notify_slack), ("email", notify_email)) if v}
        job = client.submit_job(
            prepared.text,
            filename=str(file),
            env=envs,
            secrets=secrets or None,
            minimize=minimize,
            clouds=cloud_list,
            workdir_key=workdir_key,
            file_mount_keys=mount_keys,
            notify=notify or None,
            deadline=deadline,
            hours=hours,
        )
        console.print(f"Job [bold]{job.job_id}[/bold] submitted ({job.state}).")
        if deadline is not None:
            console.print(
                "Deadline job (skyless only; SkyPilot has none): spot while the deadline is safe, "
                "on-demand when it must."
            )
        if detach:
            console.print(f"Follow it with: skyless logs {job.job_id} --follow")
            return
        try:
            final = follow_job(client, job.job_id)
        except KeyboardInterrupt:
            errors.print(
                f"Stopped following; the job keeps running. Cancel it with: skyless cancel {job.job_id}"
            )
            raise typer.Exit(130) from None
    raise typer.Exit(0 if final == "SUCCEEDED" else 1)


@dataclass(frozen=True)
class PreparedLaunch:
    text: str  # what is submitted: the file, with the command line's resource overrides applied
    workdirs: list[Path]  # local workdirs to upload
    mounts: dict[str, Path]  # {remote path: local file or folder} to upload
    notes: list[str]  # said once, before submitting: fields not acted on, overrides ignored


def prepare_launch(
    text: str, filename: str, envs: dict[str, str], secrets: dict[str, str], overrides: Any
) -> PreparedLaunch:
    """Validate the task here (a precise error before any upload or network call) as the API will:
    null secrets must have values; answer what to upload and what to submit."""
    from shared.task import apply_overrides, container_notes, load_pipeline, pipeline_notes

    load_pipeline(text, filename=filename, env_overrides=envs, secret_overrides=secrets)
    applied = apply_overrides(text, overrides)
    pipeline = load_pipeline(applied.text, filename=filename, env_overrides=envs, secret_overrides=secrets)
    notes = pipeline_notes(pipeline) + container_notes(pipeline)
    if applied.ignored:
        notes.append("resource overrides ignored: the file holds several tasks (sky launch ignores them too)")
    return PreparedLaunch(
        applied.text, local_workdirs(pipeline, filename), local_file_mounts(pipeline, filename), notes
    )


def queue(
    cluster: Annotated[str | None, typer.Argument(help="A cluster: its job queue.")] = None,
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
    api_url: ApiUrl = None,
    api_key: ApiKey = None,
) -> None:
    """Your jobs, newest first: where they run, what they cost, how they were submitted; with a cluster
    name, that cluster's job queue."""
    states = ",".join(state) if state else None
    with _client(api_url, api_key) as client:
        if cluster is not None:
            return cluster_commands.print_queue(client, cluster, as_json=as_json)
        jobs = client.list_jobs(state=states, since=since, name=name, limit=limit)
    if as_json:
        typer.echo(json.dumps([job.model_dump(mode="json") for job in jobs], indent=2))
        return
    _print_jobs(jobs)


def _print_jobs(jobs: list[JobSummary]) -> None:
    table = Table(title=f"{len(jobs)} job(s)")
    columns = (
        "ID",
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
            column, no_wrap=column in ("ID", "STATE"), justify="right" if column == "COST" else "left"
        )
    for job in jobs:
        table.add_row(
            job.job_id,
            _escape(job.name or "-"),
            _state(job.state),
            _place(job),
            job.instance_type or "-",
            _yes_no(job.use_spot),
            str(job.recoveries),
            dollars(job.cost),
            _escape(_source(job)),
            _age(job.created_at),
        )
    console.print(table)


def _source(job: JobSummary) -> str:
    if job.source is None:
        return "-"
    return f"{job.source} {job.source_ref}" if job.source_ref else job.source


def status(
    job_id: Annotated[
        str | None, typer.Argument(help="A job id or a cluster name (none: everything).")
    ] = None,
    as_json: Annotated[
        bool, typer.Option("--json", help="Print it as JSON (a job: plan, cluster, timeline).")
    ] = False,
    api_url: ApiUrl = None,
    api_key: ApiKey = None,
) -> None:
    """Your clusters and jobs; or one job (place, plan, timeline), or one cluster (nodes, timeline)."""
    with _client(api_url, api_key) as client:
        if job_id is None:
            clusters = client.list_clusters()
            jobs = client.list_jobs()
            if as_json:
                dumped = {
                    "clusters": [cluster.model_dump(mode="json") for cluster in clusters],
                    "jobs": [job.model_dump(mode="json") for job in jobs],
                }
                typer.echo(json.dumps(dumped, indent=2))
                return
            cluster_commands.print_clusters(clusters)
            return _print_jobs(jobs)
        if not cluster_commands.is_job_id(job_id):
            return cluster_commands.print_cluster(client, job_id, as_json=as_json)
        job = client.get_job(job_id)
    if as_json:
        typer.echo(json.dumps(job.model_dump(mode="json"), indent=2))
        return
    console.print(f"[bold]{job.job_id}[/bold] {_escape(job.name or '')}  {_state(job.state)}")
    where = f"  where: {_place(job)}  instance: {job.instance_type or '-'}"
    console.print(f"{where}  spot: {_yes_no(job.use_spot)}")
    console.print(
        f"  attempt: {job.attempt}  recoveries: {job.recoveries}  cost so far: ${job.cost:.4f}"
        f"  submitted: {_when(job.created_at)}"
    )
    if job.reason:
        console.print(f"  reason: {_escape(job.reason)}")
    if job.deadline is not None:
        d = job.deadline
        console.print(
            f"  deadline: {d.deadline}  work done: {d.work_done_hours:.2f} of {d.hours:g} h"
            f"  slack: {d.slack_hours:.2f} h  market: {(d.market or '-').replace('_', '-')}"
        )
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
    follow: Annotated[bool, typer.Option("--follow", "-f", help="Keep reading until the job ends.")] = False,
    api_url: ApiUrl = None,
    api_key: ApiKey = None,
) -> None:
    """A job's log: every node's, lines prefixed `(head, rank=0)`, `(worker1, rank=1)`, … (or --rank N)."""
    if not cluster_commands.is_job_id(job_id):
        with _client(api_url, api_key) as client:
            code = cluster_commands.print_logs(client, job_id, cluster_job, follow)
        raise typer.Exit(code)
    with _client(api_url, api_key) as client:
        group = client.get_job(job_id) if rank is None else None
        if group is not None and group.group:  # a job group: every task's log, `[task]` before each line
            return follow_group_logs(client, group, console, follow=follow)
        streams = LogStreams(client, job_id, ranks=None if rank is None else [rank])
        while True:
            job = client.get_job(job_id) if rank is None else None
            text = streams.read(job)
            _print_log(text)
            if not follow or streams.finished:
                _print_log(streams.flush())
                return
            if not text:
                time.sleep(1.0)


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
    api_url: ApiUrl = None,
    api_key: ApiKey = None,
) -> None:
    """Cancel jobs; their nodes are torn down. Cancelling a cancelled job again is harmless. With a cluster
    name first: jobs of that cluster (`skyless cancel NAME 3`, `skyless cancel NAME --all`)."""
    if job_ids and not cluster_commands.is_job_id(job_ids[0]):
        cluster, numbers = job_ids[0], job_ids[1:]
        if (not numbers and not all_jobs) or any(not n.isdigit() for n in numbers):
            errors.print("[red]error:[/red] give the cluster's job numbers, or --all")
            raise typer.Exit(2)
        with _client(api_url, api_key) as client:
            return cluster_commands.cancel_on_cluster(client, cluster, numbers, all_jobs)
    if not job_ids and not all_jobs:
        errors.print("[red]error:[/red] name the jobs to cancel, or --all")
        raise typer.Exit(2)
    if job_ids and all_jobs:
        errors.print("[red]error:[/red] give job ids or --all, not both")
        raise typer.Exit(2)
    failed = False
    with _client(api_url, api_key) as client:
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


def local_workdirs(pipeline: Any, filename: str) -> list[Path]:
    """The local workdirs of a validated pipeline (to upload); a UserError for one that is not a folder."""
    found: list[Path] = []
    for task in pipeline.tasks:
        workdir = task.workdir
        if isinstance(workdir, str) and "://" not in workdir:
            path = Path(workdir).expanduser()
            if not path.is_dir():
                raise UserError(f"{workdir} is not a directory", file=filename, field="workdir")
            found.append(path.resolve())
    return found


def local_file_mounts(pipeline: Any, filename: str) -> dict[str, Path]:
    """{remote path: local file or folder} of the task's file mounts with a local source (to upload)."""
    from shared.jobs.file_mounts import local_mounts, mount_sources

    found: dict[str, Path] = {}
    for task in pipeline.tasks:  # sources no node can fetch are refused before anything is uploaded
        mount_sources(task, bucket=None, filename=filename)
    for task in pipeline.tasks:
        for remote, source in local_mounts(task).items():
            path = Path(source).expanduser()
            if not path.exists():
                raise UserError(f"{source} does not exist", file=filename, field=f"file_mounts.{remote}")
            found[remote] = path.resolve()
    return found


PLACED_STATES = frozenset({"SETTING_UP", "RUNNING", "SUCCEEDED", "FAILED", "RECOVERING"})


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
    notes = (job.plan or {}).get("notes") or []
    for note in notes:
        console.print(f"  plan: {_escape(str(note))}", soft_wrap=True)


def _print_log(text: str) -> None:
    """Log text as it is: a line split across reads is printed as one (LogStreams.flush ends it)."""
    if text:
        console.out(text, end="", highlight=False)


def _state(state: str) -> str:
    style = STATE_STYLE.get(state)
    return f"[{style}]{state}[/{style}]" if style else state


def _place(job: JobSummary) -> str:
    return "/".join(p for p in (job.cloud, job.region) if p) or "-"


def _parse_time(value: str | None) -> datetime | None:
    if not value:
        return None
    try:
        moment = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


def _yes_no(value: bool | None) -> str:
    return {True: "yes", False: "no", None: "-"}[value]


def _when(value: str | None) -> str:
    """An API time as local date and time to the second (`2026-11-22 00:38:57`)."""
    moment = _parse_time(value)
    return moment.astimezone().strftime("%Y-%m-%d %H:%M:%S") if moment else (value or "-")


def _clock(value: str) -> str:
    moment = _parse_time(value)
    return moment.astimezone().strftime("%H:%M:%S") if moment else value


def _age(created_at: str | None) -> str:
    moment = _parse_time(created_at)
    if moment is None:
        return "-"
    seconds = max(0, int((datetime.now(UTC) - moment).total_seconds()))
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size:
            return f"{seconds // size}{unit}"
    return f"{seconds}s"


def _escape(text: str) -> str:
    from rich.markup import escape

    return escape(text)
