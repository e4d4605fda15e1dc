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
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.markup import escape
from rich.table import Table

from cli import sky_flags
from cli.client_config import ApiKey, ApiUrl
from cli.client_session import client_session
from cli.clock_format import age as _age
from cli.clock_format import clock as _clock
from cli.console import stderr_console, stdout_console
from cli.log_streams import write_log
from cli.ssh_config import remove_host
from shared.errors import UserError
from shared.store.job_numbers import parse_job_number

if TYPE_CHECKING:  # the API client and its models load when a verb calls the API, not with the command
    from cli.api_client import SkylessClient
    from cli.api_rows import ClusterRow

console = stdout_console()
errors = stderr_console()

CLUSTER_STATE_STYLE = {
    "UP": "green",
    "INIT": "cyan",
    "STOPPED": "yellow",
    "STOPPING": "yellow",
    "TERMINATING": "red",
    "TERMINATED": "red",
}
JOB_STATE_STYLE = {
    "SUCCEEDED": "green",
    "FAILED": "red",
    "FAILED_SETUP": "red",
    "CANCELLED": "yellow",
    "RUNNING": "cyan",
    "SETTING_UP": "cyan",
    "PENDING": "dim",
}
JOB_TERMINAL = frozenset({"SUCCEEDED", "FAILED", "FAILED_SETUP", "CANCELLED"})

ClusterName = Annotated[str, typer.Argument(help="The cluster's name (from `skyless launch -c NAME`).")]


def register(app: typer.Typer) -> None:
    """Add the cluster-only verbs (launch, status, queue, logs and cancel are in job_commands; exec in
    exec_command)."""
    app.command("stop")(stop)
    app.command("start")(start)
    app.command("down")(down)
    app.command("autostop")(autostop)


def is_job_id(text: str) -> bool:
    """A job id (`job-…`) or a job number (`3`, SkyPilot's managed job id): never a cluster name, which
    starts with a letter and not with `job-`."""
    return text.startswith("job-") or parse_job_number(text) is not None


# -- launch -c and exec ------------------------------------------------------------------------


