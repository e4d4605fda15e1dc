"""What `plan` and `launch` say about the node a task will run on, beside the plan: where the local
runtime's nodes (processes on this machine, no internet) cannot give a task what a SkyPilot node has."""

from __future__ import annotations

import shutil

from shared.task import conda_lines


def conda_note(text: str, filename: str) -> str | None:
    """One note when the file calls conda and this machine has none: the local runtime's nodes run here and
    cannot install Miniconda (cloud VMs do, before setup, as SkyPilot's runtime does)."""
    lines = conda_lines(text)
    if not lines or shutil.which("conda") is not None:
        return None
    more = f" (and {len(lines) - 1} more line(s))" if len(lines) > 1 else ""
    return (
        f"{filename}:{lines[0]}: calls conda{more}, and this machine has none: on the local runtime that "
        "command ends with `conda: command not found` (exit 127). Cloud VMs get Miniconda before setup, as "
        "SkyPilot's nodes do; locally, put conda on this machine's PATH"
    )
