"""`skyless plan`: what a task file would run on and what it would cost, planned locally (no API).

Shows, per task, the chosen candidate and the best candidate of every cloud (like `sky launch
--dryrun`); `--json` prints one object instead. Exit codes: 0 planned, 2 a user error (the task
file, the catalog folder, a flag, or nothing in the catalog fits), printed without a traceback;
with `--json` the error is the object `{"error": ..., "message": ..., "file", "line", "field", "hint"}`.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.markup import escape
from rich.table import Table

from cli.console import stderr_console, stdout_console
from shared.errors import NoOfferingError, UserError
from shared.optimizer import Candidate, Plan

JSON_CANDIDATES = 20  # candidates per task in --json; the failover list itself holds up to 100

console = stdout_console()
errors = stderr_console()


def register(app: typer.Typer) -> None:
    """Add this area's verbs to the `skyless` command."""
    app.command("plan")(plan)


def plan(
    file: Annotated[Path, typer.Argument(help="The task file (SkyPilot YAML, one task or a pipeline).")],
    env: Annotated[list[str] | None, typer.Option("--env", help="Override an env: K=V (repeatable).")] = None,
    secret: Annotated[
        list[str] | None, typer.Option("--secret", help="Give a secret a value: K=V (repeatable).")
    ] = None,
    minimize: Annotated[str, typer.Option("--minimize", help="cost or time.")] = "cost",
    catalog_dir: Annotated[
        Path | None, typer.Option("--catalog", help="Plan against this SkyPilot catalog folder.")
    ] = None,
    clouds: Annotated[
        str | None, typer.Option("--clouds", help="Only these clouds, comma-separated.")
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON object.")] = False,
    deadline: Annotated[
        str | None, typer.Option("--deadline", help="Estimate a deadline job: 2026-12-01T09:00Z or 36h.")
    ] = None,
    hours: Annotated[
        float | None, typer.Option("--hours", help="With --deadline: the compute the job needs, in hours.")
    ] = None,
) -> None:
    """Plan a task file: the chosen place per task and the best of every cloud, with prices.

    With --deadline and --hours: also the deadline policy's expected cost against all on-demand."""
    try:
        overrides = _pairs(env or [], "--env")
        secrets = _pairs(secret or [], "--secret")
        pipeline, catalog, enabled = _inputs(file, overrides, secrets, minimize, catalog_dir, clouds)
        from shared.optimizer import plan_pipeline

        result = plan_pipeline(pipeline, catalog, enabled_clouds=enabled, minimize=minimize)
        estimate = deadline_estimate(result, catalog, deadline, hours)
    except UserError as error:
        if error.file is None and isinstance(error, NoOfferingError):
            error.file = str(file)
        if as_json:
            typer.echo(json.dumps(error.to_dict(), indent=2))
        else:
            errors.print(f"[red]error:[/red] {escape(str(error))}")
        raise typer.Exit(2) from None
    notes = [
        f"{task.name or f'task #{i + 1}'}: {note}"
        for i, task in enumerate(pipeline.tasks)
        for note in task.unsupported
    ]
    if as_json:
        answer = plan_to_json(result, notes)
        if estimate is not None:
            answer["deadline"] = estimate
        typer.echo(json.dumps(answer, indent=2))
        return
    _print_plan(result, pipeline, catalog, enabled)
    if estimate is not None:
        _print_estimate(estimate)
    for note in notes:
        console.print(f"[yellow]note:[/yellow] {escape(note)}")


def deadline_estimate(
    result: Plan, catalog: Any, deadline: str | None, hours: float | None
) -> dict[str, Any] | None:
    """The deadline policy's expected cost for the plan's first task (UserError for a deadline that
    cannot be met), or None without --deadline/--hours."""
    if deadline is None and hours is None:
        return None
    import time

    from shared.config import Settings
    from shared.jobs.deadlines import deadline_fields, policy_places
    from shared.spot_policy import decide_spot_only, estimate_cost

    now = time.time()
    fields = deadline_fields(Settings.from_env(), deadline, hours, now=now)
    places, _ = policy_places(catalog, result.tasks[0].candidates, [])
    window = fields["deadline_at"] - now
    kwargs = {"total_work": fields["work_seconds"], "deadline_after": window,
              "restart_overhead": fields["restart_overhead"]}  # fmt: skip
    ours = estimate_cost(places, **kwargs)
    spot_only = estimate_cost(places, policy=decide_spot_only, **kwargs)
    return {
        "deadline_hours": round(window / 3600, 2),
        "hours": hours,
        "places": len(places),
        "expected_cost": round(ours.expected_cost, 2),
        "on_demand_cost": round(ours.on_demand_cost, 2),
        "ratio": round(ours.ratio, 3),
        "spot_share": round(ours.spot_share, 3),
        "spot_only_cost": round(spot_only.expected_cost, 2),
        "spot_only_late_runs": spot_only.missed,
        "runs": ours.runs,
        "assumes": f"spot runs ~{ours.mean_run_hours:g} h and outages ~{ours.mean_outage_hours:g} h "
        "per place, independent places",
    }


def _print_estimate(estimate: dict[str, Any]) -> None:
    console.print(
        f"[bold]Deadline[/bold] in {estimate['deadline_hours']:g} h for {estimate['hours']:g} h of compute, "
        f"over {estimate['places']} place(s): expected ${estimate['expected_cost']:.2f} with --deadline, "
        f"{estimate['ratio']:.2f} of all on-demand (${estimate['on_demand_cost']:.2f}); "
        f"{100 * estimate['spot_share']:.0f} % of the hours on spot; the deadline is kept."
    )
    console.print(
        f"  SkyPilot's fixed spot recovery (no deadline): ${estimate['spot_only_cost']:.2f}, late in "
        f"{estimate['spot_only_late_runs']} of {estimate['runs']} simulated futures. "
        f"(Simulated: {escape(estimate['assumes'])}; `--deadline` is a skyless feature.)"
    )


def _pairs(items: list[str], flag: str) -> dict[str, str]:
    pairs: dict[str, str] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise UserError(f"expected K=V, found {item!r}", field=flag)
        pairs[key] = value
    return pairs


def _inputs(
    file: Path,
    overrides: dict[str, str],
    secrets: dict[str, str],
    minimize: str,
    catalog_dir: Path | None,
    clouds: str | None,
) -> tuple[Any, Any, set[str] | None]:
    if minimize not in ("cost", "time"):
        raise UserError(f"must be cost or time, not {minimize!r}", field="--minimize")
    from shared.catalog import Catalog, load_default_catalog
    from shared.task import load_pipeline_file

    pipeline = load_pipeline_file(file, env_overrides=overrides, secret_overrides=secrets)
    if catalog_dir is not None:
        from shared.catalog import import_skypilot_catalog

        catalog = Catalog(import_skypilot_catalog(catalog_dir), sources=[str(catalog_dir)])
    else:
        catalog = load_default_catalog()
    enabled = None
    if clouds is not None:
        enabled = {c.strip().lower() for c in clouds.split(",") if c.strip()}
        unknown = sorted(enabled - set(catalog.clouds()))
        if unknown or not enabled:
            raise UserError(
                f"no offerings for {', '.join(unknown) or 'an empty list'} in the catalog",
                field="--clouds",
                hint=f"clouds in the catalog: {', '.join(catalog.clouds())}",
            )
    return pipeline, catalog, enabled


def candidate_to_json(c: Candidate) -> dict[str, Any]:
    return {
        "cloud": c.cloud,
        "region": c.region,
        "zone": c.zone,
        "instance_type": c.instance_type,
        "accelerators": {c.accelerator: c.accelerator_count} if c.accelerator else None,
        "vcpus": c.vcpus,
        "memory_gib": c.memory_gib,
        "spot": c.use_spot,
        "hourly_price": c.hourly_price,
        "num_nodes": c.num_nodes,
        "estimated_hours": c.estimated_hours,
        "estimated_cost": c.estimated_cost,
    }


def plan_to_json(result: Plan, notes: list[str]) -> dict[str, Any]:
    """The `--json` object: per task, the chosen candidate and the head of its failover list."""
    return {
        "objective": result.objective,
        "total_cost": result.total_cost,
        "egress_cost": result.egress_cost,
        "candidates_cap": JSON_CANDIDATES,
        "tasks": [
            {
                "name": t.task_name,
                "num_nodes": t.num_nodes,
                "chosen": candidate_to_json(t.chosen),
                "candidates": [candidate_to_json(c) for c in t.candidates[:JSON_CANDIDATES]],
                "candidates_truncated": len(t.candidates) > JSON_CANDIDATES,
            }
            for t in result.tasks
        ],
        "notes": notes,
    }


def _accelerators(c: Candidate) -> str:
    if not c.accelerator:
        return "-"
    count = int(c.accelerator_count) if float(c.accelerator_count).is_integer() else c.accelerator_count
    return f"{c.accelerator}:{count}"


def _row(c: Candidate, chosen: bool | None = None) -> list[str]:
    mark = [] if chosen is None else ["✔" if chosen else ""]
    return [
        c.cloud,
        c.instance_type + (" [spot]" if c.use_spot else ""),
        f"{c.vcpus:g}",
        f"{c.memory_gib:g}",
        _accelerators(c),
        c.zone or c.region,
        f"{c.hourly_price:.2f}",
        f"{c.estimated_cost:.2f}",
        *mark,
    ]


_COLUMNS = ("CLOUD", "INSTANCE", "vCPUs", "Mem(GB)", "ACCELERATORS", "ZONE/REGION", "$/h", "COST ($)")
_NUMBERS = ("vCPUs", "Mem(GB)", "$/h", "COST ($)")


def _table(title: str, with_mark: bool) -> Table:
    table = Table(title=title, title_justify="left")
    for column in _COLUMNS:
        table.add_column(column, justify="right" if column in _NUMBERS else "left", overflow="fold")
    if with_mark:
        table.add_column("")
    return table


def _print_plan(result: Plan, pipeline: Any, catalog: Any, enabled: set[str] | None) -> None:
    from shared.optimizer import plan_task

    objective = "cost" if result.objective == "cost" else "time (ties by cost)"
    console.print(f"[bold]Optimizer[/bold]: minimizing {objective}; estimates assume 1 hour per task.")
    chosen = _table("Chosen plan", with_mark=False)
    for t in result.tasks:
        chosen.add_row(*_row(t.chosen))
    console.print(chosen)
    for task, task_plan in zip(pipeline.tasks, result.tasks, strict=True):
        name = task_plan.task_name or "task"
        per_cloud = _table(f"Best per cloud for {name} ({task_plan.num_nodes} node(s))", with_mark=True)
        for cloud in catalog.clouds():
            if enabled is not None and cloud not in enabled:
                continue
            try:
                best = plan_task(
                    task.resource_choice(),
                    task.num_nodes,
                    catalog,
                    enabled_clouds={cloud},
                    minimize=result.objective,
                    max_candidates=1,
                )[0]
            except NoOfferingError:
                continue
            per_cloud.add_row(*_row(best, chosen=best == task_plan.chosen))
        console.print(per_cloud)
    if len(result.tasks) > 1 or result.egress_cost:
        console.print(f"Egress (data moved between clouds): ${result.egress_cost:.2f}")
    console.print(f"[bold]Estimated total: ${result.total_cost:.2f}[/bold]")
