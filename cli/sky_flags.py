"""The everyday `sky` flags, named and shortened as SkyPilot's CLI names them (sky/client/cli/flags.py and
command.py), for the verbs that take them. Where a serverless control plane does the same thing the flag
is simply honoured; where it cannot, the flag is accepted and `note` says in one line what skyless does
instead (never silently ignored, never "No such option")."""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated, TypeVar

import typer
from rich.markup import escape

from cli.console import stdout_console

SKY_PANEL = "SkyPilot flags"
T = TypeVar("T")

Yes = Annotated[
    bool,
    typer.Option(
        "--yes", "-y", help="Skip confirmation prompts (skyless never asks).", rich_help_panel=SKY_PANEL
    ),
]
Async = Annotated[
    bool,
    typer.Option(
        "--async/--no-async",
        help="Return once the request is accepted (the control plane works on its own).",
        rich_help_panel=SKY_PANEL,
    ),
]
AllClusters = Annotated[
    bool, typer.Option("--all", "-a", help="Every cluster of yours.", rich_help_panel=SKY_PANEL)
]
AllUsers = Annotated[
    bool,
    typer.Option(
        "--all-users",
        "-u",
        help="Every user's (an admin key; any other sees only its own).",
        rich_help_panel=SKY_PANEL,
    ),
]
DryRun = Annotated[
    bool,
    typer.Option(
        "--dryrun", help="Show the plan (places, prices) and launch nothing.", rich_help_panel=SKY_PANEL
    ),
]
Name = Annotated[
    str | None,
    typer.Option("--name", "-n", help="Task name (overrides the file's `name`).", rich_help_panel=SKY_PANEL),
]
Workdir = Annotated[
    str | None,
    typer.Option(
        "--workdir",
        help="Upload this folder as the workdir (overrides the file's).",
        rich_help_panel=SKY_PANEL,
    ),
]
RetryUntilUp = Annotated[
    bool,
    typer.Option(
        "--retry-until-up", "-r", help="Keep retrying until there is capacity.", rich_help_panel=SKY_PANEL
    ),
]
DiskSize = Annotated[
    int | None, typer.Option("--disk-size", min=1, help="OS disk size in GB.", rich_help_panel=SKY_PANEL)
]
DiskTier = Annotated[
    str | None,
    typer.Option("--disk-tier", help="low, medium, high, ultra or best.", rich_help_panel=SKY_PANEL),
]
NetworkTier = Annotated[
    str | None, typer.Option("--network-tier", help="standard or best.", rich_help_panel=SKY_PANEL)
]
ImageId = Annotated[
    str | None, typer.Option("--image-id", help="A machine or docker: image.", rich_help_panel=SKY_PANEL)
]
Ports = Annotated[
    list[str] | None,
    typer.Option("--ports", help="Ports to open: 8080 or 9000-9010 (repeatable).", rich_help_panel=SKY_PANEL),
]
NoSetup = Annotated[
    bool, typer.Option("--no-setup", help="Skip the task's setup.", rich_help_panel=SKY_PANEL)
]
DetachSetup = Annotated[
    bool,
    typer.Option(
        "--detach-setup",
        "-s",
        help="Run setup as part of the job (skyless always does).",
        rich_help_panel=SKY_PANEL,
    ),
]
JobRecovery = Annotated[
    str | None,
    typer.Option(
        "--job-recovery",
        help="Recovery strategy: FAILOVER or EAGER_NEXT_REGION (resources.job_recovery).",
        rich_help_panel=SKY_PANEL,
    ),
]
Verbose = Annotated[
    bool, typer.Option("--verbose", "-v", help="Show all information in full.", rich_help_panel=SKY_PANEL)
]
Refresh = Annotated[
    bool,
    typer.Option(
        "--refresh",
        "-r",
        help="Query the latest states (skyless's are always current).",
        rich_help_panel=SKY_PANEL,
    ),
]
SkipFinished = Annotated[
    bool,
    typer.Option("--skip-finished", "-s", help="Only jobs that have not ended.", rich_help_panel=SKY_PANEL),
]

