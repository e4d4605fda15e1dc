"""`skyless gpus` and `skyless catalog import | show`: what the catalog sells, and where it came from.

Exit codes: 0 success, 2 an error the user can fix (an unknown accelerator, a bad catalog folder).
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path
from typing import Annotated, Any

import typer
from rich import box
from rich.console import Console
from rich.table import Table

from cli.console import stderr_console, stdout_console
from shared.catalog import (
    Catalog,
    Offering,
    canonical_name,
    import_skypilot_catalog,
    imported_catalog_dir,
    load_default_catalog,
    read_import_manifest,
    save_imported_catalog,
)
from shared.errors import CatalogError, UserError

errors = stderr_console()


def _console() -> Console:
    return stdout_console()


catalog_app = typer.Typer(help="The offering catalog the optimizer plans with.", no_args_is_help=True)


def register(app: typer.Typer) -> None:
    """Add this area's verbs to the `skyless` command."""
    app.command("gpus")(gpus)
    app.command("show-gpus", help="The same as `gpus` (SkyPilot's name for it).")(gpus)
    app.add_typer(catalog_app, name="catalog")


def _fail(exc: UserError) -> typer.Exit:
    errors.print(f"[red]error:[/red] {exc}", markup=True)
    return typer.Exit(2)


def _print_json(data: object) -> None:
    typer.echo(json.dumps(data, indent=2))


def _money(value: float | None) -> str:
    return "-" if value is None else f"{value:.4f}"


def _count(value: float) -> str:
    return f"{value:g}"


def _cheapest(offerings: Iterable[Offering], spot: bool) -> Offering | None:
    priced = [o for o in offerings if o.hourly_price(spot) is not None]
    return min(priced, key=lambda o: (o.hourly_price(spot), o.accelerator_count), default=None)


def accelerator_rows(catalog: Catalog, cloud: str | None) -> list[dict[str, Any]]:
    """One row per (accelerator, cloud): counts sold and the cheapest VM on-demand and spot."""
    rows: list[dict[str, Any]] = []
    for name in catalog.accelerator_names():
        by_cloud: dict[str, list[Offering]] = {}
        for o in catalog.by_accelerator(name):
            if cloud is None or o.cloud == cloud:
                by_cloud.setdefault(o.cloud, []).append(o)
        for cloud_name, offerings in sorted(by_cloud.items()):
            on_demand, spot = _cheapest(offerings, False), _cheapest(offerings, True)
            rows.append(
                {
                    "accelerator": name,
                    "cloud": cloud_name,
                    "counts": sorted({o.accelerator_count for o in offerings}),
                    "cheapest_on_demand": _offer_summary(on_demand, False),
                    "cheapest_spot": _offer_summary(spot, True),
                }
            )
    return rows


def _offer_summary(offering: Offering | None, spot: bool) -> dict[str, Any] | None:
    if offering is None:
        return None
    return {
        "hourly_price": offering.hourly_price(spot),
        "count": offering.accelerator_count,
        "instance_type": offering.instance_type,
        "region": offering.region,
    }


def instance_rows(
    catalog: Catalog, name: str, count: float | None, cloud: str | None
) -> list[dict[str, Any]]:
    """One row per (cloud, instance type, region) selling `name`: cheapest zone's prices."""
    groups: dict[tuple[str, str, float, str], list[Offering]] = {}
    for o in catalog.by_accelerator(name):
        if (cloud is None or o.cloud == cloud) and (count is None or o.accelerator_count == count):
            groups.setdefault((o.cloud, o.instance_type, o.accelerator_count, o.region), []).append(o)
    rows = []
    for (cloud_name, itype, acc_count, region), offerings in groups.items():
        first = offerings[0]
        spot_prices = [o.spot_price for o in offerings if o.spot_price is not None]
        rows.append(
            {
                "cloud": cloud_name,
                "instance_type": itype,
                "accelerator": first.accelerator,
                "count": acc_count,
                "accelerator_memory_gib": first.accelerator_memory_gib,
                "vcpus": first.vcpus,
                "memory_gib": first.memory_gib,
                "region": region,
                "zones": sorted({o.zone for o in offerings if o.zone}),
                "hourly_price": min(o.price for o in offerings),
                "hourly_spot_price": min(spot_prices) if spot_prices else None,
            }
        )
    rows.sort(key=lambda r: (r["count"], r["hourly_price"], r["cloud"], r["region"], r["instance_type"]))
    return rows


