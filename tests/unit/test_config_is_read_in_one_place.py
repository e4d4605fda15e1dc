"""Nothing in shared/ or functions/ reads the environment except shared/config/environment.py: every other
module gets a config object (shared/config/) built from it. An AST scan, so an alias or a
`from os import environ` is caught as well as `os.environ.get(...)`."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
THE_READER = ROOT / "shared" / "config" / "environment.py"
ENV_NAMES = {"environ", "environb", "getenv", "getenvb", "putenv", "unsetenv"}


def environment_reads(source: str) -> list[int]:
    """Lines that touch os's environment: `os.environ`, `os.getenv(...)`, `from os import environ`,
    `import os as o; o.environ`, `posix.environ`."""
    tree = ast.parse(source)
    os_aliases = {"os", "posix", "nt"}
    lines: list[int] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            os_aliases |= {a.asname for a in node.names if a.name in ("os", "posix", "nt") and a.asname}
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module in ("os", "posix", "nt"):
            if any(a.name in ENV_NAMES for a in node.names):
                lines.append(node.lineno)
        elif (
            isinstance(node, ast.Attribute)
            and node.attr in ENV_NAMES
            and isinstance(node.value, ast.Name)
            and node.value.id in os_aliases
        ):
            lines.append(node.lineno)
    return sorted(lines)


def test_only_the_config_package_reads_the_environment() -> None:
    offenders = []
    for top in ("shared", "functions"):
        for path in sorted((ROOT / top).rglob("*.py")):
            if path == THE_READER:
                continue
            offenders += [f"{path.relative_to(ROOT)}:{line}" for line in environment_reads(path.read_text())]
    assert offenders == [], "read a config object from shared/config/ instead"


def test_the_reader_itself_is_seen_by_the_scan() -> None:
    assert environment_reads(THE_READER.read_text()) != []


def test_the_scan_catches_every_spelling() -> None:
    spellings = {
        "import os\nos.environ.get('X')\n": [2],
        "import os\nos.getenv('X')\n": [2],
        "from os import environ\n": [1],
        "from os import getenv as g\n": [1],
        "import os as o\nx = o.environ['X']\n": [2],
        "import os\nos.environ['X'] = '1'\n": [2],
    }
    for source, lines in spellings.items():
        assert environment_reads(source) == lines, source


def test_the_scan_lets_other_os_calls_and_names_through() -> None:
    source = "import os\nos.path.join('a')\nenviron = {}\nenviron.get('X')\nself.environ = 1\n"
    assert environment_reads(source) == []


def test_config_objects_name_their_variables_by_constant() -> None:
    """`env.get("SKYLESS_X")` in shared/config/ would let a name drift from env_names."""
    literal_reads = []
    for path in sorted((ROOT / "shared" / "config").glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if not (isinstance(node, ast.Call) and node.args):
                continue
            callee = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", "")
            first = node.args[1] if callee.startswith("env_") and len(node.args) > 1 else node.args[0]
            if callee in ("get", "env_text", "env_int", "env_float", "env_list") and isinstance(
                first, ast.Constant
            ):
                literal_reads.append(f"{path.name}:{node.lineno}")
    assert literal_reads == []
