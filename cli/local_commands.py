"""`skyless local up | down | status | preempt`: the embedded local control plane on this machine."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Annotated

import typer
from rich.markup import escape
from rich.table import Table

from cli.console import stderr_console, stdout_console
from shared.errors import UserError

console = stdout_console()
errors = stderr_console()

local_app = typer.Typer(
    name="local",
    help="The local control plane (moto, the API, the dispatcher, the local cloud) on this machine.",
    no_args_is_help=True,
)


def register(app: typer.Typer) -> None:
    """Add this area's verbs to the `skyless` command."""
    app.add_typer(local_app, name="local")


@contextmanager
def _user_errors() -> Iterator[None]:
    try:
        yield
    except UserError as exc:
        errors.print(f"[red]error:[/red] {escape(str(exc))}", markup=True)  # "[local]" is text, not markup
        raise typer.Exit(2) from None


@local_app.command("up")
def up(
    moto_port: Annotated[int | None, typer.Option(help="Port of the AWS endpoint (default 5566).")] = None,
    api_port: Annotated[int | None, typer.Option(help="Port of the API (default 5567).")] = None,
) -> None:
    """Start the local runtime in the background (does nothing if it is already running)."""
    from cli.local_extra import require_local_extra

    with _user_errors():
        require_local_extra()
    from local_runtime.daemon_control import running_runtime, start_local_runtime
    from local_runtime.runtime_file import runtime_log_path

    with _user_errors():
        already = running_runtime()
        info = already or start_local_runtime(moto_port=moto_port, api_port=api_port)
    console.print("already running" if already else "started", f"(pid {info.pid})")
    console.print(f"API           {info.api_url}")
    console.print(f"AWS endpoint  {info.aws_endpoint_url}")
    console.print(f"log           {runtime_log_path()}")


@local_app.command("down")
def down() -> None:
    """Stop the local runtime and every local node it started."""
    from local_runtime.daemon_control import stop_local_runtime
    from local_runtime.node_control import live_node_records
    from local_runtime.runtime_file import skyless_home

    stopped = stop_local_runtime()
    # Nodes outlive a daemon that was killed without its shutdown: stop them here too.
    leftover = live_node_records(skyless_home())
    if leftover:
        from shared.clouds.local import LocalCloud

        cloud = LocalCloud(skyless_home())
        for cluster_id in {r["cluster_id"] for r in leftover}:
            cloud.terminate(cluster_id)
    note = f" ({len(leftover)} leftover node(s) stopped)" if leftover else ""
    console.print(("stopped" if stopped else "not running") + note)


@local_app.command("status")
def status() -> None:
    """Endpoints, queue depths and live nodes of the local runtime."""
    from local_runtime.daemon_control import running_runtime
    from local_runtime.local_settings import local_settings
    from local_runtime.node_control import live_node_records, queue_depths
    from local_runtime.runtime_file import skyless_home

    info = running_runtime()
    if info is None:
        console.print("local runtime: not running  (start it with `skyless local up`)")
        nodes = live_node_records(skyless_home())
        if nodes:
            console.print(f"{len(nodes)} local node(s) still alive: `skyless local down` stops them")
        raise typer.Exit(1)
    console.print(f"local runtime: running (pid {info.pid})")
    console.print(f"API           {info.api_url}")
    console.print(f"AWS endpoint  {info.aws_endpoint_url}")
    settings = local_settings(skyless_home(), info.moto_port, info.api_port)
    queues = Table("queue", "waiting", "in flight", "delayed", "dead letters")
    for depth in queue_depths(settings):
        queues.add_row(depth.kind, str(depth.visible), str(depth.in_flight), str(depth.delayed),
                       str(depth.dead_letters))  # fmt: skip
    console.print(queues)
    nodes = live_node_records(skyless_home())
    table = Table("job", "cluster", "rank", "instance", "simulates", "spot", "pid")
    for record in nodes:
        simulated = f"{record['cloud']}/{record['region']} {record['instance_type']}"
        table.add_row(record["job_id"], record["cluster_id"], str(record["rank"]), record["instance_id"],
                      simulated, "yes" if record["use_spot"] else "no", str(record["pid"]))  # fmt: skip
    console.print(f"live nodes: {len(nodes)}")
    if nodes:
        console.print(table)


@local_app.command("preempt")
def preempt(
    job_id: Annotated[str, typer.Argument(help="The job whose node to preempt.")],
    rank: Annotated[int, typer.Option(help="Which node of the job.")] = 0,
    grace: Annotated[float, typer.Option(help="Seconds between the notice (SIGTERM) and the kill.")] = 2.0,
) -> None:
    """Preempt a node of a job as a cloud reclaims a spot VM; spot_watch gets the interruption event."""
    from local_runtime.daemon_control import running_runtime
    from local_runtime.local_settings import local_settings
    from local_runtime.node_control import preempt_job_node
    from local_runtime.runtime_file import skyless_home

    with _user_errors():
        info = running_runtime()
        if info is None:
            raise UserError("the local runtime is not running", hint="start it with `skyless local up`")
        settings = local_settings(skyless_home(), info.moto_port, info.api_port)
        event = preempt_job_node(settings, job_id, rank=rank, grace_seconds=grace)
    console.print(f"preempted {event['detail']['instance-id']} of job {job_id}; spot_watch notified")
