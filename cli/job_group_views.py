"""How `status` and `logs` show a job group: each task a job of its own, launched together."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from cli.log_streams import LogStreams

if TYPE_CHECKING:  # the API client and its models load when a verb calls the API, not with the command
    from cli.api_client import SkylessClient
    from shared.api.models import JobDetail


def print_group_tasks(console: Console, job: JobDetail) -> None:
    """The group's tasks (or, for a task, the group it belongs to)."""
    if job.group_id:
        console.print(f"  task of job group {escape(job.group_id)} (`skyless status {escape(job.group_id)}`)")
    if not job.group:
        return
    table = Table(title="job group: tasks launched together, each on its own cluster", show_edge=False)
    for column in ("TASK", "JOB", "ROLE", "STATE", "CLOUD/REGION", "INSTANCE", "COST", "REASON"):
        table.add_column(column, overflow="fold")
    for task in job.group:
        table.add_row(
            escape(task.task),
            task.job_id,
            "primary" if task.primary else "auxiliary",
            task.state,
            "/".join(p for p in (task.cloud, task.region) if p) or "-",
            task.instance_type or "-",
            f"${task.cost:.4f}",
            escape(task.reason or ""),
        )
    console.print(table)


def follow_group_logs(client: SkylessClient, job: JobDetail, console: Console, *, follow: bool) -> None:
    """Every task's log, each line prefixed `[task]`, read in turn until each task ends (with `follow`)."""
    streams = {task.task: LogStreams(client, task.job_id) for task in job.group or []}
    open_lines = {name: "" for name in streams}
    while True:
        read_any = False
        for task in job.group or []:
            stream = streams[task.task]
            text = stream.read(client.get_job(task.job_id))
            if not follow or stream.finished:
                text += stream.flush()
            read_any = read_any or bool(text)
            complete, _, rest = (open_lines[task.task] + text).rpartition("\n")
            open_lines[task.task] = rest
            for line in complete.split("\n") if complete else []:
                console.out(f"[{task.task}] {line}", highlight=False)
        if not follow or all(s.finished for s in streams.values()):
            for name, rest in open_lines.items():
                if rest:
                    console.out(f"[{name}] {rest}", highlight=False)
            return
        if not read_any:
            time.sleep(1.0)
