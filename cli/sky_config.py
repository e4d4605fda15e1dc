"""SkyPilot's config files (`~/.sky/config.yaml` under a project's `.sky.yaml`, or the file `SKYPILOT_CONFIG`
names), read for the keys that change what a task does, with the SkyPilot keys of skyless's own
`~/.skyless/config.yaml` merged on top, and a call's own `--config` (a file, or `key=value` items) over all of
them, as SkyPilot's `apply_cli_config` lays it over the client config.

Every key read is either applied or named in a note that says why it is not (never silently):

- `allowed_clouds`: plans and launches consider only these clouds (with `--clouds`, both must allow one);
- `aws.labels`, `gcp.labels`, `azure.labels`: put on the task's VMs (under the task's own
  `resources.labels`) when the task can only run on that cloud (a job has one set of labels wherever it runs);
- `docker.run_options`: written into each task that runs in a container (`image_id: docker:...`) and has no
  `config.docker.run_options` of its own, as SkyPilot's task config replaces the file's; its container starts
  with them (shared/task/docker_run_options.py says which options are refused);
- `contracts` (skyless's own key: discounts and reservations, shared/optimizer/contract_terms.py), with
  SkyPilot's `aws|gcp.specific_reservations` (only the listed reservations of that cloud are used) and
  `aws|gcp.prioritize_reservations` (skyless always puts free reserved capacity first): plans price at them;
- the rest (controllers, networks, identities, Kubernetes, the API server, ...) has no skyless meaning: noted.
"""

from __future__ import annotations

import os
import shlex
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from shared.errors import UserError
from shared.optimizer import Contracts, contracts_from_config
from shared.task import RUN_OPTIONS_FIELD, names_a_container, run_option_words, run_options_value

ENV_CONFIG = "SKYPILOT_CONFIG"
ENV_GLOBAL = "SKYPILOT_GLOBAL_CONFIG"
ENV_PROJECT = "SKYPILOT_PROJECT_CONFIG"
PROJECT_FILE = ".sky.yaml"
LABELLED_CLOUDS = ("aws", "gcp", "azure")
RESERVATION_CLOUDS = ("aws", "gcp")  # SkyPilot's `<cloud>.specific_reservations`/`prioritize_reservations`
RESERVATION_KEYS = ("specific_reservations", "prioritize_reservations")
SKYLESS_OWN_KEYS = ("api_url", "api_key")  # skyless's keys in its own file, not SkyPilot's
TASK_KEYS = frozenset({"run", "setup", "resources", "workdir", "file_mounts", "num_nodes", "envs"})

NO_CONTROLLER = "skyless has no controller VM: its control plane is serverless functions"
NETWORK = "skyless launches into each cloud's default network with its own security rules"
IDENTITY = "nodes get skyless's own short-lived, scoped credentials"
# key (top-level, or `section.key`) -> why it is not applied.
NOT_APPLIED: dict[str, str] = {
    "jobs.controller": NO_CONTROLLER,
    "serve.controller": NO_CONTROLLER,
    "jobs.bucket": "skyless uploads workdirs and file mounts to its own bucket",
    "jobs.force_disable_cloud_bucket": "skyless uploads workdirs and file mounts to its own bucket",
    "nvidia_gpus.disable_ecc": "skyless does not change the GPUs' ECC setting",
    "api_server": "skyless talks to its own API (SKYLESS_API_URL or ~/.skyless/config.yaml)",
    "admin_policy": "skyless runs no admin policy",
    "workspaces": "skyless has no workspaces; a user's (or team's) jobs are theirs",
    "active_workspace": "skyless has no workspaces; a user's (or team's) jobs are theirs",
    "kubernetes": "skyless has no Kubernetes cloud",
    "ssh": "skyless has no SSH node pools",
    "slurm": "skyless has no Slurm cloud",
    "provision": "skyless's provisioning has its own timeouts and retries",
    "rbac": "skyless's users and teams are managed with `skyless admin`",
    "daemons": "skyless runs no API-server daemons",
    "db": "skyless keeps its state in DynamoDB",
    "logs": "skyless ships logs to its own bucket",
    "usage_reporting": "skyless reports no usage",
    "experimental": "experimental SkyPilot settings have no skyless equivalent",
}
CLOUD_KEY_REASONS: dict[str, str] = {
    "vpc_name": NETWORK, "use_internal_ips": NETWORK, "ssh_proxy_command": NETWORK,
    "security_group_name": NETWORK, "subnet": NETWORK, "network": NETWORK,
    "force_enable_external_ips": NETWORK,
    "remote_identity": IDENTITY, "use_ssm": IDENTITY,
    "specific_reservations": "SkyPilot has no reservations on this cloud: declare them under contracts",
    "prioritize_reservations": "SkyPilot has no reservations on this cloud: declare them under contracts",
}  # fmt: skip