GitUrl = Annotated[
    str | None,
    typer.Option(
        "--git-url",
        help="Run in a clone of this git repository (the task's workdir).",
        rich_help_panel=SKY_PANEL,
    ),
]
GitRef = Annotated[
    str | None,
    typer.Option(
        "--git-ref", help="With a git workdir: this branch, tag or commit.", rich_help_panel=SKY_PANEL
    ),
]
Config = Annotated[
    list[str] | None,
    typer.Option(
        "--config",
        help="SkyPilot config for this call: a config file, or key=value (repeatable: nested.key=value).",
        rich_help_panel=SKY_PANEL,
    ),
]
WaitFor = Annotated[
    str | None,
    typer.Option(
        "--wait-for",
        help="With -i: what keeps the cluster busy; jobs_and_ssh (what skyless counts).",
        rich_help_panel=SKY_PANEL,
    ),
]
CloneDiskFrom = Annotated[
    str | None,
    typer.Option(
        "--clone-disk-from",
        "--clone",
        help="Start from a stopped cluster's disk (skyless cannot: refused).",
        rich_help_panel=SKY_PANEL,
    ),
]

# One line each: what skyless does instead of what the flag asks SkyPilot to do.
RETRY_NOTE = (
    "--retry-until-up: skyless always waits for capacity and retries with backoff, up to the deployment's "
    "limit (SKYLESS_MAX_WAIT_RETRIES rounds); the flag does not lift that limit"
)
DETACH_SETUP_NOTE = "--detach-setup: setup always runs as part of the job on skyless, so nothing waits on it"
ALL_USERS_NOTE = (
    "--all-users: showing only yours: every user's jobs and clusters need an admin key "
    "(your teams' are at `skyless team jobs|clusters TEAM`)"
)
ALL_USERS_ACT_NOTE = (
    "--all-users: acting on your own only: an admin key lists every user's (`status -u`, `queue -u`) "
    "but stops, tears down and cancels only its own"
)
REFRESH_NOTE = "--refresh: states are already current (node heartbeats and the reconcile sweep keep them)"
ASYNC_NOTE = "--async: returns once the control plane has the request, as -d does"
CLONE_DISK_REFUSAL = (
    "--clone-disk-from: skyless keeps no disk images, so a cluster cannot start from another's disk; "
    "launch it fresh (setup and file_mounts rebuild what the task needs)"
)
WAIT_FOR_OFFERED = "jobs_and_ssh"
WAIT_FOR_SKYPILOT = ("jobs_and_ssh", "jobs", "none")


def wait_for_refusal(value: str | None) -> str | None:
    """Why `--wait-for value` is refused (None: accepted). skyless counts a cluster busy while it has a job or
    an open shell, SkyPilot's default `jobs_and_ssh`; its `jobs` and `none` are not offered."""
    if value is None or value == WAIT_FOR_OFFERED:
        return None
    if value not in WAIT_FOR_SKYPILOT:
        return f"--wait-for: must be one of {', '.join(WAIT_FOR_SKYPILOT)}, not {value}"
    return (
        f"--wait-for: skyless counts a cluster idle only with no job and no open shell (jobs_and_ssh); "
        f"{value} is not offered"
    )


def every_user_or_own(all_users: bool, fetch: Callable[[bool], T]) -> tuple[T, bool]:
    """`fetch(True)` (every user's records) when -u is given and the key is an admin's, else `fetch(False)`
    (the caller's), with ALL_USERS_NOTE when -u was refused; and whether every user's were fetched."""
    if all_users:
        from cli.api_http import ApiError

        try:
            return fetch(True), True
        except ApiError as error:
            if error.status_code != 403:
                raise
            note(ALL_USERS_NOTE)
    return fetch(False), False


def note(text: str) -> None:
    """Say, once and on one line, what skyless does instead of what a SkyPilot flag asks for."""
    stdout_console().print(f"[yellow]note:[/yellow] {escape(text)}", soft_wrap=True)
