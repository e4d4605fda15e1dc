"""`skyless jobs launch | queue | cancel | logs`: SkyPilot's `sky jobs ...` verbs over skyless's managed jobs
(the plain `launch`, `queue`, `cancel`, `logs` stay). skyless runs every job without a controller VM, so
`sky jobs` and the plain verbs reach the same jobs. A job is named by its number among your jobs (`jobs
cancel 1 2`, SkyPilot's managed job ids) or by its `job-…` id."""

from __future__ import annotations

from typing import Annotated

import typer
from rich.markup import escape

from cli import job_commands, sky_flags, task_options
from cli.api_client import SkylessClient
from cli.client_config import ApiKey, ApiUrl
from cli.client_session import client_session
from cli.console import stderr_console, stdout_console
from cli.launch_command import Entrypoint, launch
from shared.errors import UserError
from shared.states import LIVE

console = stdout_console()
errors = stderr_console()

jobs_app = typer.Typer(
    name="jobs",
    help="Managed jobs, as `sky jobs ...` (the same jobs as launch/queue/cancel/logs).",
    no_args_is_help=True,
)


def register(app: typer.Typer) -> None:
    app.add_typer(jobs_app, name="jobs")


@jobs_app.command("launch")
def jobs_launch(
    entrypoint: Entrypoint = None,
    name: sky_flags.Name = None,
    workdir: sky_flags.Workdir = None,
    git_url: sky_flags.GitUrl = None,
    git_ref: sky_flags.GitRef = None,
    config: sky_flags.Config = None,
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
    disk_size: sky_flags.DiskSize = None,
    disk_tier: sky_flags.DiskTier = None,
    network_tier: sky_flags.NetworkTier = None,
    image_id: sky_flags.ImageId = None,
    ports: sky_flags.Ports = None,
    job_recovery: sky_flags.JobRecovery = None,
    yes: sky_flags.Yes = False,
    async_call: sky_flags.Async = False,
    detach: Annotated[
        bool, typer.Option("--detach-run", "--detach", "-d", help="Submit and return.")
    ] = False,
    api_url: ApiUrl = None,
    api_key: ApiKey = None,
) -> None:
    """Launch a managed job: recovered from preemptions, failing over between places."""
    launch(
        entrypoint=entrypoint,
        name=name,
        workdir=workdir,
        git_url=git_url,
        git_ref=git_ref,
        config=config,
        env=env,
        env_file=env_file,
        secret=secret,
        gpus=gpus,
        cpus=cpus,
        memory=memory,
        instance_type=instance_type,
        num_nodes=num_nodes,
        use_spot=use_spot,
        infra=infra,
        cloud=cloud,
        region=region,
        zone=zone,
        disk_size=disk_size,
        disk_tier=disk_tier,
        network_tier=network_tier,
        image_id=image_id,
        ports=ports,
        job_recovery=job_recovery,
        no_setup=False,
        detach_setup=False,
        retry_until_up=False,
        dryrun=False,
        yes=yes,
        async_call=async_call,
        detach=detach,
        minimize="cost",
        clouds=None,
        notify_slack=None,
        notify_email=None,
        deadline=None,
        hours=None,
        cluster=None,
        fast=False,
        idle_minutes=None,
        down=False,
        wait_for=None,
        clone_disk_from=None,
        api_url=api_url,
        api_key=api_key,
    )


@jobs_app.command("queue")
def jobs_queue(
    skip_finished: sky_flags.SkipFinished = False,
    all_users: sky_flags.AllUsers = False,
    verbose: sky_flags.Verbose = False,
    refresh: sky_flags.Refresh = False,
    show_all: Annotated[
        bool, typer.Option("--all", help="Every column (skyless always shows them).")
    ] = False,
    limit: Annotated[int, typer.Option("--limit", min=1, max=1000, help="At most this many jobs.")] = 50,
    as_json: Annotated[bool, typer.Option("--json", help="Print the jobs as JSON.")] = False,
    api_url: ApiUrl = None,
    api_key: ApiKey = None,
) -> None:
    """Your managed jobs, newest first (as `sky jobs queue`)."""
    del verbose, show_all  # the table already has every column
    if refresh:
        sky_flags.note(sky_flags.REFRESH_NOTE)
    job_commands.queue(
        clusters=None,
        skip_finished=skip_finished,
        all_jobs=False,
        all_users=all_users,
        state=None,
        since=None,
        name=None,
        limit=limit,
        as_json=as_json,
        api_url=api_url,
        api_key=api_key,
    )


