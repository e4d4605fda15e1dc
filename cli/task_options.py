"""The options `plan` and `launch` share, named and applied as `sky launch` names and applies them:
env and secret values, and the resource overrides (shared.task.overrides)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from shared.errors import UserError

if TYPE_CHECKING:
    from shared.task import ResourceOverrides

TASK_PANEL = "Task values"
OVERRIDE_PANEL = "Resource overrides (as in sky launch; one-task files only)"

Env = Annotated[
    list[str] | None,
    typer.Option(
        "--env",
        help="Set an env: K=V (repeatable; overrides the file and --env-file).",
        rich_help_panel=TASK_PANEL,
    ),
]
EnvFile = Annotated[
    Path | None,
    typer.Option("--env-file", help="Envs from a dotenv file (KEY=VALUE lines).", rich_help_panel=TASK_PANEL),
]
Secret = Annotated[
    list[str] | None,
    typer.Option(
        "--secret",
        help="Give a secret its value: K=V (repeatable; never stored in a table).",
        rich_help_panel=TASK_PANEL,
    ),
]
Gpus = Annotated[
    str | None,
    typer.Option(
        "--gpus",
        help="Accelerators per node: A100, A100:8, tpu-v5litepod-16.",
        rich_help_panel=OVERRIDE_PANEL,
    ),
]
Cpus = Annotated[
    str | None,
    typer.Option(
        "--cpus", help="vCPUs per node: 4 (exactly) or 4+ (at least).", rich_help_panel=OVERRIDE_PANEL
    ),
]
Memory = Annotated[
    str | None,
    typer.Option("--memory", help="GiB per node: 32, 32+, or 4x (per vCPU).", rich_help_panel=OVERRIDE_PANEL),
]
InstanceType = Annotated[
    str | None,
    typer.Option("--instance-type", "-t", help="An exact instance type.", rich_help_panel=OVERRIDE_PANEL),
]
NumNodes = Annotated[
    int | None, typer.Option("--num-nodes", min=1, help="Number of nodes.", rich_help_panel=OVERRIDE_PANEL)
]
UseSpot = Annotated[
    bool | None,
    typer.Option(
        "--use-spot/--no-use-spot", help="Spot or on-demand machines.", rich_help_panel=OVERRIDE_PANEL
    ),
]
Infra = Annotated[
    str | None,
    typer.Option(
        "--infra",
        help="cloud, cloud/region or cloud/region/zone; * for any: aws/us-east-1.",
        rich_help_panel=OVERRIDE_PANEL,
    ),
]
Cloud = Annotated[
    str | None,
    typer.Option("--cloud", help="A cloud (older form of --infra).", rich_help_panel=OVERRIDE_PANEL),
]
Region = Annotated[str | None, typer.Option("--region", help="A region.", rich_help_panel=OVERRIDE_PANEL)]
Zone = Annotated[str | None, typer.Option("--zone", help="A zone.", rich_help_panel=OVERRIDE_PANEL)]


def pairs(items: list[str] | None, flag: str) -> dict[str, str]:
    """`["K=V", "NAME", ...]` → {K: V, NAME: $NAME}: a bare name takes its value from this shell, as
    `sky --env/--secret` do; a UserError naming the flag otherwise (a --secret item is not echoed: it may
    be the value itself)."""
    import os

    found: dict[str, str] = {}
    for item in items or []:
        key, sep, value = item.partition("=")
        if not sep and key and key in os.environ:
            found[key] = os.environ[key]
            continue
        if not sep or not key:
            if flag == "--secret":
                raise UserError("expected K=V, or the name of a variable set in this shell", field=flag)
            raise UserError(
                f"expected K=V, or the name of a variable set in this shell, found {item!r}", field=flag
            )
        found[key] = value
    return found


def env_values(env: list[str] | None, env_file: Path | None) -> dict[str, str]:
    """--env-file's values, then --env's on top (as `sky launch` merges them)."""
    values: dict[str, str] = {}
    if env_file is not None:
        from dotenv import dotenv_values

        if not env_file.is_file():
            raise UserError("no such file", file=str(env_file), field="--env-file")
        for key, value in dotenv_values(env_file).items():
            if value is None:
                raise UserError(
                    f"{key} has no value (write {key}=...)", file=str(env_file), field="--env-file"
                )
            values[key] = value
    values.update(pairs(env, "--env"))
    return values


def resource_overrides(
    *,
    gpus: str | None = None,
    cpus: str | None = None,
    memory: str | None = None,
    instance_type: str | None = None,
    num_nodes: int | None = None,
    use_spot: bool | None = None,
    infra: str | None = None,
    cloud: str | None = None,
    region: str | None = None,
    zone: str | None = None,
) -> ResourceOverrides:
    from shared.task import ResourceOverrides

    overrides = ResourceOverrides(
        gpus, cpus, memory, instance_type, num_nodes, use_spot, infra, cloud, region, zone
    )
    overrides.check()
    return overrides