@dataclass(frozen=True)
class SkyConfig:
    """The merged keys, and where they were read (for the notes)."""

    values: dict[str, Any] = field(default_factory=dict)
    sources: tuple[str, ...] = ()

    @property
    def allowed_clouds(self) -> list[str] | None:
        clouds = self.values.get("allowed_clouds")
        return None if clouds is None else [str(c).strip().lower() for c in clouds]


@dataclass(frozen=True)
class Applied:
    text: str  # the task file, with the config's labels applied
    clouds: list[str] | None  # the clouds to plan on (None: every cloud)
    notes: list[str]  # one per key read that is not applied, and per key applied
    contracts: Contracts = field(default_factory=Contracts)  # discounts and reservations plans price at


def load_sky_config(
    home: Path | None = None, skyless_config: Path | None = None, *, overrides: list[str] | None = None
) -> SkyConfig:
    """SkyPilot's client config as sky/skypilot_config.py layers it: the file `SKYPILOT_CONFIG` names,
    alone; else the user file (`SKYPILOT_GLOBAL_CONFIG`, else `~/.sky/config.yaml`) under the project file
    (`SKYPILOT_PROJECT_CONFIG`, else `./.sky.yaml`). The SkyPilot keys of skyless's own config file go
    on top, then the call's `--config` `overrides`. A file a variable names must exist; a bad file is a
    UserError naming it."""
    home = home or Path.home()
    layers: list[Path] = []
    if os.environ.get(ENV_CONFIG):
        layers.append(_named_file(ENV_CONFIG))
    else:
        user = _named_file(ENV_GLOBAL) if os.environ.get(ENV_GLOBAL) else home / ".sky" / "config.yaml"
        project = _named_file(ENV_PROJECT) if os.environ.get(ENV_PROJECT) else Path(PROJECT_FILE)
        layers += [path for path in (user, project) if path.is_file()]
    values: dict[str, Any] = {}
    for path in layers:
        values = _merged(values, _read(path))
    sources = [str(path) for path in layers]
    if skyless_config is None:
        from cli.client_config import config_path

        skyless_config = config_path()
    if skyless_config.is_file():
        own = {k: v for k, v in _read(skyless_config).items() if k not in SKYLESS_OWN_KEYS}
        if own:
            values = _merged(values, own)
            sources.append(str(skyless_config))
    if overrides:
        source, given = cli_config(overrides)
        values = _merged(values, given)
        sources.append(source)
    _check_allowed_clouds(values, sources)
    return SkyConfig(values, tuple(sources))


