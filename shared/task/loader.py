"""SkyPilot task YAML text → `Pipeline`, or a `TaskFileError` naming file, line and field.

Documents are read the way sky/utils/dag_utils.py reads them: a first document holding only `name`
(or `name` + `execution: serial`) names a chain; a first document with `execution: parallel` is a
job-group header; otherwise every document is a task. Unknown pipeline-header keys are errors; unknown
job-group header keys (e.g. `placement`) are kept as `ignored_header_fields` and said at plan and launch,
as SkyPilot only warns about them and goes on, except near-misses of a known key (`primary_task`): typos.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from shared.errors import TaskFileError
from shared.task.limits import check_task_size
from shared.task.positions import Document, YamlSyntaxError, load_documents
from shared.task.spec import Pipeline, Task
from shared.task.strict_model import did_you_mean
from shared.task.values import DURATION, FIELD_ALIASES, substitute_env_vars

CHAIN_HEADER_FIELDS = ("name", "execution")
JOB_GROUP_HEADER_FIELDS = ("name", "execution", "primary_tasks", "termination_delay", "inter_connection")
# Fields whose strings may name task envs, as SkyPilot fills them in (`$VAR`, `${VAR}`).
_ENV_EXPANDED_FIELDS = ("workdir", "file_mounts", "inputs", "outputs", "volumes")


def load_pipeline_file(
    path: str | Path,
    env_overrides: Mapping[str, str] | None = None,
    secret_overrides: Mapping[str, str] | None = None,
    *,
    defer_secrets: bool = False,
) -> Pipeline:
    try:
        text = Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        raise TaskFileError("no such task file", file=str(path)) from None
    except (OSError, UnicodeDecodeError) as error:
        raise TaskFileError(f"cannot read the task file: {error}", file=str(path)) from None
    return load_pipeline(
        text,
        filename=str(path),
        env_overrides=env_overrides,
        secret_overrides=secret_overrides,
        defer_secrets=defer_secrets,
    )


def load_pipeline(
    text: str,
    *,
    filename: str = "<task>",
    env_overrides: Mapping[str, str] | None = None,
    secret_overrides: Mapping[str, str] | None = None,
    defer_secrets: bool = False,
) -> Pipeline:
    """Every task of the file, validated, with env overrides applied (to every task, like SkyPilot).

    A null secret with no override is an error, unless `defer_secrets` (planning, as SkyPilot's dry run
    does): then it is left out of the task and named in `pipeline.deferred_secrets`.
    Every way a task enters skyless comes here: the size and parse limits (shared/task/limits.py) hold
    for all of them.
    """
    check_task_size(len(text.encode("utf-8", errors="replace")), filename)
    try:
        documents = load_documents(text)
    except YamlSyntaxError as error:
        raise TaskFileError(error.message, file=filename, line=error.line) from None
    for document in documents:
        if document.value is not None and not isinstance(document.value, dict):
            raise TaskFileError(
                f"expected a mapping of task fields, found {_kind(document.value)}",
                file=filename,
                line=document.start_line,
            )
    documents = [d for d in documents if d.value is not None]
    if not documents:
        raise TaskFileError(
            "the task file is empty; expected task fields such as 'run'", file=filename, line=1
        )

    header, task_documents, execution = _split_header(documents, filename)
    name = header.value.get("name") if header else None
    if header is None and len(task_documents) == 1:
        name = task_documents[0].value.get("name")
    if not task_documents:
        task_documents = [Document({"name": name}, {}, header.start_line if header else 1)]

    deferred: dict[int, list[str]] = {}
    tasks = [
        _load_task(
            document,
            filename,
            dict(env_overrides or {}),
            dict(secret_overrides or {}),
            deferred.setdefault(index, []) if defer_secrets else None,
        )
        for index, document in enumerate(task_documents)
    ]
    fields: dict[str, Any] = {"name": name, "execution": execution, "tasks": tasks}
    if header is not None and execution == "parallel":
        _check_job_group(header, tasks, task_documents, filename)
        for key in ("primary_tasks", "termination_delay", "inter_connection"):
            if key in header.value:
                fields[key] = header.value[key]
        ignored = [str(key) for key in header.value if key not in JOB_GROUP_HEADER_FIELDS]
        fields["ignored_header_fields"] = ignored or None
    pipeline = Pipeline.model_validate(fields)
    pipeline.deferred_secrets = {index: names for index, names in deferred.items() if names}
    return pipeline


def task_field_line(text: str, task_index: int, path: Sequence[str | int]) -> int | None:
    """The line of `path` (e.g. `("resources", "max_hourly_cost")`) in task `task_index` of a task file:
    the deepest part of it the file writes. None when the text is not a readable task file."""
    found = _task_field(text, task_index, path)
    return None if found is None else found[1]


def written_field(
    text: str, task_index: int, path: Sequence[str | int]
) -> tuple[tuple[str | int, ...], int] | None:
    """(the path as the file writes it, e.g. with `gpus` for `accelerators`; its line), or None when the
    file does not write that field in that task."""
    found = _task_field(text, task_index, path)
    if found is None or len(found[0]) != len(tuple(path)):
        return None
    return found


def _task_field(
    text: str, task_index: int, path: Sequence[str | int]
) -> tuple[tuple[str | int, ...], int] | None:
    try:
        documents = [d for d in load_documents(text) if isinstance(d.value, dict)]
        _, task_documents, _ = _split_header(documents, "<task>")
    except (YamlSyntaxError, TaskFileError):
        return None
    if not 0 <= task_index < len(task_documents):
        return None
    document = task_documents[task_index]
    written = _data_path(document.value, path)
    return written, document.line_of(written)


def _split_header(documents: list[Document], filename: str) -> tuple[Document | None, list[Document], str]:
    first = documents[0]
    keys = set(first.value)
    if len(documents) >= 2 and first.value.get("execution") == "parallel":
        # SkyPilot warns about unknown keys and goes on; a near-miss of a known one is refused as a typo.
        others = [k for k in first.value if k not in JOB_GROUP_HEADER_FIELDS]
        kept = [k for k in others if not did_you_mean(str(k), list(JOB_GROUP_HEADER_FIELDS))]
        _check_header_keys(first, (*JOB_GROUP_HEADER_FIELDS, *kept), "job group header", filename)
        return first, documents[1:], "parallel"
    if keys and keys <= set(CHAIN_HEADER_FIELDS) and "name" in keys:
        execution = first.value.get("execution", "serial")
        if execution != "serial":
            raise TaskFileError(
                f"expected 'serial' for a pipeline (or 'parallel' with at least one task after the header), "
                f"found {execution!r}",
                file=filename,
                line=first.line_of(("execution",)),
                field="execution",
            )
        return first, documents[1:], "serial"
    if "execution" in keys:
        if len(documents) == 1:
            raise TaskFileError(
                "a header with 'execution' must be followed by at least one task document ('---')",
                file=filename,
                line=first.line_of(("execution",)),
                field="execution",
            )
        _check_header_keys(first, CHAIN_HEADER_FIELDS, "pipeline header", filename)
    return None, documents, "serial"


def _check_header_keys(header: Document, allowed: Sequence[str], what: str, filename: str) -> None:
    if "name" not in header.value:
        raise TaskFileError(f"the {what} needs a 'name'", file=filename, line=header.start_line, field="name")
    for key in header.value:
        if key not in allowed:
            raise TaskFileError(
                f"unknown {what} field {key!r}; a header holds only {', '.join(allowed)} "
                "(task fields go in the documents after '---')",
                file=filename,
                line=header.line_of((key,)),
                field=str(key),
                hint=did_you_mean(str(key), list(allowed)) or None,
            )


def _check_job_group(header: Document, tasks: list[Task], documents: list[Document], filename: str) -> None:
    names: list[str] = []
    for index, (task, document) in enumerate(zip(tasks, documents, strict=True)):
        where: dict[str, Any] = {"file": filename, "line": document.line_of(("name",)), "field": "name"}
        if not task.name:
            raise TaskFileError(f"job {index + 1} of the job group needs a 'name'", **where)
        if not all(c.isalnum() or c in "-_" for c in task.name):
            raise TaskFileError(f"job name {task.name!r} may hold only letters, digits, '-' and '_'", **where)
        if task.name in names:
            raise TaskFileError(f"two jobs of the group are named {task.name!r}", **where)
        names.append(task.name)
    group_name = header.value["name"]
    if (
        not isinstance(group_name, str)
        or not group_name
        or not all(c.isalnum() or c in "-_" for c in group_name)
    ):
        raise TaskFileError(
            f"expected a job group name of letters, digits, '-' and '_', found {group_name!r}",
            file=filename,
            line=header.line_of(("name",)),
            field="name",
        )
    primary = header.value.get("primary_tasks")
    if primary is not None:
        if not isinstance(primary, list) or not all(isinstance(p, str) for p in primary):
            raise TaskFileError(
                f"expected a list of job names, found {primary!r}",
                file=filename,
                line=header.line_of(("primary_tasks",)),
                field="primary_tasks",
            )
        for index, job in enumerate(primary):
            if job not in names:
                raise TaskFileError(
                    f"unknown job {job!r}; the jobs are {', '.join(names)}",
                    file=filename,
                    line=header.line_of(("primary_tasks", index)),
                    field=f"primary_tasks[{index}]",
                )
    delay = header.value.get("termination_delay")
    if delay is not None:
        delays = delay if isinstance(delay, dict) else {None: delay}
        for key, value in delays.items():
            path = ("termination_delay",) if key is None else ("termination_delay", key)
            where = {"file": filename, "line": header.line_of(path), "field": ".".join(map(str, path))}
            if key is not None and key != "default" and key not in names:
                raise TaskFileError(
                    f"unknown job {key!r}; expected 'default' or one of {', '.join(names)}", **where
                )
            if isinstance(value, bool) or not isinstance(value, str | int) or not DURATION.match(str(value)):
                raise TaskFileError(
                    f"expected a duration such as '30s', '5m' or 30, found {value!r}", **where
                )


def _load_task(
    document: Document,
    filename: str,
    env_overrides: dict[str, str],
    secret_overrides: dict[str, str],
    deferred_secrets: list[str] | None = None,
) -> Task:
    raw = dict(document.value)
    for section, overrides, label in (
        ("envs", env_overrides, "Environment variable"),
        ("secrets", secret_overrides, "Secret"),
    ):
        given = raw.get(section)
        if section == "secrets" and isinstance(given, list) and all(isinstance(i, str) for i in given):
            given = {item: None for item in given}
        if given is None and not (section == "envs" and overrides):
            continue
        if not isinstance(given, dict | None):
            continue  # the model reports the wrong type with its position
        values = {**(given or {}), **overrides} if section == "envs" else {**(given or {})}
        if section == "secrets":
            values.update({k: v for k, v in overrides.items() if k in values})
            if deferred_secrets is not None:
                deferred_secrets.extend(k for k, v in values.items() if v is None)
                values = {k: v for k, v in values.items() if v is not None}
        for key, value in values.items():
            if value is None:
                raise TaskFileError(
                    f"{label} {key!r} is None; give it a value in the file or as an override",
                    file=filename,
                    line=document.line_of((section, key)),
                    field=f"{section}.{key}",
                    hint=f"e.g. skyless launch --env {key}=..." if section == "envs" else None,
                )
        raw[section] = values
    envs = raw.get("envs")
    if isinstance(envs, dict):
        text_envs = {str(k): str(v) for k, v in envs.items()}
        for field in _ENV_EXPANDED_FIELDS:
            if field in raw:
                raw[field] = substitute_env_vars(raw[field], text_envs)
    try:
        return Task.model_validate(raw)
    except ValidationError as error:
        raise _task_file_error(error, document, filename) from None


def _task_file_error(error: ValidationError, document: Document, filename: str) -> TaskFileError:
    details = error.errors()
    first_path = _data_path(document.value, details[0]["loc"])
    # A union (e.g. `str | {url, ref}`) reports one error per branch at the same place: pick the telling one.
    same_place = [d for d in details if _data_path(document.value, d["loc"])[: len(first_path)] == first_path]
    telling = [d for d in same_place if d["type"] == "unknown_field"] or [
        d for d in same_place if not d["type"].endswith("_type")
    ]
    detail = max(telling, key=lambda d: len(_data_path(document.value, d["loc"]))) if telling else details[0]
    path = _data_path(document.value, detail["loc"])
    ctx = detail.get("ctx") or {}
    found = repr(detail.get("input"))
    found = found if len(found) <= 80 else found[:77] + "..."
    if "at" in ctx:
        path = (*path, ctx["at"])
    if detail["type"] == "unknown_field":
        path = (*path, ctx["field"])
        message = detail["msg"]
    elif not telling:
        expected = []
        for d in same_place:
            kind = _TYPE_NAMES.get(d["type"], d["msg"])
            if kind not in expected:
                expected.append(kind)
        message = f"expected {' or '.join(expected)}; found {found}"
    elif detail["type"] == "missing":
        message = f"missing required field {detail['loc'][-1]!r}"
    else:
        message = detail["msg"].removeprefix("Value error, ")
        if (
            detail["type"] != "missing"
            and "found" not in message
            and not isinstance(detail.get("input"), dict)
        ):
            message += f"; found {found}"
    return TaskFileError(
        message,
        file=filename,
        line=document.line_of(path),
        field=_dotted(path) or None,
        hint=ctx.get("hint") or None,
    )


_TYPE_NAMES = {
    "string_type": "a string",
    "int_type": "an integer",
    "float_type": "a number",
    "bool_type": "true or false",
    "dict_type": "a mapping",
    "model_type": "a mapping",
    "list_type": "a list",
    "literal_error": "one of the listed values",
}


def _data_path(data: Any, loc: Sequence[str | int]) -> tuple[str | int, ...]:
    """The part of pydantic's `loc` that names real keys (it also holds union branch tags); a field
    written under another name SkyPilot accepts (`gpus` for `accelerators`) is found by that name."""
    path: list[str | int] = []
    for step in loc:
        if isinstance(data, dict) and step not in data:
            step = next((a for a, name in FIELD_ALIASES.items() if name == step and a in data), step)
        in_dict = isinstance(data, dict) and step in data
        if in_dict or (isinstance(data, list) and isinstance(step, int) and 0 <= step < len(data)):
            data = data[step]
            path.append(step)
    return tuple(path)


def _dotted(path: Sequence[str | int]) -> str:
    text = ""
    for step in path:
        text += f"[{step}]" if isinstance(step, int) else (f".{step}" if text else str(step))
    return text


def _kind(value: Any) -> str:
    if isinstance(value, list):
        return "a list"
    if isinstance(value, str):
        return f"the text {value[:40]!r}"
    return f"{type(value).__name__} {value!r}"
