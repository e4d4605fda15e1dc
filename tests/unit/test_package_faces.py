"""Every module of a shared/ package is either in its face (`__all__`) or protected by the import-linter
contract that keeps entry points out of package internals: a new module has to be put on one side."""

from __future__ import annotations

import importlib
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _protected() -> set[str]:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]["contracts"]
    (contract,) = [c for c in config if c["type"] == "protected"]
    return set(contract["protected_modules"])


def test_every_package_module_is_public_or_protected() -> None:
    protected = _protected()
    unclassified = []
    for package in sorted(p for p in (ROOT / "shared").iterdir() if (p / "__init__.py").exists()):
        face = set(importlib.import_module(f"shared.{package.name}").__all__)
        for module in sorted(package.glob("*.py")):
            name = f"shared.{package.name}.{module.stem}"
            if module.stem != "__init__" and module.stem not in face and name not in protected:
                unclassified.append(name)
    assert unclassified == [], "add each to its package's __all__ or to the protected contract"


def test_nothing_public_is_protected() -> None:
    for name in _protected():
        package, _, module = name.rpartition(".")
        assert module not in importlib.import_module(package).__all__, name