def cli_config(items: list[str]) -> tuple[str, dict[str, Any]]:
    """`--config` as SkyPilot's `_compose_cli_config` reads it: one path to a config file (alone), or items
    `nested.key=value`, each value read as YAML. Returns where it came from (for the notes) and the keys."""
    path = Path(items[0]).expanduser()
    if path.is_file():
        if len(items) != 1:
            raise UserError("a config file must be the only --config (as in sky)", field="--config")
        return f"--config {path}", _read(path)
    values: dict[str, Any] = {}
    for item in items:
        key, sep, text = item.partition("=")
        if not sep or not key or not text:
            raise UserError(
                f"expected key=value or a config file that exists, found {item!r}", field="--config"
            )
        try:
            value = yaml.safe_load(text)
        except yaml.YAMLError:
            raise UserError(f"{key}: the value is not valid YAML", field="--config") from None
        for part in reversed(key.split(".")):
            value = {part: value}
        values = _merged(values, value)
    return "--config", values


def _named_file(variable: str) -> Path:
    path = Path(os.environ[variable]).expanduser()
    if not path.is_file():
        raise UserError(f"names {path}, which is not a file", field=variable)
    return path


def apply_sky_config(
    text: str,
    filename: str,
    clouds: list[str] | None,
    config: SkyConfig | None = None,
    *,
    plans_here: bool = False,
) -> Applied:
    """The task text and clouds with the config applied, and a note for every key read. `plans_here`: the
    caller plans on this machine (`plan`), so the config's contracts apply; a launch is planned by the
    deployment, at the contracts an admin set (`skyless admin contracts set`)."""
    config = load_sky_config() if config is None else config
    if not config.values:
        return Applied(text, clouds, [])
    where = " + ".join(config.sources)
    notes: list[str] = []
    effective = _effective_clouds(clouds, config, where)
    if config.allowed_clouds is not None:
        notes.append(f"{where}: allowed_clouds: applied: only {', '.join(effective or [])} considered")
        absent = [c for c in config.allowed_clouds if c not in launchable_clouds()]
        if absent:
            notes.append(f"{where}: allowed_clouds: {', '.join(absent)}: read, not applied: skyless has no "
                         f"such cloud (it launches on {', '.join(launchable_clouds())})")  # fmt: skip
    text, label_notes = _apply_labels(text, filename, effective, config.values, where)
    notes += label_notes
    text, run_option_notes = _apply_run_options(text, config.values, where)
    notes += run_option_notes
    contracts = contracts_from_config(config.values, where)  # checked either way: a bad key is said now
    if plans_here:
        notes += _contract_notes(config.values, contracts, where)
    else:
        notes += _contracts_not_applied(config.values, where)
        contracts = Contracts()
    for key, why in _not_applied(config.values):
        notes.append(f"{where}: {key}: read, not applied: {why}")
    return Applied(text, effective, notes, contracts)


def _contracts_not_applied(values: Mapping[str, Any], where: str) -> list[str]:
    keys = ["contracts"] if "contracts" in values else []
    keys += [f"{cloud}.{key}" for cloud in RESERVATION_CLOUDS for key in RESERVATION_KEYS
             if isinstance(values.get(cloud), dict) and key in values[cloud]]  # fmt: skip
    return [
        f"{where}: {key}: read, not applied here: the deployment plans launches at the contracts an "
        f"admin set (`skyless admin contracts show`); `skyless plan` uses this file's"
        for key in keys
    ]


def _contract_notes(values: Mapping[str, Any], contracts: Contracts, where: str) -> list[str]:
    notes = []
    if "contracts" in values:
        notes.append(
            f"{where}: contracts: applied: {len(contracts.discounts)} discount(s), "
            f"{len(contracts.reservations)} reservation(s) in use; `plan` counts every reserved node free "
            f"(a launch counts what live jobs hold)"
        )
    for cloud in RESERVATION_CLOUDS:
        block = values.get(cloud)
        if isinstance(block, dict) and "specific_reservations" in block:
            notes.append(f"{where}: {cloud}.specific_reservations: applied: only these {cloud} reservations")
        if isinstance(block, dict) and "prioritize_reservations" in block:
            notes.append(
                f"{where}: {cloud}.prioritize_reservations: applied: skyless always plans free reserved "
                f"capacity first, at $0/h (set to {block['prioritize_reservations']})"
            )
    return notes


