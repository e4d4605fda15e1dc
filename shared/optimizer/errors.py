"""Point an optimizer error at the task-file line of the field it comes from.

The optimizer works on validated tasks, which keep no line numbers; its NoOfferingError names the
field (`resources.max_hourly_cost`), the places it may be written (`paths`, most specific first) and,
in a pipeline, the task (`task_index`). Given the file's text, `locate_plan_error` finds the line; a
field the command line replaced (`--gpus`) is named by its option instead, since no line says it.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence

from shared.errors import UserError

_LOCATION = frozenset({"infra", "cloud", "region", "zone"})


def locate_plan_error(
    error: UserError, text: str, filename: str, overridden: Collection[str] = ()
) -> UserError:
    """Set `error.file`, and `error.line`/`error.field` from the first of its `paths` the file writes."""
    from shared.task.loader import task_field_line, written_field  # an error's path: the task file models
    from shared.task.overrides import FIELD_OF_OVERRIDE, flag_of

    error.file = error.file or filename
    paths: Sequence[tuple[str | int, ...]] = getattr(error, "paths", None) or []
    if not paths or error.line is not None:
        return error
    task_index = int(getattr(error, "task_index", 0) or 0)
    key = str(paths[0][-1])
    if key.startswith("--"):  # a command-line option (`--clouds`) ruled the offerings out
        error.field = key
        return error
    field = "infra" if key in _LOCATION else key
    if field in overridden:
        flags = [flag_of(name) for name, replaced in FIELD_OF_OVERRIDE.items() if replaced == field]
        error.field = " / ".join(dict.fromkeys(flags))
        return error
    for path in paths:
        found = written_field(text, task_index, path)
        if found is not None:
            error.field = dotted(found[0])
            error.line = found[1]
            return error
    error.line = task_field_line(text, task_index, paths[0])
    return error


def dotted(path: Sequence[str | int]) -> str:
    """A field path as the error names it: `resources.any_of[1].accelerators`."""
    text = ""
    for step in path:
        text += f"[{step}]" if isinstance(step, int) else (f".{step}" if text else str(step))
    return text
