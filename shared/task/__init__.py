"""Task files as SkyPilot writes them: YAML text -> a validated `Pipeline` of `Task`s, or a `TaskFileError`
naming the file, line and field.

`loader` reads the text (multi-document pipelines, env and secret overrides); `spec` and `resources` are the
pydantic models of the task and its `resources:`; `values` parses SkyPilot's small languages (`A100:8`,
`4+`, `2x`, `infra`); `positions` keeps each field's line; `strict_model` turns unknown fields into
"did you mean" errors; `requests` is what the optimizer reads from a task; `unsupported_fields` says which
fields are read but not acted on; `container_image` reads `image_id: docker:...` and `docker_run_options`
the options its container starts with; `overrides` applies `sky launch`'s resource options; `limits` is
the task-file size limit; `conda_use` finds the lines that call conda. Pure: no I/O but reading files.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from shared.lazy_faces import lazy_face

if TYPE_CHECKING:
    from shared.task.conda_use import conda_lines
    from shared.task.container_image import container_notes, names_a_container
    from shared.task.docker_run_options import RUN_OPTIONS_FIELD, run_option_words, run_options_value
    from shared.task.limits import MAX_TASK_FILE_BYTES, read_task_file
    from shared.task.loader import load_pipeline, load_pipeline_file, task_field_line
    from shared.task.overrides import Overridden, ResourceOverrides, apply_overrides
    from shared.task.requests import ResourceChoice, ResourceRequest
    from shared.task.spec import GitWorkdir, Pipeline, Task
    from shared.task.unsupported_fields import pipeline_notes
    from shared.task.values import parse_ports

__all__ = [
    "MAX_TASK_FILE_BYTES",
    "RUN_OPTIONS_FIELD",
    "GitWorkdir",
    "Overridden",
    "Pipeline",
    "ResourceChoice",
    "ResourceOverrides",
    "ResourceRequest",
    "Task",
    "apply_overrides",
    "conda_lines",
    "container_notes",
    "load_pipeline",
    "load_pipeline_file",
    "names_a_container",
    "parse_ports",
    "pipeline_notes",
    "read_task_file",
    "run_option_words",
    "run_options_value",
    "task_field_line",
]

__getattr__ = lazy_face(
    __name__,
    {
        "conda_lines": "shared.task.conda_use",
        "container_notes": "shared.task.container_image",
        "names_a_container": "shared.task.container_image",
        "RUN_OPTIONS_FIELD": "shared.task.docker_run_options",
        "run_option_words": "shared.task.docker_run_options",
        "run_options_value": "shared.task.docker_run_options",
        "MAX_TASK_FILE_BYTES": "shared.task.limits",
        "read_task_file": "shared.task.limits",
        "load_pipeline": "shared.task.loader",
        "load_pipeline_file": "shared.task.loader",
        "task_field_line": "shared.task.loader",
        "Overridden": "shared.task.overrides",
        "ResourceOverrides": "shared.task.overrides",
        "apply_overrides": "shared.task.overrides",
        "ResourceChoice": "shared.task.requests",
        "ResourceRequest": "shared.task.requests",
        "GitWorkdir": "shared.task.spec",
        "Pipeline": "shared.task.spec",
        "Task": "shared.task.spec",
        "pipeline_notes": "shared.task.unsupported_fields",
        "parse_ports": "shared.task.values",
    },
)
