"""`skyless launch ENTRYPOINT...`: a task file or an inline command, as a managed job, or with `-c NAME` on a
named cluster (cli/cluster_commands.py), with `sky launch`'s flags.

Exit codes: 0 success (the job SUCCEEDED, or --dryrun/-d), 1 the job ended otherwise, 2 an error (the
request, the task file or the API), 130 interrupted (before submitting: nothing was submitted; after:
the job keeps running).
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.markup import escape
from rich.table import Table

from cli import cluster_commands, is_interrupt, sky_config, sky_flags, task_options
from cli.api_client import SkylessClient
from cli.client_config import ApiKey, ApiUrl
from cli.client_session import client_session
from cli.console import stderr_console, stdout_console
from cli.data_options import SKYLESS_ONLY, DataSize, data_sizes
from cli.job_commands import follow_job
from cli.launch_prep import PreparedLaunch, prepare_launch
from cli.task_edits import TaskEdits, apply_edits, read_entrypoint
from shared.errors import UserError

if TYPE_CHECKING:
    from shared.api.models import SubmitJobResponse

console = stdout_console()
errors = stderr_console()

Entrypoint = Annotated[
    list[str] | None,
    typer.Argument(metavar="[ENTRYPOINT]...", help="A task file (SkyPilot YAML), or a command to run."),
]


def register(app: typer.Typer) -> None:
    app.command("launch")(launch)


def launch(
    entrypoint: Entrypoint = None,
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
    name: sky_flags.Name = None,
    workdir: sky_flags.Workdir = None,
    git_url: sky_flags.GitUrl = None,
    git_ref: sky_flags.GitRef = None,
    config: sky_flags.Config = None,
    disk_size: sky_flags.DiskSize = None,
    disk_tier: sky_flags.DiskTier = None,
    network_tier: sky_flags.NetworkTier = None,
    image_id: sky_flags.ImageId = None,
    ports: sky_flags.Ports = None,
    job_recovery: sky_flags.JobRecovery = None,
    no_setup: sky_flags.NoSetup = False,
    detach_setup: sky_flags.DetachSetup = False,
    retry_until_up: sky_flags.RetryUntilUp = False,
    dryrun: sky_flags.DryRun = False,
    yes: sky_flags.Yes = False,
    async_call: sky_flags.Async = False,
    detach: Annotated[
        bool, typer.Option("--detach-run", "--detach", "-d", help="Submit and return.")
    ] = False,
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
    max_cost: Annotated[
        float | None,
        typer.Option("--max-cost", min=0.000001, help="Cost cap, USD: notices at 50/80/100 %, then stop."),
    ] = None,
    max_cost_action: Annotated[
        str, typer.Option("--max-cost-action", help="At the cap: stop (at a checkpoint) or warn.")
    ] = "stop",
    cluster: Annotated[
        str | None, typer.Option("--cluster", "-c", help="Run it on this named cluster (made if new).")
    ] = None,
    fast: Annotated[bool, typer.Option("--fast", help="With -c: skip setup on an existing cluster.")] = False,
    data_size: DataSize = None,
    idle_minutes: Annotated[
        int | None, typer.Option("--idle-minutes-to-autostop", "-i", min=0, help="With -c: autostop.")
    ] = None,
    down: Annotated[bool, typer.Option("--down", help="With -c: autostop tears the cluster down.")] = False,
    wait_for: sky_flags.WaitFor = None,
    clone_disk_from: sky_flags.CloneDiskFrom = None,
    api_url: ApiUrl = None,
    api_key: ApiKey = None,
) -> None:
    """Submit a task file or a command as a managed job, then follow its states and logs until it ends
    (with -c: on a named cluster, made if new).

    With --deadline and --hours, skyless chooses spot or on-demand, and where, as the job goes (a skyless
    feature: SkyPilot has no deadline); `skyless plan FILE --deadline ... --hours ...` estimates the cost."""
    del yes  # skyless never asks for confirmation
    try:
        _launch(**{k: v for k, v in locals().items() if k != "yes"})
    except (KeyboardInterrupt, RuntimeError) as error:  # before anything was submitted (after: follow_job's)
        if not is_interrupt(error):
            raise
        errors.print("interrupted: nothing was submitted")
        raise typer.Exit(130) from None


def _launch(**o: Any) -> None:
    refusal = sky_flags.wait_for_refusal(o["wait_for"])
    if o["clone_disk_from"] is not None:
        refusal = sky_flags.CLONE_DISK_REFUSAL
    if refusal is not None:
        errors.print(f"[red]error:[/red] {escape(refusal)}")
        raise typer.Exit(2)
    if o["minimize"] not in ("cost", "time"):
        errors.print(f"[red]error:[/red] --minimize: must be cost or time, not {escape(o['minimize'])}")
        raise typer.Exit(2)
    cluster = o["cluster"]
    given = cluster_commands.no_cluster_options(
        **{"--fast": o["fast"], "-i": o["idle_minutes"], "--down": o["down"], "--wait-for": o["wait_for"]}
    )
    if cluster is None and given:
        errors.print(f"[red]error:[/red] {', '.join(given)} need a cluster: add -c NAME")
        raise typer.Exit(2)
    if o["max_cost_action"] not in ("stop", "warn"):
        errors.print(
            f"[red]error:[/red] --max-cost-action: must be stop or warn, not {escape(o['max_cost_action'])}"
        )
        raise typer.Exit(2)
    managed = cluster_commands.no_cluster_options(
        **{
            "--deadline": o["deadline"],
            "--hours": o["hours"],
            "--max-cost": o["max_cost"],
            "--notify-slack": o["notify_slack"],
            "--notify-email": o["notify_email"],
            "--job-recovery": o["job_recovery"],
            "--data-size": o["data_size"],
        }
    )
    if cluster is not None and managed:
        errors.print(f"[red]error:[/red] {', '.join(managed)}: for managed jobs, not with -c NAME")
        raise typer.Exit(2)
    try:  # everything the file and the options can get wrong, before any upload or network call
        entry = read_entrypoint(o["entrypoint"], allow_empty=cluster is not None)
        envs = task_options.env_values(o["env"], o["env_file"])
        secrets = task_options.pairs(o["secret"], "--secret")
        data_gb = data_sizes(o["data_size"])
        overrides = task_options.resource_overrides(
            gpus=o["gpus"],
            cpus=o["cpus"],
            memory=o["memory"],
            instance_type=o["instance_type"],
            num_nodes=o["num_nodes"],
            use_spot=o["use_spot"],
            infra=o["infra"],
            cloud=o["cloud"],
            region=o["region"],
            zone=o["zone"],
        )
        edits = TaskEdits(
            name=o["name"],
            workdir=o["workdir"],
            git_url=o["git_url"],
            git_ref=o["git_ref"],
            image_id=o["image_id"],
            disk_size=o["disk_size"],
            disk_tier=o["disk_tier"],
            network_tier=o["network_tier"],
            ports=tuple(o["ports"] or ()),
            job_recovery=o["job_recovery"],
            no_setup=o["no_setup"],
        )
        text = apply_edits(entry.text, edits, filename=entry.filename)
        prepared = prepare_launch(text, entry.filename, envs, secrets, overrides)
        asked = [c.strip() for c in o["clouds"].split(",") if c.strip()] if o["clouds"] else None
        layers = sky_config.load_sky_config(overrides=o["config"])  # ~/.sky/config.yaml ... --config
        configured = sky_config.apply_sky_config(prepared.text, entry.filename, asked, layers)
    except UserError as exc:
        errors.print(f"[red]error:[/red] {escape(str(exc))}")
        raise typer.Exit(2) from None
    prepared, cloud_list = replace(prepared, text=configured.text), configured.clouds
    if entry.command:
        console.print(f"Command to run: {escape(entry.command)}", soft_wrap=True)
    flag_notes = (
        (o["retry_until_up"], sky_flags.RETRY_NOTE),
        (o["detach_setup"], sky_flags.DETACH_SETUP_NOTE),
        (o["async_call"], sky_flags.ASYNC_NOTE),
    )
    for flag, note in flag_notes:
        if flag:
            sky_flags.note(note)
    said = [*(prepared.notes if cluster is None else ()), *configured.notes]  # a cluster answer says its own
    for note in [*said, *([SKYLESS_ONLY] if data_gb else [])]:
        console.print(f"[yellow]note:[/yellow] {escape(note)}", soft_wrap=True)
    detach = o["detach"] or o["async_call"]
    with client_session(o["api_url"], o["api_key"]) as client:
        if o["dryrun"]:
            print_dry_run(
                client.plan(
                    prepared.text,
                    filename=entry.filename,
                    env=envs,
                    minimize=o["minimize"],
                    clouds=cloud_list,
                    data_gb=data_gb,
                )
            )
            return
        workdir_key, mount_keys = _upload(client, prepared)
        if cluster is not None:
            code = cluster_commands.launch_on_cluster(
                client,
                cluster,
                entry.filename,
                prepared.text,
                env=envs,
                secrets=secrets,
                minimize=o["minimize"],
                clouds=cloud_list,
                workdir_key=workdir_key,
                mount_keys=mount_keys,
                fast=o["fast"],
                idle_minutes=o["idle_minutes"],
                down=o["down"] or None,
                detach=detach,
            )
            raise typer.Exit(code)
        notify = {k: v for k, v in (("slack_webhook", o["notify_slack"]), ("email", o["notify_email"])) if v}
        job = client.submit_job(
            prepared.text,
            filename=entry.filename,
            env=envs,
            secrets=secrets or None,
            minimize=o["minimize"],
            clouds=cloud_list,
            workdir_key=workdir_key,
            file_mount_keys=mount_keys,
            notify=notify or None,
            deadline=o["deadline"],
            hours=o["hours"],
            max_cost=o["max_cost"],
            max_cost_action=o["max_cost_action"],
            data_gb=data_gb,
        )
        try:  # from here on the job exists: Ctrl-C leaves it running and says how to cancel it
            final = _follow_submitted(client, job, o, detach)
        except (KeyboardInterrupt, RuntimeError) as error:
            if not is_interrupt(error):
                raise
            errors.print(
                f"Stopped following; the job keeps running. Cancel it with: skyless cancel {job.job_id}"
            )
            raise typer.Exit(130) from None
        if final is None:
            return
    raise typer.Exit(0 if final == "SUCCEEDED" else 1)


def _follow_submitted(
    client: SkylessClient, job: SubmitJobResponse, o: dict[str, Any], detach: bool
) -> str | None:
    """Say what was submitted, then follow the job to its end (its final state; None with --detach)."""
    job_id = job.job_id
    console.print(f"Job [bold]{job_id}[/bold] submitted ({job.state}).")
    if job.job_number is not None:  # the line SkyPilot prints, which scripts read the number from
        console.print(f"Managed Job ID: {job.job_number}", highlight=False)
    if o["max_cost"] is not None:
        console.print(
            f"Cost cap ${o['max_cost']:.2f} (skyless only; SkyPilot has none): "
            "notices at 50/80/100 %, then "
            + ("the job is stopped at a checkpoint." if o["max_cost_action"] == "stop" else "a warning only.")
        )
    if o["deadline"] is not None:
        console.print(
            "Deadline job (skyless only; SkyPilot has none): spot while the deadline is safe, "
            "on-demand when it must, and after any preemption once it runs past its --hours."
        )
    if detach:
        follow_with = f"jobs logs {job.job_number}" if job.job_number is not None else f"logs {job_id}"
        console.print(f"Follow it with: skyless {follow_with}")
        return None
    return follow_job(client, job_id)


def _upload(client: SkylessClient, prepared: PreparedLaunch) -> tuple[str | None, dict[str, str]]:
    workdir_key = None
    if prepared.workdirs:
        console.print(f"Uploading workdir {prepared.workdirs[0]} …")
        workdir_key = client.upload_workdir(prepared.workdirs[0])
    mount_keys: dict[str, str] = {}
    for remote, source in prepared.mounts.items():
        console.print(f"Uploading file mount {source} -> {remote} …")
        mount_keys[remote] = client.upload_path(source, field=f"file_mounts.{remote}")
    return workdir_key, mount_keys


def print_dry_run(plan: dict[str, Any]) -> None:
    """`--dryrun`: the plan the control plane would follow (its catalog, its prices), nothing launched."""
    for task in plan.get("tasks") or []:
        candidates = task.get("candidates") or []
        table = Table(title=f"{task.get('task_name') or 'task'}: {len(candidates)} place(s), best first")
        for column in ("CLOUD", "REGION", "ZONE", "INSTANCE", "ACCELERATORS", "SPOT", "$/HR", "NODES"):
            table.add_column(column)
        for c in candidates[:5]:
            accelerators = f"{c['accelerator']}:{c['accelerator_count']:g}" if c.get("accelerator") else "-"
            table.add_row(
                c["cloud"],
                c["region"],
                c.get("zone") or "-",
                c["instance_type"],
                accelerators,
                "yes" if c["use_spot"] else "no",
                f"{c['hourly_price']:.3f}",
                str(c["num_nodes"]),
            )
        console.print(table)
    for note in plan.get("notes") or []:  # contracts (reserved places, negotiated prices), data gravity
        console.print(f"[yellow]note:[/yellow] {escape(str(note))}", soft_wrap=True)
    console.print(f"Estimated cost: ${plan.get('total_cost', 0.0):.2f}. Dry run: nothing was launched.")