def launch_on_cluster(
    client: SkylessClient,
    name: str,
    file: str | Path,
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


def print_clusters(clusters: list[ClusterRow], *, with_owner: bool = False) -> None:
    table = Table(title=f"{len(clusters)} cluster(s)" + (" of every user" if with_owner else ""))
    columns = ("NAME", "STATE", "INFRA", "RESOURCES", "AUTOSTOP", "$/HR", "COST SO FAR", "JOBS", "SINCE")
    for column in ("USER", *columns) if with_owner else columns:
        table.add_column(column, no_wrap=column in ("NAME", "STATE"))
    for c in clusters:
        infra = "/".join(p for p in (c["cloud"], c["region"], c["zone"]) if p) or "-"
        resources = f"{c['num_nodes']}x {c['instance_type']}" if c["instance_type"] else "-"
        if c["accelerator"]:
            resources += f" ({c['accelerator']}:{c['accelerator_count']:g})"
        if c["use_spot"]:
            resources += " [spot]"
        hourly = c["hourly_price"]
        table.add_row(
            *((escape(c["owner"] or "-"),) if with_owner else ()),
            escape(c["name"]),
            _styled(c["state"], CLUSTER_STATE_STYLE),
            infra,
            resources,
            c["autostop"],
            f"${hourly * c['num_nodes']:.3f}" if hourly is not None else "-",
            f"${c['cost']:.4f}",
            str(c["active_jobs"]),
            _age(c["up_since"] or c["created_at"]),
        )
    console.print(table)


def print_cluster(client: SkylessClient, name: str, *, as_json: bool = False) -> None:
    c = client.get_cluster(name)
    if as_json:
        typer.echo(json.dumps(c.model_dump(mode="json"), indent=2))
        return
    console.print(f"[bold]{escape(c.name)}[/bold] {_styled(c.state, CLUSTER_STATE_STYLE)}  ({c.cluster_id})")
    where = "/".join(p for p in (c.cloud, c.region, c.zone) if p) or "-"
    console.print(
        f"  where: {where}  instance: {c.instance_type or '-'}  nodes: {c.num_nodes}"
        f"  spot: {'yes' if c.use_spot else 'no'}"
    )
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


def print_queue(
    client: SkylessClient, name: str, *, as_json: bool = False, skip_finished: bool = False
) -> None:
    jobs = [j for j in client.cluster_queue(name) if not (skip_finished and j.state in JOB_TERMINAL)]
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


def print_address(
    client: SkylessClient, name: str, *, ip: bool, port: int | None, endpoints: bool = False
) -> int:
    """`status --ip NAME`: the head node's address; `--endpoint PORT`: host:port of a port the cluster opened;
    `--endpoints`: `port: host:port` for each one, ranges one port a line (as `sky status --endpoints`)."""
    detail = client.get_cluster(name)
    if detail.state != "UP":
        errors.print(f"[red]error:[/red] cluster {escape(name)} is {detail.state}, not UP")
        return 2
    head = next((n for n in sorted(detail.nodes, key=lambda n: n.rank)), None)
    address = head.public_ip or head.ip if head is not None else None
    if address is None:
        errors.print(f"[red]error:[/red] cluster {escape(name)} has no address yet")
        return 2
    if ip:
        typer.echo(address)
        return 0
    from shared.task import parse_ports

    opened = [p for first, last in parse_ports(detail.ports) for p in range(first, last + 1)]
    wanted = opened if endpoints else [p for p in opened if p == port]
    if not wanted:
        what = "open ports" if endpoints else f"open port {port}"
        errors.print(
            f"[red]error:[/red] cluster {escape(name)} has no {what} (its launch task's resources.ports: "
            f"{', '.join(detail.ports) or 'none'})"
        )
        return 2
    for number in wanted:
        typer.echo(f"{number}: {address}:{number}" if endpoints else f"{address}:{number}")
    return 0


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
    """The given jobs, or every live one; neither: the newest live job (SkyPilot's `sky cancel NAME`)."""
    targets: list[int | str] = ["all"] if every else [int(j) for j in jobs]
    if not targets:
        live = [j.job for j in client.cluster_queue(name) if j.state not in JOB_TERMINAL]
        if not live:
            console.print(f"Nothing to cancel on {escape(name)} (no job has not ended).")
            return
        console.print(f"No job number or --all given: cancelling the latest job, {max(live)}.")
        targets = [max(live)]
    cancelled: list[int] = []
    for target in targets:
        cancelled += client.cancel_cluster_job(name, target)
    if cancelled:
        console.print(f"Cancelled job(s) {', '.join(map(str, cancelled))} on {escape(name)}.")
    else:
        console.print(f"Nothing to cancel on {escape(name)} (the job(s) had already ended).")


# -- stop, start, down, autostop ---------------------------------------------------------------

# Where each action ends, and the states that mean it will not get there.
SETTLED = {"stop": "STOPPED", "start": "UP", "down": "TERMINATED"}
GAVE_UP = {
    "stop": {"TERMINATING", "TERMINATED"},
    "start": {"STOPPED", "TERMINATING", "TERMINATED"},
    "down": set(),
}
WAIT_SECONDS = 600.0


def _act(
    names: list[str],
    action: str,
    *,
    every: bool,
    wait: bool,
    api_url: str | None,
    api_key: str | None,
    poll_seconds: float = 1.0,
) -> int:
    """Ask for `action` on each cluster, then (unless `wait` is off) wait until each is STOPPED, UP or
    gone, saying so; without waiting, say that the command returns before it. Answers the exit code."""
    if not names and not every:
        errors.print("[red]error:[/red] name the clusters, or --all")
        return 2
    if names and every:
        errors.print("[red]error:[/red] give cluster names or --all, not both")
        return 2
    code = 0
    with client_session(api_url, api_key) as client:
        targets = names or [
            c.name for c in client.list_clusters() if c.state not in ("TERMINATING", "TERMINATED")
        ]
        if not targets:
            console.print("No cluster to act on.")
        asked: list[str] = []
        for name in targets:
            view = client.cluster_action(name, action)
            console.print(f"Cluster [bold]{escape(name)}[/bold]: {_styled(view.state, CLUSTER_STATE_STYLE)}")
            if action == "down":
                remove_host(name)
            asked.append(name)
        for name in asked:
            if not wait:
                console.print(
                    f"{escape(name)}: not waiting for {SETTLED[action]} (--async); "
                    f"`skyless status {escape(name)}` shows when it is"
                )
                continue
            if not _wait_for(client, name, action, poll_seconds):
                code = 1
    return code


def _wait_for(client: SkylessClient, name: str, action: str, poll_seconds: float) -> bool:
    """Wait until the cluster reaches the action's end state (down: gone), printing it; False when it
    will not (or not within WAIT_SECONDS)."""
    target = SETTLED[action]
    deadline = time.monotonic() + WAIT_SECONDS
    state = ""
    with console.status(f"waiting for {escape(name)} to be {target}…"):
        while time.monotonic() < deadline:
            try:
                state = client.get_cluster(name).state
            except UserError as exc:
                if action == "down" and getattr(exc, "status_code", 0) == 404:
                    state = "TERMINATED"
                else:
                    raise
            if state == target or state in GAVE_UP[action]:
                break
            time.sleep(poll_seconds)
    if state == target:
        console.print(f"Cluster [bold]{escape(name)}[/bold]: {_styled(state, CLUSTER_STATE_STYLE)}")
        return True
    why = "it did not get there" if state in GAVE_UP[action] else f"still {state} after {WAIT_SECONDS:.0f}s"
    errors.print(f"Cluster {escape(name)} is {state}, not {target}: {why} (`skyless status {escape(name)}`)")
    return False


Names = Annotated[list[str] | None, typer.Argument(metavar="[CLUSTER]...", help="Cluster name(s).")]


def stop(
    names: Names = None,
    every: sky_flags.AllClusters = False,
    all_users: sky_flags.AllUsers = False,
    yes: sky_flags.Yes = False,
    async_call: sky_flags.Async = False,
    api_url: ApiUrl = None,
    api_key: ApiKey = None,
) -> None:
    """Stop clusters and wait until they are STOPPED: their nodes stop, their disks stay (`skyless start`
    brings them back). With --async: return once the stop is asked for."""
    del yes  # skyless never asks
    if all_users:
        sky_flags.note(sky_flags.ALL_USERS_ACT_NOTE)
    every = every or all_users
    raise typer.Exit(
        _act(names or [], "stop", every=every, wait=not async_call, api_url=api_url, api_key=api_key)
    )


def start(
    names: Names = None,
    every: sky_flags.AllClusters = False,
    yes: sky_flags.Yes = False,
    idle_minutes: Annotated[
        int | None,
        typer.Option("--idle-minutes-to-autostop", "-i", min=0, help="Then autostop after this idle."),
    ] = None,
    down: Annotated[bool, typer.Option("--down", help="With -i: autostop tears the cluster down.")] = False,
    wait_for: sky_flags.WaitFor = None,
    retry_until_up: sky_flags.RetryUntilUp = False,
    force: Annotated[
        bool,
        typer.Option("--force", "-f", help="Start even if UP (a start of an UP cluster changes nothing)."),
    ] = False,
    async_call: sky_flags.Async = False,
    api_url: ApiUrl = None,
    api_key: ApiKey = None,
) -> None:
    """Start stopped clusters (same nodes, same disks) and wait until they are UP. With --async: return
    once the start is asked for."""
    del yes, force  # skyless never asks; starting an UP cluster is already harmless
    if down and idle_minutes is None:
        errors.print("[red]error:[/red] --down: needs -i MINUTES (as in sky start)")
        raise typer.Exit(2)
    refusal = sky_flags.wait_for_refusal(wait_for)
    if refusal is not None:
        errors.print(f"[red]error:[/red] {escape(refusal)}")
        raise typer.Exit(2)
    if retry_until_up:
        sky_flags.note(sky_flags.RETRY_NOTE)
    code = _act(names or [], "start", every=every, wait=not async_call, api_url=api_url, api_key=api_key)
    if idle_minutes is not None and code == 0:
        with client_session(api_url, api_key) as client:
            for name in names or [c.name for c in client.list_clusters() if c.state in ("INIT", "UP")]:
                view = client.set_autostop(name, idle_minutes, down=down)
                console.print(f"Cluster [bold]{escape(name)}[/bold]: autostop {view.autostop}")
    raise typer.Exit(code)


def down(
    names: Names = None,
    every: sky_flags.AllClusters = False,
    all_users: sky_flags.AllUsers = False,
    yes: sky_flags.Yes = False,
    purge: Annotated[
        bool,
        typer.Option(
            "--purge", "-p", help="Forget the cluster even if teardown fails (skyless keeps retrying it)."
        ),
    ] = False,
    async_call: sky_flags.Async = False,
    api_url: ApiUrl = None,
    api_key: ApiKey = None,
) -> None:
    """Tear clusters down and wait until they are gone: every node terminated, the name free again. With
    --async: return once the teardown is asked for."""
    del yes  # skyless never asks
    if purge:
        sky_flags.note(
            "--purge: skyless never forgets nodes it could not terminate: the reaper retries until gone"
        )
    if all_users:
        sky_flags.note(sky_flags.ALL_USERS_ACT_NOTE)
    every = every or all_users
    raise typer.Exit(
        _act(names or [], "down", every=every, wait=not async_call, api_url=api_url, api_key=api_key)
    )


def autostop(
    names: Names = None,
    every: sky_flags.AllClusters = False,
    all_users: sky_flags.AllUsers = False,
    idle_minutes: Annotated[
        int | None,
        typer.Option("--idle-minutes", "-i", min=0, help="Stop after this many idle minutes (default 5)."),
    ] = None,
    down: Annotated[bool, typer.Option("--down", help="Tear it down instead of stopping it.")] = False,
    cancel: Annotated[bool, typer.Option("--cancel", help="Turn autostop off.")] = False,
    wait_for: sky_flags.WaitFor = None,
    yes: sky_flags.Yes = False,
    async_call: sky_flags.Async = False,
    api_url: ApiUrl = None,
    api_key: ApiKey = None,
) -> None:
    """Stop (with --down: tear down) clusters once idle this long: no job, no open shell."""
    del yes, async_call  # skyless never asks, and the setting is written at once
    if cancel and idle_minutes is not None:
        errors.print("[red]error:[/red] give either -i MINUTES or --cancel")
        raise typer.Exit(2)
    refusal = sky_flags.wait_for_refusal(wait_for)
    if refusal is not None:
        errors.print(f"[red]error:[/red] {escape(refusal)}")
        raise typer.Exit(2)
    if all_users:
        sky_flags.note(sky_flags.ALL_USERS_ACT_NOTE)
    minutes = -1 if cancel else (5 if idle_minutes is None else idle_minutes)  # SkyPilot's default: 5
    if not names and not (every or all_users):
        errors.print("[red]error:[/red] name the clusters, or --all")
        raise typer.Exit(2)
    with client_session(api_url, api_key) as client:
        targets = names or [c.name for c in client.list_clusters() if c.state in ("INIT", "UP", "STOPPED")]
        for name in targets:
            view = client.set_autostop(name, minutes, down=down)
            console.print(f"Cluster [bold]{escape(name)}[/bold]: autostop {view.autostop}")


# -- formatting --------------------------------------------------------------------------------


def _styled(state: str, styles: dict[str, str]) -> str:
    style = styles.get(state)
    return f"[{style}]{state}[/{style}]" if style else state


def no_cluster_options(**given: Any) -> list[str]:
    """The names of cluster-only options given without -c (an error, not silently ignored)."""
    return [name for name, value in given.items() if value not in (None, False)]
