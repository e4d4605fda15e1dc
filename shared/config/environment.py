"""Reading the environment: the one place in shared/ and functions/ that touches `os.environ`, and the
parsers every config object uses, which name the variable when its value is wrong."""

from __future__ import annotations

import os
from collections.abc import Mapping


class ConfigError(ValueError):
    """A variable holds a value its config object cannot use; the message names the variable."""

    def __init__(self, name: str, value: str, expected: str) -> None:
        super().__init__(f"environment variable {name}={value!r} is not {expected}")
        self.name = name


def process_environ(environ: Mapping[str, str] | None = None) -> Mapping[str, str]:
    """`environ` when given (tests, another process's environment), else this process's environment."""
    return os.environ if environ is None else environ


def inherited_environ() -> dict[str, str]:
    """A copy of this process's environment, for a child process that inherits it (local nodes)."""
    return dict(os.environ)


def env_text(environ: Mapping[str, str], name: str) -> str | None:
    """The variable's value; unset or empty both read as None."""
    return environ.get(name) or None


def env_int(environ: Mapping[str, str], name: str, default: int) -> int:
    raw = environ.get(name)
    if not raw:
        return default
    try:
        return int(raw)
    except ValueError:
        raise ConfigError(name, raw, "a whole number") from None


def env_float(environ: Mapping[str, str], name: str, default: float) -> float:
    raw = environ.get(name)
    if not raw:
        return default
    try:
        return float(raw)
    except ValueError:
        raise ConfigError(name, raw, "a number") from None


def env_list(environ: Mapping[str, str], name: str) -> tuple[str, ...]:
    """A comma list, blanks dropped; unset -> ()."""
    return tuple(part.strip() for part in (environ.get(name) or "").split(",") if part.strip())
