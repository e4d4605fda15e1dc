"""Task files as SkyPilot writes them: YAML text -> a validated `Pipeline` of `Task`s, or a `TaskFileError`
naming the file, line and field.

`loader` reads the text (multi-document pipelines, env and secret overrides); `spec` and `resources` are the
pydantic models of the task and its `resources:`; `values` parses SkyPilot's small languages (`A100:8`,
`4+`, `2x`, `infra`); `positions` keeps each field's line; `strict_model` turns unknown fields into
"did you mean" errors; `requests` is what the optimizer reads from a task. Pure: no I/O but reading files.
"""

from shared.task.loader import load_pipeline, load_pipeline_file
from shared.task.requests import ResourceChoice, ResourceRequest
from shared.task.spec import GitWorkdir, Pipeline, Task

__all__ = [
    "GitWorkdir",
    "Pipeline",
    "ResourceChoice",
    "ResourceRequest",
    "Task",
    "load_pipeline",
    "load_pipeline_file",
]
