"""Where a task file calls conda. SkyPilot's nodes always have it (its images carry conda, and its runtime
installs Miniconda where it is missing: sky/skylet/constants.py, CONDA_INSTALLATION_COMMANDS); a node without
it ends such a task with `conda: command not found` (exit 127). Pure: reads the text."""

from __future__ import annotations

import re

from shared.task.positions import YamlSyntaxError, load_documents

# `conda` where a command starts: a line's start, after `;`, `&&`, `||`, `|`, `(`, `$(`, a backtick, or a
# word that runs the next one (`then`, `do`, `sudo`, ...); `echo conda` is no call.
_CONDA_COMMAND = re.compile(r"(?:^|[;&|(`]|\b(?:then|do|else|sudo|time|exec|eval|command)\s)\s*conda(?=\s|$)")


def conda_lines(text: str) -> list[int]:
    """The 1-based lines of the file where a task's `setup` or `run` calls conda (comments aside)."""
    try:
        documents = load_documents(text)
    except YamlSyntaxError:
        return []  # loading the task says what is wrong with it
    raw = text.splitlines()
    found: set[int] = set()
    for document in documents:
        if not isinstance(document.value, dict):
            continue
        for key in ("setup", "run"):
            value = document.value.get(key)
            first = document.lines.get((key,))
            if not isinstance(value, str) or first is None:
                continue
            last = min(first + value.count("\n") + 1, len(raw))  # a block scalar starts on the next line
            for number in range(first, last + 1):
                command = raw[number - 1].split("#", 1)[0]
                if number == first:
                    command = command.split(":", 1)[-1]  # the key itself is no command
                if _CONDA_COMMAND.search(command):
                    found.add(number)
    return sorted(found)
