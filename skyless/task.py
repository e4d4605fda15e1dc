"""`skyless.Task` and `skyless.Resources`: a task built in code or read from YAML, as `sky.Task` and
`sky.Resources` are, held as the SkyPilot YAML mapping it stands for.

Each object is checked when it is made or changed by the same parser the API runs (shared.task), so a
mistake is a `TaskFileError` naming the field (and, from a file, the line) before anything is uploaded.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from shared.errors import TaskFileError, UserError
from skyless.clouds import Cloud

# sky.Resources(...)'s everyday keywords, in its order; each is the task file's `resources.<name>`.
RESOURCE_FIELDS = (
    "cloud", "instance_type", "cpus", "memory", "accelerators", "accelerator_args", "infra", "use_spot",
    "job_recovery", "region", "zone", "image_id", "disk_size", "disk_tier", "network_tier", "ports",
    "labels", "autostop", "priority",
)  # fmt: skip


class Resources:
    """One set of resources a task may run on (`resources:` of a task file).

    >>> Resources(accelerators="A100:8", use_spot=True)
    >>> Resources(infra="aws/us-east-1", cpus="4+", memory="16+")
    """

    def __init__(
        self,
        cloud: str | Cloud | None = None,
        instance_type: str | None = None,
        cpus: int | float | str | None = None,
        memory: int | float | str | None = None,
        accelerators: str | Mapping[str, int | float | None] | None = None,
        accelerator_args: Mapping[str, Any] | None = None,
        infra: str | None = None,
        use_spot: bool | None = None,
        job_recovery: str | Mapping[str, Any] | None = None,
        region: str | None = None,
        zone: str | None = None,
        image_id: str | Mapping[str, str] | None = None,
        disk_size: int | str | None = None,
        disk_tier: str | None = None,
        network_tier: str | None = None,
        ports: int | str | list[int | str] | None = None,
        labels: Mapping[str, str] | None = None,
        autostop: bool | int | str | Mapping[str, Any] | None = None,
        priority: int | None = None,
    ) -> None:
        given = dict(zip(RESOURCE_FIELDS, (
            cloud, instance_type, cpus, memory, accelerators, accelerator_args, infra, use_spot,
            job_recovery, region, zone, image_id, disk_size, disk_tier, network_tier, ports, labels,
            autostop, priority,
        ), strict=True))  # fmt: skip
        if cloud is not None and not isinstance(cloud, str):  # skyless.AWS(), as sky.AWS() is passed
            given["cloud"] = str(cloud)
        self._config: dict[str, Any] = {k: _plain(v) for k, v in given.items() if v is not None}
        _check({"resources": self._config} if self._config else {}, "<Resources>")

    @classmethod
    def from_yaml_config(
        cls, config: Mapping[str, Any] | None
    ) -> Resources | set[Resources] | list[Resources]:
        """A `resources:` mapping: one `Resources`, or a set (`any_of`) or list (`ordered`) of them."""
        config = dict(config or {})
        _check({"resources": config} if config else {}, "<Resources>")
        for kind, make in (("any_of", set), ("ordered", list)):
            if kind in config:
                shared = {k: v for k, v in config.items() if k not in ("any_of", "ordered")}
                return make(cls._of({**shared, **alt}) for alt in config[kind])
        return cls._of(config)

    @classmethod
    def _of(cls, config: Mapping[str, Any]) -> Resources:
        made = cls.__new__(cls)
        made._config = {k: _plain(v) for k, v in config.items() if v is not None}
        return made

    def to_yaml_config(self) -> dict[str, Any]:
        return copy.deepcopy(self._config)

    def copy(self, **override: Any) -> Resources:
        """A copy with some fields replaced (None removes one), as `sky.Resources.copy`."""
        unknown = sorted(set(override) - set(RESOURCE_FIELDS))
        if unknown:
            raise UserError(
                f"unknown resources field(s) {', '.join(unknown)}", field=f"resources.{unknown[0]}"
            )
        merged = {**self._config, **override}
        config = {k: v for k, v in merged.items() if v is not None}
        _check({"resources": config} if config else {}, "<Resources>")
        return Resources._of(config)

    @property
    def cloud(self) -> str | None:
        return self._config.get("cloud") or _infra_part(self._config.get("infra"), 0)

    @property
    def region(self) -> str | None:
        return self._config.get("region") or _infra_part(self._config.get("infra"), 1)

    @property
    def zone(self) -> str | None:
        return self._config.get("zone") or _infra_part(self._config.get("infra"), 2)

    @property
    def instance_type(self) -> str | None:
        return self._config.get("instance_type")

    @property
    def cpus(self) -> str | None:
        value = self._config.get("cpus")
        return None if value is None else str(value)

    @property
    def memory(self) -> str | None:
        value = self._config.get("memory")
        return None if value is None else str(value)

    @property
    def accelerators(self) -> dict[str, float] | None:
        """`{"A100": 8}`, as `sky.Resources.accelerators` (a bare name counts 1)."""
        value = self._config.get("accelerators")
        if value is None:
            return None
        if isinstance(value, Mapping):
            return {str(k): float(v if v is not None else 1) for k, v in value.items()}
        if isinstance(value, list):  # a list is a choice among them; the first stands for it here
            return Resources(accelerators=value[0]).accelerators
        name, _, count = str(value).partition(":")
        return {name: float(count) if count else 1.0}

    @property
    def use_spot(self) -> bool:
        return bool(self._config.get("use_spot", False))

    @property
    def labels(self) -> dict[str, str]:
        return dict(self._config.get("labels") or {})

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Resources) and _key(self._config) == _key(other._config)

    def __hash__(self) -> int:
        return hash(_key(self._config))

    def __repr__(self) -> str:
        inside = ", ".join(f"{k}={v!r}" for k, v in self._config.items())
        return f"Resources({inside})"


class Task:
    """A task: what to set up and run, on which resources, with which files.

    >>> task = Task(name="train", setup="pip install -r requirements.txt", run="python train.py",
    ...             workdir=".", envs={"EPOCHS": "3"})
    >>> task.set_resources(Resources(accelerators="A100:1"))
    >>> task = Task.from_yaml("train.yaml")
    """

    def __init__(
        self,
        name: str | None = None,
        *,
        setup: str | list[str] | None = None,
        run: str | list[str] | None = None,
        envs: Mapping[str, str] | None = None,
        secrets: Mapping[str, str | None] | None = None,
        workdir: str | Path | Mapping[str, Any] | None = None,
        num_nodes: int | None = None,
        file_mounts: Mapping[str, Any] | None = None,
        resources: Resources | Iterable[Resources] | None = None,
    ) -> None:
        fields = {"name": name, "workdir": _workdir(workdir),
                  "num_nodes": num_nodes, "setup": _script(setup, "setup"), "run": _script(run, "run"),
                  "envs": None if envs is None else {str(k): _env_value(v) for k, v in envs.items()},
                  "secrets": None if secrets is None else dict(secrets),
                  "file_mounts": None if file_mounts is None else dict(file_mounts)}  # fmt: skip
        self._config: dict[str, Any] = {k: v for k, v in fields.items() if v is not None}
        self._filename = "<Task>"
        self._source: tuple[str, dict[str, Any]] | None = None  # a file's text, while the task is as read
        if resources is not None:
            self._set_resources_field(resources)
        self._validate()

    # -- from YAML -----------------------------------------------------------------------------

    @classmethod
    def from_yaml(
        cls,
        yaml_path: str | Path,
        env_overrides: Mapping[str, str] | Iterable[tuple[str, str]] | None = None,
        secrets_overrides: Mapping[str, str] | Iterable[tuple[str, str]] | None = None,
    ) -> Task:
        """A task file (one task; a pipeline of several is launched with `skyless launch FILE`)."""
        from shared.task import read_task_file

        path = Path(yaml_path).expanduser()
        return cls._from_text(read_task_file(path), str(yaml_path), env_overrides, secrets_overrides)

    @classmethod
    def from_yaml_str(
        cls,
        text: str,
        env_overrides: Mapping[str, str] | Iterable[tuple[str, str]] | None = None,
        secrets_overrides: Mapping[str, str] | Iterable[tuple[str, str]] | None = None,
    ) -> Task:
        return cls._from_text(text, "<yaml>", env_overrides, secrets_overrides)

    @classmethod
    def from_yaml_config(
        cls,
        config: Mapping[str, Any],
        env_overrides: Mapping[str, str] | Iterable[tuple[str, str]] | None = None,
        secrets_overrides: Mapping[str, str] | Iterable[tuple[str, str]] | None = None,
    ) -> Task:
        import yaml

        if not isinstance(config, Mapping):
            raise TaskFileError(f"expected a mapping of task fields, found {type(config).__name__}")
        return cls._from_text(yaml.safe_dump(dict(config), sort_keys=False), "<config>",
                              env_overrides, secrets_overrides)  # fmt: skip

    @classmethod
    def _from_text(cls, text: str, filename: str, envs: Any, secrets: Any) -> Task:
        import yaml

        from shared.task import load_pipeline

        pipeline = load_pipeline(text, filename=filename, defer_secrets=True)  # errors name file and line
        if len(pipeline.tasks) != 1:
            raise TaskFileError(
                f"holds {len(pipeline.tasks)} tasks: Task.from_yaml reads one",
                file=filename,
                hint=f"launch a pipeline with `skyless launch {filename}`",
            )
        documents = [d for d in yaml.safe_load_all(text) if d is not None]
        task = cls.__new__(cls)
        task._config = dict(documents[-1]) if documents else {}
        task._filename = filename
        task._source = (text, copy.deepcopy(task._config))
        if envs:
            task.update_envs(envs)
        if secrets:
            task.update_secrets(secrets)
        return task

    # -- fields, as sky.Task names them --------------------------------------------------------

    @property
    def name(self) -> str | None:
        return self._config.get("name")

    @name.setter
    def name(self, value: str | None) -> None:
        self._set("name", value)

    @property
    def run(self) -> str | None:
        return self._config.get("run")

    @run.setter
    def run(self, value: str | list[str] | None) -> None:
        self._set("run", _script(value, "run"))

    @property
    def setup(self) -> str | None:
        return self._config.get("setup")

    @setup.setter
    def setup(self, value: str | list[str] | None) -> None:
        self._set("setup", _script(value, "setup"))

    @property
    def workdir(self) -> str | None:
        value = self._config.get("workdir")
        return None if value is None else value if isinstance(value, str) else str(value.get("url"))

    @workdir.setter
    def workdir(self, value: str | Path | Mapping[str, Any] | None) -> None:
        self._set("workdir", _workdir(value))

    @property
    def num_nodes(self) -> int:
        return int(self._config.get("num_nodes") or 1)

    @num_nodes.setter
    def num_nodes(self, value: int | None) -> None:
        self._set("num_nodes", value)

    @property
    def envs(self) -> dict[str, str]:
        return {str(k): str(v) for k, v in (self._config.get("envs") or {}).items()}

    @property
    def secrets(self) -> dict[str, str | None]:
        return dict(self._config.get("secrets") or {})

    @property
    def file_mounts(self) -> dict[str, Any] | None:
        mounts = self._config.get("file_mounts")
        return None if mounts is None else copy.deepcopy(mounts)

    @property
    def resources(self) -> set[Resources] | list[Resources]:
        """A set (one, or `any_of`) or a list (`ordered`), as `sky.Task.resources`."""
        made = Resources.from_yaml_config(self._config.get("resources"))
        return made if isinstance(made, (set, list)) else {made}

    def update_envs(self, envs: Mapping[str, str] | Iterable[tuple[str, str]]) -> Task:
        merged = {
            **(self._config.get("envs") or {}),
            **{str(k): _env_value(v) for k, v in dict(envs).items()},
        }
        return self._set("envs", merged)

    def update_secrets(self, secrets: Mapping[str, str] | Iterable[tuple[str, str]]) -> Task:
        return self._set("secrets", {**(self._config.get("secrets") or {}), **dict(secrets)})

    def set_file_mounts(self, file_mounts: Mapping[str, Any] | None) -> Task:
        return self._set("file_mounts", None if file_mounts is None else dict(file_mounts))

    def update_file_mounts(self, file_mounts: Mapping[str, Any]) -> Task:
        return self._set("file_mounts", {**(self._config.get("file_mounts") or {}), **dict(file_mounts)})

    def set_resources(self, resources: Resources | Iterable[Resources] | Mapping[str, Any]) -> Task:
        """One `Resources`; a set of them (any of, cheapest first); or a list (in this order)."""
        before = copy.deepcopy(self._config)
        self._set_resources_field(resources)
        try:
            self._validate()
        except UserError:
            self._config = before
            raise
        return self

    def set_resources_override(self, override: Mapping[str, Any]) -> Task:
        """Replace some fields in every resources choice, as `sky.Task.set_resources_override`."""
        current = self.resources
        changed = [r.copy(**dict(override)) for r in current]
        return self.set_resources(set(changed) if isinstance(current, set) else changed)

    def to_yaml_config(self) -> dict[str, Any]:
        """The task file's mapping (what is submitted)."""
        return copy.deepcopy(self._config)

    def to_yaml(self) -> str:
        """The file as written while the task is unchanged (errors then point at its lines), else YAML."""
        import yaml

        if self._source is not None and self._source[1] == self._config:
            return self._source[0]
        return yaml.safe_dump(self._config, sort_keys=False)

    @property
    def filename(self) -> str:
        """Where the task came from (a file, or `<Task>` for one built in code): named in errors."""
        return self._filename

    def __repr__(self) -> str:
        return (
            f"Task(name={self.name!r}, run={_short(self.run)!r}, resources={self._config.get('resources')!r})"
        )

    def _set_resources_field(self, resources: Resources | Iterable[Resources] | Mapping[str, Any]) -> None:
        if isinstance(resources, Mapping):
            self._config["resources"] = dict(resources)
            return
        if isinstance(resources, Resources):
            self._config["resources"] = resources.to_yaml_config()
            return
        choices = list(resources)
        if not all(isinstance(r, Resources) for r in choices):
            raise UserError("expected Resources, a set or a list of Resources", field="resources")
        kind = "ordered" if isinstance(resources, (list, tuple)) else "any_of"
        if len(choices) == 1:
            self._config["resources"] = choices[0].to_yaml_config()
        else:
            self._config["resources"] = {kind: [r.to_yaml_config() for r in choices]}

    def _set(self, key: str, value: Any) -> Task:
        before = copy.deepcopy(self._config)
        if value is None:
            self._config.pop(key, None)
        else:
            self._config[key] = value
        try:
            self._validate()
        except UserError:
            self._config = before
            raise
        return self

    def _validate(self) -> None:
        _check(self._config, self._filename)


