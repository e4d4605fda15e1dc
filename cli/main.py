"""The `skyless` command: each area of the product registers its own verbs, loaded when one of them runs.

`skyless --help` lists every verb from the table below without importing any area, so it loads typer and
nothing of ours; `skyless status` imports job_commands alone. Help and usage errors are click's plain text,
as `sky`'s are: typer's rich panels would load rich's markdown and syntax modules (~0.1 s of CPU) for every
`--help`. tests/unit/test_cli_lazy_verbs.py holds the
table to what the areas register.
"""

from __future__ import annotations

import functools
import importlib
import sys
from typing import TYPE_CHECKING, Any

import typer
import typer.main
from typer.core import TyperCommand, TyperGroup

from cli import hand_ctrl_c_to_the_verb, is_interrupt
from cli.typer_params import defer_adapters

if TYPE_CHECKING:  # typer's own (vendored) click, which its groups are built on
    from typer._click import Command, Context, HelpFormatter

# verb -> (the module under cli/ whose register() adds it, the first paragraph of its help), in help order.
VERBS: dict[str, tuple[str, str]] = {
    "plan": (
        "plan_commands",
        "Plan a task file like `sky launch --dryrun`: where each task runs, why, and at what price.",
    ),
    "gpus": (
        "catalog_commands",
        "List accelerators with their counts and cheapest prices; with NAME, where each is sold.",
    ),
    "show-gpus": ("catalog_commands", "The same as `gpus` (SkyPilot's name for it)."),
    "launch": (
        "launch_command",
        "Submit a task file or a command as a managed job, then follow its states and logs until it ends\n"
        "(with -c: on a named cluster, made if new).",
    ),
    "queue": (
        "job_commands",
        "Your jobs, newest first: where they run, what they cost, how they were submitted; with cluster\n"
        "names, each cluster's job queue (SkyPilot's `sky queue`).",
    ),
    "status": (
        "job_commands",
        "Your clusters and jobs; or one job (place, plan, timeline), or one cluster (nodes, timeline).",
    ),
    "logs": (
        "job_commands",
        "A job's log: every node's, lines prefixed `(head, rank=0)`, `(worker1, rank=1)`, … (or --rank N).",
    ),
    "cancel": (
        "job_commands",
        "Cancel jobs; their nodes are torn down. Cancelling a cancelled job again is harmless. "
        "With a cluster\nname first: jobs of that cluster (`skyless cancel NAME 3`, "
        "`skyless cancel NAME --all`; the cluster\nalone: its latest job that has not ended, "
        "as `sky cancel NAME`).",
    ),
    "exec": (
        "exec_command",
        "Run a task file or a command on an UP cluster: no provisioning, no setup (SkyPilot's `exec`).",
    ),
    "stop": (
        "cluster_commands",
        "Stop clusters and wait until they are STOPPED: their nodes stop, their disks stay (`skyless start`\n"
        "brings them back). With --async: return once the stop is asked for.",
    ),
    "start": (
        "cluster_commands",
        "Start stopped clusters (same nodes, same disks) and wait until they are UP. With --async: return\n"
        "once the start is asked for.",
    ),
    "down": (
        "cluster_commands",
        "Tear clusters down and wait until they are gone: every node terminated, the name free again. With\n"
        "--async: return once the teardown is asked for.",
    ),
    "autostop": (
        "cluster_commands",
        "Stop (with --down: tear down) clusters once idle this long: no job, no open shell.",
    ),
    "ssh": (
        "ssh_commands",
        "A shell on a cluster's node, or run one command there (`skyless ssh dev -- cat marker`).",
    ),
    "cost-report": (
        "cost_commands",
        "What your jobs cost: each attempt on spot or on-demand, what on-demand would have cost, "
        "the savings.",
    ),
    "dashboard": (
        "dashboard_commands",
        "Print the dashboard's URL (the local runtime's, or your deployed API's) and open it.",
    ),
    "check": (
        "check_commands",
        "Check the credentials of each cloud; for the ones that do not work, say what to set or run.",
    ),
    "catalog": ("catalog_commands", "The offering catalog the optimizer plans with."),
    "report": ("report_commands", "Reports over what skyless recorded."),
    "budget": ("budget_commands", "Monthly budgets: notices at 50/80/100 %, then stop (or warn)."),
    "jobs": (
        "managed_jobs_commands",
        "Managed jobs, as `sky jobs ...` (the same jobs as launch/queue/cancel/logs).",
    ),
    "schedule": ("schedule_commands", "Run a task file on a cron schedule."),
    "notify": ("notify_commands", "Slack and email notifications about your jobs."),
    "local": (
        "local_commands",
        "The local control plane (moto, the API, the dispatcher, the local cloud) on this machine.",
    ),
    "admin": ("admin_commands", "Administer users, teams and bucket grants (an admin key)."),
    "team": ("team_commands", "Your teams: every member's jobs and clusters, read-only."),
    "storage": ("storage_commands", "Buckets skyless made for your tasks, as `sky storage`."),
}