def _parse_name(text: str) -> tuple[str, float | None]:
    name, _, count = text.partition(":")
    if not count:
        return canonical_name(name), None
    try:
        value = float(count)
    except ValueError:
        value = -1.0
    if value <= 0:
        raise UserError(f"count {count!r} is not a positive number", field="NAME", hint="e.g. A100:8")
    return canonical_name(name), value


def gpus(
    name: Annotated[
        str | None, typer.Argument(help="An accelerator, optionally with a count: A100 or A100:8.")
    ] = None,
    cloud: Annotated[
        str | None, typer.Option("--cloud", help="Only this cloud (aws, gcp, azure, ...).")
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON instead of a table.")] = False,
    show_all: Annotated[
        bool, typer.Option("--all", "-a", help="Every accelerator (skyless always lists them all).")
    ] = False,
) -> None:
    """List accelerators with their counts and cheapest prices; with NAME, where each is sold."""
    del show_all  # `sky show-gpus` lists common ones unless -a; skyless lists every one
    try:
        catalog = load_default_catalog()
        cloud = cloud.lower() if cloud else None
        if cloud is not None and cloud not in catalog.clouds():
            raise UserError(
                f"no offerings from cloud {cloud!r}",
                field="--cloud",
                hint=f"clouds: {', '.join(catalog.clouds())}",
            )
        if name is None:
            rows = accelerator_rows(catalog, cloud)
            if as_json:
                _print_json(rows)
            else:
                _print_accelerators(rows)
            return
        accelerator, count = _parse_name(name)
        rows = instance_rows(catalog, accelerator, count, cloud)
        if not rows:
            where = f" on {cloud}" if cloud else ""
            counts = ", ".join(_count(c) for c in catalog.accelerator_counts(accelerator)) or "none"
            raise UserError(
                f"no offering of {accelerator}{f':{_count(count)}' if count else ''}{where}",
                field="NAME",
                hint=f"{accelerator} counts sold: {counts}; see `skyless gpus` for every accelerator",
            )
        if as_json:
            _print_json(rows)
        else:
            _print_instances(accelerator, rows)
    except UserError as exc:
        raise _fail(exc) from None


def _print_accelerators(rows: list[dict[str, Any]]) -> None:
    table = Table(box=box.SIMPLE_HEAD, title="Accelerators (USD/h for the whole VM, cheapest offering)")
    for column in ("GPU", "CLOUD", "COUNTS", "ON-DEMAND", "SPOT"):
        table.add_column(column, justify="right" if column in ("ON-DEMAND", "SPOT") else "left")
    for row in rows:
        table.add_row(
            row["accelerator"],
            row["cloud"],
            ", ".join(_count(c) for c in row["counts"]),
            _summary_text(row["cheapest_on_demand"]),
            _summary_text(row["cheapest_spot"]),
        )
    _console().print(table)


def _summary_text(summary: dict[str, Any] | None) -> str:
    if summary is None:
        return "-"
    return f"{_money(summary['hourly_price'])} ({_count(summary['count'])}x)"


def _print_instances(accelerator: str, rows: list[dict[str, Any]]) -> None:
    table = Table(
        box=box.SIMPLE_HEAD, title=f"{accelerator}: where it is sold (USD/h for the VM, cheapest zone)"
    )
    table.add_column("CLOUD", no_wrap=True)
    table.add_column("INSTANCE TYPE", no_wrap=True)
    table.add_column("GPUS", no_wrap=True)
    table.add_column("CPUS/MEM", justify="right", no_wrap=True)
    table.add_column("REGION", no_wrap=True)
    table.add_column("ON-DEMAND", justify="right", no_wrap=True)
    table.add_column("SPOT", justify="right", no_wrap=True)
    for r in rows:
        memory = r["accelerator_memory_gib"]
        gpus = f"{_count(r['count'])}x" + ("" if memory is None else f" {memory:g}GB")
        table.add_row(
            r["cloud"],
            r["instance_type"],
            gpus,
            f"{r['vcpus']:g} / {r['memory_gib']:g}",
            r["region"],
            _money(r["hourly_price"]),
            _money(r["hourly_spot_price"]),
        )
    _console().print(table)


@catalog_app.command("import")
def import_catalog(
    folder: Annotated[Path, typer.Argument(help="A SkyPilot catalog folder (v8 layout: <cloud>/vms.csv).")],
) -> None:
    """Import a SkyPilot catalog; its clouds replace the built-in rows for those clouds in later plans
    (the local runtime's too, from its next plan: no restart)."""
    import time

    started = time.monotonic()
    console = _console()
    try:
        files = sorted(p for p in folder.glob("*/vms.csv") if p.is_file()) if folder.is_dir() else []
        clouds = [p.parent.name.lower() for p in files] or None  # none: the importer says what is wrong
        offerings = []
        for index, cloud in enumerate(clouds or [None]):
            if cloud is not None:
                size = files[index].stat().st_size / 1e6
                console.print(f"[{index + 1}/{len(files)}] reading {cloud}/vms.csv ({size:.1f} MB) …")
            offerings += import_skypilot_catalog(folder, None if cloud is None else {cloud})
        if not offerings:
            raise CatalogError("no offerings found", file=str(folder))
        console.print(f"writing {len(offerings)} offerings …")
        written = save_imported_catalog(offerings, source=str(folder.resolve()))
    except UserError as exc:
        raise _fail(exc) from None
    for cloud, rows in written.items():
        console.print(f"imported {rows} {cloud} offerings")
    console.print(f"stored in {imported_catalog_dir()} ({time.monotonic() - started:.1f} s)")
    console.print("plan, launch and the local runtime use it from now on (no restart needed)")


@catalog_app.command("show")
def show_catalog(
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON instead of a table.")] = False,
) -> None:
    """Say which catalog plans use: its sources, and rows, regions and accelerators per cloud."""
    try:
        catalog = load_default_catalog()
        manifest = read_import_manifest()
    except UserError as exc:
        raise _fail(exc) from None
    clouds = []
    for cloud in catalog.clouds():
        offerings = catalog.by_cloud(cloud)
        imported = manifest.get(cloud) if catalog.origins.get(cloud, "").startswith("imported") else None
        clouds.append(
            {
                "cloud": cloud,
                "source": catalog.origins.get(cloud),
                "imported_from": imported.get("source") if imported else None,
                "imported_at": imported.get("imported_at") if imported else None,
                "rows": len(offerings),
                "regions": len(catalog.regions(cloud)),
                "accelerators": len({o.accelerator for o in offerings if o.accelerator}),
            }
        )
    if as_json:
        _print_json({"sources": list(catalog.sources), "rows": len(catalog), "clouds": clouds})
        return
    _console().print(f"catalog: {len(catalog)} offerings from {', '.join(catalog.sources) or 'nothing'}")
    table = Table(box=box.SIMPLE_HEAD)
    for column in ("CLOUD", "SOURCE", "ROWS", "REGIONS", "ACCELERATORS", "IMPORTED"):
        table.add_column(column, justify="right" if column in ("ROWS", "REGIONS", "ACCELERATORS") else "left")
    for c in clouds:
        since = f"{c['imported_from']} at {c['imported_at']}" if c["imported_from"] else ""
        table.add_row(
            str(c["cloud"]),
            str(c["source"] or ""),
            str(c["rows"]),
            str(c["regions"]),
            str(c["accelerators"]),
            since,
        )
    _console().print(table)
