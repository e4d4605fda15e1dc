"""`skyless exec CLUSTER ENTRYPOINT...`: a task file or a command queued on an UP cluster, with `sky exec`'s
flags. As in SkyPilot, `--gpus` and `--num-nodes` are the job's demand (it must fit the cluster),
`--instance-type`, `--use-spot` and the location must match the cluster, and `--cpus`, `--memory`,
`--disk-size`, `--disk-tier` and `--ports` are ignored with a note (sky exec prints "Override param ... is
ignored"): exec provisions nothing."""

from __future__ import annotations

from typing import Annotated

import typer
from rich.markup import escape

from cli import sky_flags, task_options
from cli.client_config import ApiKey, ApiUrl
from cli.client_session import client_session
from cli.cluster_commands import ClusterName, follow_cluster_job
from cli.console import stderr_console, stdout_console
from cli.launch_prep import prepare_launch
from cli.task_edits import TaskEdits, apply_edits, read_entrypoint
from shared.api.cluster_models import ClusterView
from shared.errors import UserError

console = stdout_console()
errors = stderr_console()


def register(app: typer.Typer) -> None:
    app.command("exec")(exec_command)


def exec_command(
    cluster: ClusterName,
    target: Annotated[
        list[str],
        typer.Argument(metavar="ENTRYPOINT...", help="A task file (YAML), or a command and its arguments."),
    ],
    env: task_options.Env = None,
    env_file: task_options.EnvFile = None,
    secret: task_options.Secret = None,
    name: sky_flags.Name = None,
    workdir: sky_flags.Workdir = None,
    git_url: sky_flags.GitUrl = None,
    git_ref: sky_flags.GitRef = None,
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
    disk_size: sky_flags.DiskSize = None,
    disk_tier: sky_flags.DiskTier = None,
    network_tier: sky_flags.NetworkTier = None,
    image_id: sky_flags.ImageId = None,
    ports: sky_flags.Ports = None,
    detach: Annotated[
        bool, typer.Option("--detach-run", "--detach", "-d", help="Queue the job and return.")
    ] = False,
    async_call: sky_flags.Async = False,
    api_url: ApiUrl = None,
    api_key: ApiKey = None,
) -> None:
    """Run a task file or a command on an UP cluster: no provisioning, no setup (SkyPilot's `exec`)."""
    ignored = {"--cpus": cpus, "--memory": memory, "--disk-size": disk_size, "--disk-tier": disk_tier,
               "--network-tier": network_tier, "--image-id": image_id, "--ports": ports}  # fmt: skip
    for flag, value in ignored.items():
        if value:
            sky_flags.note(f"{flag}: ignored by exec, which provisions nothing (sky exec ignores it too)")
    try:
        entry = read_entrypoint(target)
        envs = task_options.env_values(env, env_file)
        secrets = task_options.pairs(secret, "--secret")
        overrides = task_options.resource_overrides(
            gpus=gpus, instance_type=instance_type, num_nodes=num_nodes, use_spot=use_spot, infra=infra,
            cloud=cloud, region=region, zone=zone,
        )  # fmt: skip
        edits = TaskEdits(name=name, workdir=workdir, git_url=git_url, git_ref=git_ref)
        text = apply_edits(entry.text, edits, filename=entry.filename)
        plain_command = entry.command is not None and text == entry.text and not overrides.given()
        prepared = None if plain_command else prepare_launch(text, entry.filename, envs, secrets, overrides)
    except UserError as exc:
        errors.print(f"[red]error:[/red] {escape(str(exc))}")
        raise typer.Exit(2) from None
    with client_session(api_url, api_key) as client:
        if overrides.given():
            refuse_mismatch(client.get_cluster(cluster), instance_type, use_spot, overrides.given())
        if prepared is None:
            assert entry.command is not None
            job = client.exec_on_cluster(cluster, command=entry.command, env=envs)
        else:
            workdir_key = client.upload_workdir(prepared.workdirs[0]) if prepared.workdirs else None
            mounts = {
                remote: client.upload_path(source, field=f"file_mounts.{remote}")
                for remote, source in prepared.mounts.items()
            }
            job = client.exec_on_cluster(cluster, task=prepared.text, filename=entry.filename, env=envs,
                                         secrets=secrets or None, workdir_key=workdir_key,
                                         file_mount_keys=mounts)  # fmt: skip
        console.print(f"Job [bold]{job.job}[/bold] queued on {escape(cluster)} ({job.state}).")
        if detach or async_call:
            return
        code = follow_cluster_job(client, cluster, job.job)
    raise typer.Exit(code)


def refuse_mismatch(
    view: ClusterView, instance_type: str | None, use_spot: bool | None, given: dict[str, object]
) -> None:
    """exec runs on the cluster's machines: an instance type, market or place that differs from them
    is a mistake (SkyPilot: "Task requirements ... do not match the existing cluster")."""
    if instance_type is not None and instance_type != view.instance_type:
        raise UserError(
            f"cluster {view.name} runs {view.instance_type}, not {instance_type}", field="--instance-type"
        )
    if use_spot is not None and use_spot != view.use_spot:
        market = "spot" if view.use_spot else "on-demand"
        raise UserError(f"cluster {view.name} runs {market} machines", field="--use-spot")
    wanted = [str(given[k]) for k in ("infra", "cloud", "region", "zone") if k in given]
    place = {p for p in (view.cloud, view.region, view.zone) if p}
    for value in wanted:
        parts = [p for p in value.split("/") if p and p != "*"]
        if any(p not in place for p in parts):
            where = "/".join(p for p in (view.cloud, view.region, view.zone) if p)
            raise UserError(f"cluster {view.name} is in {where}, not {value}", field="--infra")