def area_verbs(module: str, verb: str | None = None) -> TyperGroup:
    """Every verb one area registers, as click builds them (imports that area and what it needs); with
    `verb`, that verb alone (typer reads every parameter's annotations of what it builds)."""
    area = typer.Typer(rich_markup_mode=None)  # its groups (`skyless jobs ...`) inherit it
    importlib.import_module(f"cli.{module}").register(area)
    if verb is not None:
        commands = [command for command in area.registered_commands if command.name == verb]
        groups = [group for group in area.registered_groups if group.name == verb]
        if commands or groups:
            area.registered_commands, area.registered_groups = commands, groups
    group = typer.main.get_group(area)
    defer_adapters(group)
    _verbs_own_ctrl_c(group)
    return group


def _verbs_own_ctrl_c(command: Command) -> None:
    """Each verb's callback takes Ctrl-C over from the start-up handler (cli/__init__.py) as it starts."""
    subcommands = getattr(command, "commands", None)
    if subcommands is not None:  # a group: its verbs' callbacks, not its own
        for sub in subcommands.values():
            _verbs_own_ctrl_c(sub)
        return
    callback = command.callback
    if callback is None:
        return

    @functools.wraps(callback)
    def run(*args: Any, **kwargs: Any) -> Any:
        hand_ctrl_c_to_the_verb()
        try:
            return callback(*args, **kwargs)
        except RuntimeError as error:  # a Ctrl-C the verb did not see as one (cli.is_interrupt)
            if not is_interrupt(error):
                raise
            sys.stderr.write("interrupted\n")
            raise typer.Exit(130) from None

    command.callback = run


class LazyVerbs(TyperGroup):
    """Lists verbs from VERBS; imports an area only to run, or show the help of, one of its verbs."""

    def __init__(self, **attrs: Any) -> None:
        super().__init__(**attrs)
        defer_adapters(self)
        self._verbs: dict[str, TyperGroup] = {}
        self._listing = False

    def list_commands(self, ctx: Context) -> list[str]:
        return list(VERBS)

    def get_command(self, ctx: Context, cmd_name: str) -> Command | None:
        if cmd_name not in VERBS:
            return None
        module, help_text = VERBS[cmd_name]
        if self._listing:
            return TyperCommand(cmd_name, help=help_text)
        if cmd_name not in self._verbs:
            self._verbs[cmd_name] = area_verbs(module, cmd_name)
        return self._verbs[cmd_name].get_command(ctx, cmd_name)

    def format_help(self, ctx: Context, formatter: HelpFormatter) -> None:
        self._listing = True
        try:
            super().format_help(ctx, formatter)
        finally:
            self._listing = False


app = typer.Typer(
    name="skyless",
    cls=LazyVerbs,
    help="Run SkyPilot task files on the cheapest cloud capacity, with a serverless control plane.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
)


@app.callback()
def _skyless() -> None:
    # A group needs a callback when no verb is registered on the Typer itself; the verbs come from LazyVerbs.
    pass