def _effective_clouds(clouds: list[str] | None, config: SkyConfig, where: str) -> list[str] | None:
    allowed = config.allowed_clouds
    if allowed is None:
        return clouds
    usable = [c for c in allowed if c in launchable_clouds()]
    both = usable if clouds is None else [c for c in clouds if c.lower() in usable]
    if not both:
        given = "" if clouds is None else f"--clouds {','.join(clouds)} and "
        raise UserError(
            f"{given}allowed_clouds [{', '.join(allowed)}] leave no cloud skyless launches on "
            f"({', '.join(launchable_clouds())})",
            file=where,
            field="allowed_clouds",
        )
    return both


def launchable_clouds() -> tuple[str, ...]:
    from shared.clouds import credentials_check

    return tuple(credentials_check.CLOUDS)


def _apply_labels(
    text: str, filename: str, clouds: list[str] | None, values: Mapping[str, Any], where: str
) -> tuple[str, list[str]]:
    wanted = {c: values[c]["labels"] for c in LABELLED_CLOUDS
              if isinstance(values.get(c), dict) and values[c].get("labels")}  # fmt: skip
    if not wanted:
        return text, []
    documents = [d for d in yaml.safe_load_all(text) if d is not None]
    notes: list[str] = []
    changed = False
    for index, task in enumerate(documents):
        if not isinstance(task, dict) or not TASK_KEYS & set(task):
            continue  # a pipeline's header
        name = task.get("name") or f"task #{index + 1}"
        only = _only_cloud(task, clouds)
        for cloud, labels in wanted.items():
            if only != cloud:
                reason = f"it runs only on {only}" if only else "it may run on several clouds"
                notes.append(
                    f"{where}: {cloud}.labels: read, not applied to {name}: {reason}, and skyless puts one "
                    f"set of labels on a job's VMs wherever it lands (pin the cloud, set allowed_clouds, "
                    f"or write resources.labels)"
                )
                continue
            resources = dict(task.get("resources") or {})
            resources["labels"] = {
                **{str(k): str(v) for k, v in labels.items()},
                **(resources.get("labels") or {}),
            }
            task["resources"] = resources
            changed = True
            notes.append(f"{where}: {cloud}.labels: applied to {name} (its own resources.labels win)")
    if not changed:
        return text, notes
    return yaml.safe_dump_all(documents, sort_keys=False), notes


def _apply_run_options(text: str, values: Mapping[str, Any], where: str) -> tuple[str, list[str]]:
    """`docker.run_options` written into each task that runs in a container and gives none of its own
    (SkyPilot's task `config:` replaces the file's value)."""
    value = run_options_value(values)
    if value is None:
        return text, []
    try:
        words = run_option_words(value)
    except ValueError as error:
        raise UserError(str(error), file=where, field="docker.run_options") from None
    documents = [d for d in yaml.safe_load_all(text) if d is not None]
    notes: list[str] = []
    changed = False
    for index, task in enumerate(documents):
        if not isinstance(task, dict) or not TASK_KEYS & set(task):
            continue  # a pipeline's header
        name = task.get("name") or f"task #{index + 1}"
        config: dict[str, Any] = task["config"] if isinstance(task.get("config"), dict) else {}
        if run_options_value(config) is not None:
            notes.append(f"{where}: docker.run_options: read, not applied to {name}: its own "
                         f"{RUN_OPTIONS_FIELD} replaces them, as in SkyPilot")  # fmt: skip
        elif not names_a_container(task):
            notes.append(f"{where}: docker.run_options: read, not applied to {name}: it runs on its "
                         f"machine's own OS (it names no image_id: docker:...)")  # fmt: skip
        else:
            docker: dict[str, Any] = config["docker"] if isinstance(config.get("docker"), dict) else {}
            task["config"] = {**config, "docker": {**docker, "run_options": value}}
            changed = True
            notes.append(f"{where}: docker.run_options: applied to {name}: its container starts with "
                         f"{shlex.join(words)}")  # fmt: skip
    if not changed:
        return text, notes
    return yaml.safe_dump_all(documents, sort_keys=False), notes