def _check(config: Mapping[str, Any], filename: str) -> None:
    """Raise the parser's TaskFileError (naming the field) if `config` is not a valid task."""
    import yaml

    from shared.task import load_pipeline

    text = yaml.safe_dump(dict(config), sort_keys=False) if config else "run: null\n"
    try:
        load_pipeline(text, filename=filename, defer_secrets=True)
    except TaskFileError as error:
        if filename.startswith("<"):
            error.line = None  # a line of YAML the user never wrote would mislead
        raise


def _script(value: str | list[str] | None, field: str) -> str | None:
    """A shell script; a list of commands (as sky.Task takes) runs one after another."""
    if value is None or isinstance(value, str):
        return value
    if isinstance(value, list) and all(isinstance(line, str) for line in value):
        return "\n".join(value)
    raise UserError(
        "must be a shell script (a string, or a list of commands); skyless runs no Python command generators",
        field=field,
    )


def _workdir(value: str | Path | Mapping[str, Any] | None) -> str | dict[str, Any] | None:
    """A local folder, or a git workdir mapping (`{url: ..., ref: ...}`) kept as written."""
    if value is None or isinstance(value, Mapping):
        return None if value is None else dict(value)
    return str(value)


def _plain(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return value


def _key(config: Mapping[str, Any]) -> str:
    import json

    return json.dumps(config, sort_keys=True, default=str)


def _env_value(value: Any) -> str:
    return value if isinstance(value, str) else str(value)


def _infra_part(infra: str | None, index: int) -> str | None:
    if not infra:
        return None
    parts = infra.split("/")
    part = parts[index] if index < len(parts) else None
    return None if part in (None, "", "*") else part


def _short(text: str | None) -> str | None:
    return None if text is None else text if len(text) <= 40 else text[:37] + "..."
