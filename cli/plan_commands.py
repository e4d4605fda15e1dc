"""`skyless plan`: what a task file would run on and what it would cost, planned locally (no API).

Shows, per task, the chosen candidate and the best candidate of every cloud (like `sky launch
--dryrun`); `--json` prints one object instead. Exit codes: 0 planned, 2 a user error (the task
file, the catalog folder, a flag, or nothing in the catalog fits), printed without a traceback;
with `--json` the error is the object `{"error": ..., "message": ..., "file", "line", "field", "hint"}`.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.markup import escape
from rich.table import Table

from cli import sky_config, task_options
from cli.console import stderr_console, stdout_console
from cli.data_options import SKYLESS_ONLY, DataSize, data_sizes
from cli.launch_prep import local_workdirs
from cli.runtime_notes import conda_note
from shared.errors import NoOfferingError, UserError
from shared.optimizer import Candidate, Plan
from shared.task import Overridden, apply_overrides, read_task_file

JSON_CANDIDATES = 20  # candidates per task in --json; the failover list itself holds up to 100

console = stdout_console()
errors = stderr_console()


def register(app: typer.Typer) -> None:
    """Add this area's verbs to the `skyless` command."""
    app.command("plan")(plan)


def plan(
    file: Annotated[Path, typer.Argument(help="The task file (SkyPilot YAML, one task or a pipeline).")],
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
    minimize: Annotated[str, typer.Option("--minimize", help="cost or time.")] = "cost",
    catalog_dir: Annotated[
        Path | None,
        typer.Option("--catalog", help="Plan with this SkyPilot catalog folder (<cloud>/vms.csv)."),
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
    data_size: DataSize = None,
) -> None:
    """Plan a task file like `sky launch --dryrun`: where each task runs, why, and at what price.

    Shows the best offering of every cloud and why a cloud has none. Nothing is launched, and null
    secrets may be left for launch. With --deadline and --hours: also the deadline policy's expected cost
    against all on-demand."""
    text = ""
    applied = Overridden("", frozenset(), False)
    try:
        text = read_task_file(file)
        envs = task_options.env_values(env, env_file)
        secrets = task_options.pairs(secret, "--secret")
        overrides = task_options.resource_overrides(
            gpus=gpus, cpus=cpus, memory=memory, instance_type=instance_type, num_nodes=num_nodes,
            use_spot=use_spot, infra=infra, cloud=cloud, region=region, zone=zone,
        )  # fmt: skip
        pipeline = _load(text, file, envs, secrets)
        applied = apply_overrides(text, overrides)
        if applied.fields:
            pipeline = _load(applied.text, file, envs, secrets)
        local_workdirs(pipeline, str(file), text=text)  # launch uploads it: a missing one fails here too
        catalog, enabled = _catalog(catalog_dir, clouds, minimize)
        from shared.optimizer import plan_pipeline

        asked = None if enabled is None else sorted(enabled)
        configured = sky_config.apply_sky_config(applied.text, str(file), asked, plans_here=True)
        if configured.text != applied.text:  # the config's labels and docker.run_options written in
            pipeline = _load(configured.text, file, envs, secrets)
        enabled = None if configured.clouds is None else set(configured.clouds)
        prices = team_prices(configured)
        data_notes, sources = located_data(pipeline, data_sizes(data_size))
        result = plan_pipeline(
            pipeline, catalog, enabled_clouds=enabled, minimize=minimize, prices=prices, data=sources
        )
        if prices is not None:
            from shared.optimizer import team_catalog

            catalog = team_catalog(catalog, prices.contracts)  # the rows below at the team's prices
        estimate = deadline_estimate(result, catalog, deadline, hours)
    except UserError as error:
        if isinstance(error, NoOfferingError):
            from shared.optimizer import locate_plan_error

            locate_plan_error(error, text, str(file), applied.fields)
        if as_json:
            typer.echo(json.dumps(error.to_dict(), indent=2))
        else:
            errors.print(f"[red]error:[/red] {escape(str(error))}")
        raise typer.Exit(2) from None
    notes = result.notes + data_notes + plan_notes(pipeline, ignored_overrides=applied.ignored)
    notes += configured.notes
    notes += [n for n in [conda_note(text, str(file))] if n]
    from shared.optimizer import why_chosen

    reasons = why_chosen(pipeline, result, catalog, enabled_clouds=enabled)
    per_cloud = [_best_per_cloud(task, result.objective, catalog, enabled) for task in pipeline.tasks]
    if as_json:
        body = plan_to_json(result, notes)
        body["why"] = reasons
        body["contracts"] = result.notes
        body["missing_clouds"] = [missing for _, missing in per_cloud]
        body["secrets_needed"] = needed_secrets(pipeline)
        if estimate is not None:
            body["deadline"] = estimate
        typer.echo(json.dumps(body, indent=2))
        return
    _print_plan(result, pipeline, per_cloud, reasons)
    if estimate is not None:
        _print_estimate(estimate)
    for note in notes:
        console.print(f"[yellow]note:[/yellow] {escape(note)}")


def team_prices(configured: sky_config.Applied) -> Any:
    """The contracts the config files declare, every reserved node counted free: `plan` runs here, without
    the live jobs a launch counts against each reservation (the notes say so)."""
    if not configured.contracts:
        return None
    from shared.optimizer import TeamPrices

    return TeamPrices(configured.contracts, at=datetime.now(UTC))


def located_data(pipeline: Any, declared: dict[str, float] | None) -> tuple[list[str], list[Any]]:
    """(notes, sources): with --data-size, the S3 buckets the task reads, placed with the user's own AWS
    credentials (shared.storage.gravity); without it, nothing is asked of any store, and a note says so."""
    from shared.storage.gravity import locate_with_own_credentials, mounts_buckets

    if not declared:
        if not mounts_buckets(pipeline):
            return [], []
        return [
            "file_mounts: the egress of reading these buckets is not priced here without --data-size "
            "(launch --dryrun asks the control plane, which places and sizes them)"
        ], []
    data = locate_with_own_credentials(pipeline, declared)
    return [*data.notes, SKYLESS_ONLY], data.sources


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


def _load(text: str, file: Path, envs: dict[str, str], secrets: dict[str, str]) -> Any:
    from shared.task import load_pipeline

    return load_pipeline(
        text, filename=str(file), env_overrides=envs, secret_overrides=secrets, defer_secrets=True
    )


def needed_secrets(pipeline: Any) -> list[dict[str, Any]]:
    """[{task, secrets}] of null secrets nobody gave a value: `launch` needs them, `plan` does not."""
    return [
        {"task": pipeline.tasks[index].name or f"task #{index + 1}", "secrets": names}
        for index, names in sorted(pipeline.deferred_secrets.items())
    ]


def plan_notes(pipeline: Any, *, ignored_overrides: bool = False) -> list[str]:
    """What the user should know beside the plan: fields not acted on, secrets launch will need, where
    a container runs (and that this machine cannot run it, for the local runtime)."""
    from shared.task import container_notes, pipeline_notes

    notes = pipeline_notes(pipeline)
    containers = container_notes(pipeline)
    notes += containers
    if containers:
        from shared.clouds.containers import local_runtime

        if local_runtime() is None:
            notes.append(
                "resources.image_id: neither docker nor podman works on this machine: the local runtime "
                "refuses this task at launch (a deployed stack runs it on the cloud's VMs)"
            )
    for needed in needed_secrets(pipeline):
        flags = " ".join(f"--secret {name}=..." for name in needed["secrets"])
        notes.append(
            f"{needed['task']}: secrets {', '.join(needed['secrets'])} have no value: planned without them; "
            f"launch needs them ({flags})"
        )
    if ignored_overrides:
        notes.append(
            "resource overrides ignored: the file holds several tasks (sky launch ignores them too); "
            "set resources in each task"
        )
    return notes


def _catalog(catalog_dir: Path | None, clouds: str | None, minimize: str) -> tuple[Any, set[str] | None]:
    if minimize not in ("cost", "time"):
        raise UserError(f"must be cost or time, not {minimize!r}", field="--minimize")
    from shared.catalog import Catalog, load_default_catalog

    if catalog_dir is not None:
        from shared.catalog import load_skypilot_folder

        catalog = Catalog(load_skypilot_folder(catalog_dir), sources=[str(catalog_dir)])
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
    return catalog, enabled


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
        **({"list_price": c.list_price} if c.list_price is not None else {}),
        **({"reservation": c.reservation} if c.reservation is not None else {}),
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


def _row(c: Candidate, chosen: bool | None = None, task: str | None = None) -> list[str]:
    mark = [] if chosen is None else ["✔" if chosen else ""]
    return [
        *([] if task is None else [task]),
        c.cloud,
        c.instance_type,
        f"{c.vcpus:g}",
        f"{c.memory_gib:g}",
        _accelerators(c),
        c.zone or c.region,
        "spot" if c.use_spot else "on-demand",
        f"{c.hourly_price:.2f}",
        f"{c.estimated_cost:.2f}",
        *mark,
    ]


_COLUMNS = (
    "CLOUD",
    "INSTANCE",
    "vCPUs",
    "Mem(GB)",
    "ACCELERATORS",
    "ZONE/REGION",
    "MARKET",
    "$/h",
    "COST ($)",
)
_NUMBERS = ("vCPUs", "Mem(GB)", "$/h", "COST ($)")


def _table(title: str, with_mark: bool, with_task: bool = False) -> Table:
    table = Table(title=title, title_justify="left")
    for column in (("TASK",) if with_task else ()) + _COLUMNS:
        table.add_column(column, justify="right" if column in _NUMBERS else "left", overflow="fold")
    if with_mark:
        table.add_column("")
    return table


def _best_per_cloud(
    task: Any, objective: str, catalog: Any, enabled: set[str] | None
) -> tuple[list[Candidate], dict[str, str]]:
    """The best candidate of each cloud that has one, and why each other cloud of the catalog has none."""
    from shared.optimizer import missing_clouds, plan_task

    best: list[Candidate] = []
    for cloud in catalog.clouds():
        if enabled is not None and cloud not in enabled:
            continue
        try:
            best.append(
                plan_task(
                    task.resource_choice(), task.num_nodes, catalog,
                    enabled_clouds={cloud}, minimize=objective, max_candidates=1,
                )[0]
            )  # fmt: skip
        except NoOfferingError:
            continue
    listed = {c.cloud for c in best}
    missing = missing_clouds(task, catalog, listed=listed, enabled_clouds=enabled, minimize=objective)
    return best, missing


def _print_plan(
    result: Plan,
    pipeline: Any,
    per_cloud: list[tuple[list[Candidate], dict[str, str]]],
    reasons: list[str],
) -> None:
    objective = "cost" if result.objective == "cost" else "time (ties by cost)"
    console.print(f"[bold]Optimizer[/bold]: minimizing {objective}; estimates assume 1 hour per task.")
    group = getattr(pipeline, "execution", "serial") == "parallel"
    title = f"Chosen plan: job group {pipeline.name}, tasks launched together" if group else "Chosen plan"
    chosen = _table(title, with_mark=False, with_task=True)
    for i, t in enumerate(result.tasks):
        chosen.add_row(*_row(t.chosen, task=t.task_name or f"#{i + 1}"))
    console.print(chosen)
    for reason in reasons:
        console.print(f"[bold]Why[/bold] {escape(reason)}", soft_wrap=True)
    for note in result.notes:
        console.print(f"[bold]Contract[/bold] {escape(note)}", soft_wrap=True)
    for task_plan, (best, missing) in zip(result.tasks, per_cloud, strict=True):
        name = task_plan.task_name or "task"
        table = _table(f"Best per cloud for {name} ({task_plan.num_nodes} node(s))", with_mark=True)
        for candidate in best:
            table.add_row(*_row(candidate, chosen=candidate == task_plan.chosen))
        console.print(table)
        for cloud, why in missing.items():
            console.print(f"  [dim]{escape(cloud)}: no candidate: {escape(why)}[/dim]", soft_wrap=True)
    if group:
        console.print(escape(group_summary(pipeline)), soft_wrap=True)
    elif len(result.tasks) > 1 or result.egress_cost:
        console.print(f"Egress (data moved between clouds): ${result.egress_cost:.2f}")
    console.print(f"[bold]Estimated total: ${result.total_cost:.2f}[/bold]")


def group_summary(pipeline: Any) -> str:
    """What `plan` says of a job group: launched together, each task on its own cluster, who ends it."""
    names = [task.name for task in pipeline.tasks]
    primary = pipeline.primary_tasks or names
    auxiliary = [name for name in names if name not in primary]
    text = (
        f"Job group: {len(names)} tasks launched together, each on its own cluster (no egress between them)"
    )
    if auxiliary:
        delay = pipeline.termination_delay
        text += (
            f"; when {', '.join(primary)} end(s), {', '.join(auxiliary)} stop(s)"
            f" after termination_delay {delay if delay is not None else 0}"
        )
    else:
        text += "; the group ends when every task has ended"
    return text + "."
