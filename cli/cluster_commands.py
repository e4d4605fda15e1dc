"""Named clusters, with SkyPilot's verbs: `skyless launch -c NAME FILE`, `exec NAME FILE|CMD`, `status`,
`queue NAME`, `logs NAME [JOB]`, `cancel NAME JOB`, `stop|start|down NAME`, `autostop NAME -i M [--down]`,
`ssh NAME [-- CMD]`. `launch`, `status`, `queue`, `logs` and `cancel` are shared with jobs
(cli/job_commands.py): a `job-…` id means a managed job, anything else a cluster name.

Exit codes as for jobs: 0 success (a followed job SUCCEEDED), 1 the job ended otherwise, 2 an error.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.markup import escape
from rich.table import Table

from cli import task_options
from cli.api_client import SkylessClient
from cli.client_config import ApiKey, ApiUrl
from cli.console import stderr_console, stdout_console
from cli.log_streams import write_log
from cli.ssh_config import remove_host
from shared.api.cluster_models import ClusterView
from shared.errors import UserError

console = stdout_console()
errors = stderr_console()

CLUSTER_STATE_STYLE = {"UP": "green", "INIT": "cyan", "STOPPED": "yellow", "STOPPING": "yellow",
                       "TERMINATING": "red", "TERMINATED": "red"}  # fmt: skip
JOB_STATE_STYLE = {"SUCCEEDED": "green", "FAILED": "red", "FAILED_SETUP": "red", "CANCELLED": "yellow",
                   "RUNNING": "cyan", "SETTING_UP": "cyan", "PENDING": "dim"}  # fmt: skip
JOB_TERMINAL = frozenset({"SUCCEEDED", "FAILED", "FAILED_SETUP", "CANCELLED"})

ClusterName = Annotated[str, typer.Argument(help="The cluster's name (from `skyless launch -c NAME`).")]


def register(app: typer.Typer) -> None:
    """Add the cluster-only verbs (launch, status, queue, logs and cancel are in job_commands)."""
    app.command("exec")(exec_command)
    app.command("stop")(stop)
    app.command("start")(start)
    app.command("down")(down)
    app.command("autostop")(autostop)


def is_job_id(text: str) -> bool:
    return text.startswith("job-")


# -- launch -c and exec ------------------------------------------------------------------------


def launch_on_cluster(
    client: SkylessClient,
    name: str,
    file: Path,
    text: str,
    *,
    env: dict[str, str],
    secrets: dict[str, str],
    minimize: str,
    clouds: list[str] | None,
    workdir_key: str | None,
    mount_keys: dict[str, str],
    fast: bool,
    idle_minutes: int | None,
    down: bool | None,
    detach: bool,
) -> int:
    answer = client.launch_on_cluster(
        name,
        text,
        filename=str(file),
        env=env,
        secrets=secrets or None,
        minimize=minimize,
        clouds=clouds,
        workdir_key=workdir_key,
        file_mount_keys=mount_keys,
        fast=fast,
        idle_minutes=idle_minutes,
        down=down,
    )
    what = {
        "created": "provisioning a new cluster",
        "reused": "reusing it"
        + (" (setup skipped: --fast)" if fast else " (setup runs again; --fast skips it)"),
        "starting": "starting it (it was STOPPED)",
        "provisioning": "it is still provisioning",
    }[answer.action]
    console.print(f"Cluster [bold]{escape(name)}[/bold]: {what}.")
    for note in answer.notes:
        console.print(f"[yellow]note:[/yellow] {escape(note)}")
    console.print(f"Job [bold]{answer.job.job}[/bold] queued on {escape(name)}.")
    if detach:
        console.print(f"Follow it with: skyless logs {name} {answer.job.job}")
        return 0
    return follow_cluster_job(client, name, answer.job.job, timeline=True)


def exec_command(
    cluster: ClusterName,
    target: Annotated[list[str], typer.Argument(help="A task file (YAML), or a command and its arguments.")],
    env: task_options.Env = None,
    env_file: task_options.EnvFile = None,
    secret: task_options.Secret = None,
    detach: Annotated[bool, typer.Option("--detach", "-d", help="Queue the job and return.")] = False,
    api_url: ApiUrl = None,
    api_key: ApiKey = None,
) -> None:
    """Run a task file or a command on an UP cluster: no provisioning, no setup (SkyPilot's `exec`)."""
    from cli.job_commands import _client, prepare_launch, read_task_file

    path = Path(target[0])
    is_file = len(target) == 1 and path.suffix in (".yaml", ".yml") and path.is_file()
    try:
        envs = task_options.env_values(env, env_file)
        secrets = task_options.pairs(secret, "--secret")
        prepared = (
            prepare_launch(read_task_file(path), str(path), envs, secrets, task_options.resource_overrides())
            if is_file
            else None
        )
    except UserError as exc:
        errors.print(f"[red]error:[/red] {escape(str(exc))}")
        raise typer.Exit(2) from None
    with _client(api_url, api_key) as client:
        if prepared is not None:
            workdir_key = client.upload_workdir(prepared.workdirs[0]) if prepared.workdirs else None
            mounts = {
                remote: client.upload_path(source, field=f"file_mounts.{remote}")
                for remote, source in prepared.mounts.items()
            }
            job = client.exec_on_cluster(cluster, task=prepared.text, filename=str(path), env=envs,
                                         secrets=secrets or None, workdir_key=workdir_key,
                                         file_mount_keys=mounts)  # fmt: skip
        else:
            command = " ".join(target) if len(target) > 1 else target[0]
            job = client.exec_on_cluster(cluster, command=command, env=envs)
        console.print(f"Job [bold]{job.job}[/bold] queued on {escape(cluster)} ({job.state}).")
        if detach:
            return
        code = follow_cluster_job(client, cluster, job.job)
    raise typer.Exit(code)


def follow_cluster_job(
    client: SkylessClient, name: str, number: int, *, timeline: bool = False, poll_seconds: float = 0.5
) -> int:
    """Print the job's log (and with `timeline`, the cluster's events: launching, UP) until the job ends;
    answers the exit code."""
    seen: set[tuple[str | None, str | None]] = set()
    cursors: dict[int, str | None] = {}
    finished: dict[int, bool] = {}
    state = "PENDING"
    try:
        while True:
            detail = client.get_cluster(name)
            for event in detail.timeline:
                identity = (event.time, event.message)
                if identity not in seen:
                    seen.add(identity)
                    if timeline and (event.kind in ("cluster", "note") or event.state):
                        console.print(
                            f"[dim]{_clock(event.time)}[/dim] {escape(event.message or '')}", soft_wrap=True
                        )
            text, state, ranks = _read_job_logs(client, name, number, cursors, finished)
            if text:
                write_log(text)  # `\r` kept, as SkyPilot prints a log
            if state in JOB_TERMINAL and all(finished.get(r) for r in range(ranks)):
                break
            if detail.state == "TERMINATED" or (detail.state == "TERMINATING" and state in JOB_TERMINAL):
                break
            if not text:
                time.sleep(poll_seconds)
    except KeyboardInterrupt:
        errors.print(
            f"Stopped following; the job keeps running. Cancel it with: skyless cancel {name} {number}"
        )
        return 130
    job = next((j for j in client.cluster_queue(name) if j.job == number), None)
    reason = f": {escape(job.reason)}" if job is not None and job.reason else ""
    console.print(f"Job [bold]{number}[/bold] on {escape(name)} {_styled(state, JOB_STATE_STYLE)}{reason}")
    return 0 if state == "SUCCEEDED" else 1


def _read_job_logs(
    client: SkylessClient, name: str, number: int, cursors: dict[int, str | None], finished: dict[int, bool]
) -> tuple[str, str, int]:
    first = client.cluster_logs(name, number, rank=0, after=cursors.get(0))
    pages = {0: first}
    for rank in range(1, first.num_nodes):
        pages[rank] = client.cluster_logs(name, number, rank=rank, after=cursors.get(rank))
    out = []
    for rank, page in pages.items():
        cursors[rank] = page.cursor or cursors.get(rank)
        finished[rank] = page.finished
        if page.text:
            prefix = (
                ""
                if first.num_nodes == 1
                else ("(head, rank=0) " if rank == 0 else f"(worker{rank}, rank={rank}) ")
            )
            out.append(
                "".join(prefix + line for line in page.text.splitlines(keepends=True))
                if prefix
                else page.text
            )
    return "".join(out), first.state, first.num_nodes


# -- status, queue, logs, cancel (called from job_commands for cluster names) -------------------


def print_clusters(clusters: list[ClusterView]) -> None:
    table = Table(title=f"{len(clusters)} cluster(s)")
    for column in ("NAME", "STATE", "INFRA", "RESOURCES", "AUTOSTOP", "$/HR", "COST SO FAR", "JOBS", "SINCE"):
        table.add_column(column, no_wrap=column in ("NAME", "STATE"))
    for c in clusters:
        infra = "/".join(p for p in (c.cloud, c.region, c.zone) if p) or "-"
        resources = f"{c.num_nodes}x {c.instance_type}" if c.instance_type else "-"
        if c.accelerator:
            resources += f" ({c.accelerator}:{c.accelerator_count:g})"
        if c.use_spot:
            resources += " [spot]"
        hourly = f"${c.hourly_price * c.num_nodes:.3f}" if c.hourly_price is not None else "-"
        table.add_row(
            escape(c.name),
            _styled(c.state, CLUSTER_STATE_STYLE),
            infra,
            resources,
            c.autostop,
            hourly,
            f"${c.cost:.4f}",
            str(c.active_jobs),
            _age(c.up_since or c.created_at),
        )
    console.print(table)


def print_cluster(client: SkylessClient, name: str, *, as_json: bool = False) -> None:
    c = client.get_cluster(name)
    if as_json:
        typer.echo(json.dumps(c.model_dump(mode="json"), indent=2))
        return
    console.print(f"[bold]{escape(c.name)}[/bold] {_styled(c.state, CLUSTER_STATE_STYLE)}  ({c.cluster_id})")
    where = "/".join(p for p in (c.cloud, c.region, c.zone) if p) or "-"
    console.print(f"  where: {where}  instance: {c.instance_type or '-'}  nodes: {c.num_nodes}"
                  f"  spot: {'yes' if c.use_spot else 'no'}")  # fmt: skip
    console.print(
        f"  autostop: {c.autostop}  cost so far: ${c.cost:.4f}  jobs queued or running: {c.active_jobs}"
    )
    if c.reason:
        console.print(f"  reason: {escape(c.reason)}")
    nodes = Table(title="nodes", show_edge=False)
    for column in ("RANK", "INSTANCE", "IP", "SHELLS", "LAST SEEN"):
        nodes.add_column(column)
    for n in c.nodes:
        nodes.add_row(
            str(n.rank), n.instance_id, n.public_ip or n.ip or "-", str(n.sessions), _clock(n.heartbeat_at)
        )
    console.print(nodes)
    timeline = Table(title="timeline", show_edge=False)
    for column in ("TIME", "EVENT", "MESSAGE"):
        timeline.add_column(column)
    for event in c.timeline[-30:]:
        timeline.add_row(_clock(event.time), event.kind, escape(event.message or ""))
    console.print(timeline)


def print_queue(client: SkylessClient, name: str, *, as_json: bool = False) -> None:
    jobs = client.cluster_queue(name)
    if as_json:
        typer.echo(json.dumps([job.model_dump(mode="json") for job in jobs], indent=2))
        return
    table = Table(title=f"Job queue of cluster {escape(name)}")
    for column in ("ID", "NAME", "SUBMITTED", "STARTED", "DURATION", "STATE", "COMMAND"):
        table.add_column(column, no_wrap=column in ("ID", "STATE"))
    for job in jobs:
        duration = f"{job.duration_seconds:.0f}s" if job.duration_seconds is not None else "-"
        table.add_row(
            str(job.job),
            escape(job.name or "-"),
            _age(job.submitted_at) + " ago",
            _age(job.started_at) + " ago" if job.started_at else "-",
            duration,
            _styled(job.state, JOB_STATE_STYLE),
            escape(job.command or "-"),
        )
    console.print(table)


def print_logs(client: SkylessClient, name: str, job: str | None, follow: bool) -> int:
    number = int(job) if job is not None else client.cluster_logs(name, "latest").job
    if follow:
        return follow_cluster_job(client, name, number)
    cursors: dict[int, str | None] = {}
    finished: dict[int, bool] = {}
    while True:
        text, _, _ = _read_job_logs(client, name, number, cursors, finished)
        if not text:
            return 0
        write_log(text)  # `\r` kept, as SkyPilot prints a log


def cancel_on_cluster(client: SkylessClient, name: str, jobs: list[str], every: bool) -> None:
    targets: list[int | str] = ["all"] if every else [int(j) for j in jobs]
    cancelled: list[int] = []
    for target in targets:
        cancelled += client.cancel_cluster_job(name, target)
    if cancelled:
        console.print(f"Cancelled job(s) {', '.join(map(str, cancelled))} on {escape(name)}.")
    else:
        console.print(f"Nothing to cancel on {escape(name)} (the job(s) had already ended).")


# -- stop, start, down, autostop ---------------------------------------------------------------


def _act(names: list[str], action: str, api_url: str | None, api_key: str | None) -> None:
    from cli.job_commands import _client

    with _client(api_url, api_key) as client:
        for name in names:
            view = client.cluster_action(name, action)
            console.print(f"Cluster [bold]{escape(name)}[/bold]: {_styled(view.state, CLUSTER_STATE_STYLE)}")
            if action == "down":
                remove_host(name)


Names = Annotated[list[str], typer.Argument(help="Cluster name(s).")]


def stop(names: Names, api_url: ApiUrl = None, api_key: ApiKey = None) -> None:
    """Stop clusters: their nodes stop, their disks stay (`skyless start` brings them back)."""
    _act(names, "stop", api_url, api_key)


def start(names: Names, api_url: ApiUrl = None, api_key: ApiKey = None) -> None:
    """Start stopped clusters (same nodes, same disks)."""
    _act(names, "start", api_url, api_key)


def down(names: Names, api_url: ApiUrl = None, api_key: ApiKey = None) -> None:
    """Tear clusters down: every node terminated, the name free again."""
    _act(names, "down", api_url, api_key)


def autostop(
    cluster: ClusterName,
    idle_minutes: Annotated[
        int | None, typer.Option("--idle-minutes", "-i", min=0, help="Stop after this many idle minutes.")
    ] = None,
    down: Annotated[bool, typer.Option("--down", help="Tear it down instead of stopping it.")] = False,
    cancel: Annotated[bool, typer.Option("--cancel", help="Turn autostop off.")] = False,
    api_url: ApiUrl = None,
    api_key: ApiKey = None,
) -> None:
    """Stop (with --down: tear down) the cluster once idle this long: no job, no open shell."""
    from cli.job_commands import _client

    if cancel == (idle_minutes is not None):
        errors.print("[red]error:[/red] give either -i MINUTES or --cancel")
        raise typer.Exit(2)
    with _client(api_url, api_key) as client:
        view = client.set_autostop(cluster, -1 if cancel else int(idle_minutes or 0), down=down)
    console.print(f"Cluster [bold]{escape(cluster)}[/bold]: autostop {view.autostop}")


# -- formatting --------------------------------------------------------------------------------


def _styled(state: str, styles: dict[str, str]) -> str:
    style = styles.get(state)
    return f"[{style}]{state}[/{style}]" if style else state


def _clock(value: str | None) -> str:
    from cli.job_commands import _clock as clock

    return clock(value) if value else "-"


def _age(value: str | None) -> str:
    from cli.job_commands import _age as age

    return age(value)


def no_cluster_options(**given: Any) -> list[str]:
    """The names of cluster-only options given without -c (an error, not silently ignored)."""
    return [name for name, value in given.items() if value not in (None, False)]