@jobs_app.command("cancel")
def jobs_cancel(
    job_ids: Annotated[
        list[str] | None,
        typer.Argument(metavar="[JOB_ID]...", help="Job ids: numbers (1 2, as sky's) or job-…."),
    ] = None,
    name: Annotated[
        str | None, typer.Option("--name", "-n", help="The job of this name that has not ended.")
    ] = None,
    every: Annotated[
        bool, typer.Option("--all", "-a", help="Every job of yours that has not ended.")
    ] = False,
    all_users: sky_flags.AllUsers = False,
    yes: sky_flags.Yes = False,
    async_call: sky_flags.Async = False,
    api_url: ApiUrl = None,
    api_key: ApiKey = None,
) -> None:
    """Cancel managed jobs by id, by name (-n) or all of yours (-a), as `sky jobs cancel`."""
    del yes, async_call  # skyless never asks, and a cancel is accepted at once
    if all_users:
        sky_flags.note(sky_flags.ALL_USERS_ACT_NOTE)
        every = True
    if sum(bool(x) for x in (job_ids, name, every)) != 1:
        errors.print("[red]error:[/red] give job ids, or -n NAME, or --all (one of them)")
        raise typer.Exit(2)
    if name is not None:
        with client_session(api_url, api_key) as client:
            job_ids = [_live_job_named(client, name)]
    job_commands.cancel(
        job_ids=job_ids,
        all_jobs=every,
        all_users=False,
        yes=True,
        async_call=False,
        api_url=api_url,
        api_key=api_key,
    )


@jobs_app.command("logs")
def jobs_logs(
    job_id: Annotated[
        str | None, typer.Argument(help="A job id: its number or job-… (none: give -n NAME).")
    ] = None,
    name: Annotated[str | None, typer.Option("--name", "-n", help="The newest job of this name.")] = None,
    follow: Annotated[
        bool, typer.Option("--follow/--no-follow", help="Keep reading until the job ends (the default).")
    ] = True,
    tail: Annotated[
        int, typer.Option("--tail", min=0, help="Start with the last N lines of the log so far (0: all).")
    ] = 0,
    controller: Annotated[
        bool, typer.Option("--controller", help="The controller's log (skyless has no controller).")
    ] = False,
    api_url: ApiUrl = None,
    api_key: ApiKey = None,
) -> None:
    """A managed job's log, followed until it ends unless --no-follow (as `sky jobs logs`)."""
    if controller:
        errors.print(
            "[red]error:[/red] --controller: skyless has no controller VM; the job's timeline is in "
            "`skyless status JOB_ID`"
        )
        raise typer.Exit(2)
    if (job_id is None) == (name is None):
        errors.print("[red]error:[/red] give a job id or -n NAME")
        raise typer.Exit(2)
    if name is not None:
        with client_session(api_url, api_key) as client:
            job_id = _newest_job_named(client, name)
    assert job_id is not None
    job_commands.logs(
        job_id=job_id, cluster_job=None, rank=None, follow=follow, tail=tail, api_url=api_url, api_key=api_key
    )


def _live_job_named(client: SkylessClient, name: str) -> str:
    """The one job named exactly `name` that has not ended; a UserError for none or several (SkyPilot
    refuses several too)."""
    live = [
        j.job_id
        for j in client.list_jobs(name=name, limit=1000)
        if j.name == name and j.state in {state.value for state in LIVE}
    ]
    if not live:
        raise UserError(f"no job named {name} that has not ended", field="--name")
    if len(live) > 1:
        raise UserError(
            f"several jobs are named {name}: {', '.join(live)}", field="--name", hint="cancel by id"
        )
    return live[0]


def _newest_job_named(client: SkylessClient, name: str) -> str:
    found = [j.job_id for j in client.list_jobs(name=name, limit=1000) if j.name == name]
    if not found:
        raise UserError(f"no job named {escape(name)}", field="--name")
    return found[0]