def _only_cloud(task: Mapping[str, Any], clouds: list[str] | None) -> str | None:
    """The one cloud `task` can run on, given its resources' pins and the enabled clouds; else None."""
    resources = task.get("resources") or {}
    alternatives = [resources]
    for kind in ("any_of", "ordered"):
        alternatives = [{**resources, **alt} for alt in resources.get(kind) or []] or alternatives
    pinned: set[str | None] = set()
    for alternative in alternatives:
        cloud = alternative.get("cloud") or str(alternative.get("infra") or "").split("/")[0] or None
        pinned.add(None if cloud in (None, "*") else str(cloud).lower())
    if None not in pinned:
        return next(iter(pinned)) if len(pinned) == 1 else None
    if clouds is not None and len(clouds) == 1:
        return clouds[0].lower()
    return None


def _not_applied(values: Mapping[str, Any]) -> list[tuple[str, str]]:
    found: list[tuple[str, str]] = []
    for key, value in values.items():
        if key in ("allowed_clouds", "contracts"):
            continue
        if key in NOT_APPLIED:
            found.append((key, NOT_APPLIED[key]))
        elif isinstance(value, dict) and _is_cloud(key):
            for sub in value:
                applied = (sub == "labels" and key in LABELLED_CLOUDS) or (
                    sub in RESERVATION_KEYS and key in RESERVATION_CLOUDS
                )
                if not applied:
                    found.append(
                        (f"{key}.{sub}", CLOUD_KEY_REASONS.get(sub, f"skyless has no such {key} setting"))
                    )
        elif isinstance(value, dict) and value:
            for sub in value:
                name = f"{key}.{sub}"
                if name == "docker.run_options":
                    continue  # applied (_apply_run_options)
                found.append((name, NOT_APPLIED.get(name, "not a setting skyless knows")))
        else:
            found.append((key, "not a setting skyless knows"))
    return found


def _is_cloud(name: str) -> bool:
    return _cloud_error(name) is None


def _cloud_error(name: str) -> str | None:
    """None for a cloud name SkyPilot's task files take; else the parser's message (with a guess)."""
    from shared.errors import TaskFileError
    from shared.task import load_pipeline

    try:
        load_pipeline(yaml.safe_dump({"resources": {"cloud": name}}), filename="<config>")
    except TaskFileError as error:
        return error.message
    return None


def _check_allowed_clouds(values: Mapping[str, Any], sources: list[str]) -> None:
    clouds = values.get("allowed_clouds")
    if clouds is None:
        return
    where = " + ".join(sources)
    if not isinstance(clouds, list) or not all(isinstance(c, str) for c in clouds) or not clouds:
        raise UserError("must be a list of cloud names", file=where, field="allowed_clouds")
    for cloud in clouds:
        problem = _cloud_error(cloud)
        if problem is not None:
            raise UserError(problem, file=where, field="allowed_clouds")


def _read(path: Path) -> dict[str, Any]:
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as error:
        raise UserError(f"cannot read the config file: {error}", file=str(path)) from None
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as error:
        mark = getattr(error, "problem_mark", None)
        raise UserError("not valid YAML", file=str(path), line=mark.line + 1 if mark else None) from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise UserError("must be a mapping of settings", file=str(path))
    return data


def _merged(base: Mapping[str, Any], top: Mapping[str, Any]) -> dict[str, Any]:
    merged = dict(base)
    for key, value in top.items():
        if isinstance(value, Mapping) and isinstance(merged.get(key), Mapping):
            merged[key] = _merged(merged[key], value)
        else:
            merged[key] = value
    return merged
