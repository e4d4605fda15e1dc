"""Safe, bounded YAML loading that remembers where every value came from.

`load_documents(text)` returns one `Document` per YAML document: the plain Python value (what
`yaml.safe_load_all` would give) and a map from each field path (a tuple of keys and list indexes)
to the 1-based line it was written on, so errors can point at the line a user must fix. A text past
a parse limit (shared/task/limits.py: depth, documents, expanded aliases, time) is a YamlSyntaxError
naming the limit, raised before the value is built.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import yaml
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

from shared.task.bounded_yaml import BoundedLoader, ParseLimitError

Path = tuple[str | int, ...]


@dataclass
class Document:
    value: Any
    lines: dict[Path, int] = field(default_factory=dict)
    start_line: int = 1

    def line_of(self, path: Sequence[str | int]) -> int:
        """The line of the deepest known prefix of `path` (the document start when nothing matches)."""
        path = tuple(path)
        while path:
            if path in self.lines:
                return self.lines[path]
            path = path[:-1]
        return self.lines.get((), self.start_line)


class YamlSyntaxError(Exception):
    def __init__(self, message: str, line: int | None, limit: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.line = line
        self.limit = limit  # the parse limit passed (shared/task/limits.py), None for a syntax error


def load_documents(text: str) -> list[Document]:
    """Every document of `text`, safely loaded, with the line of each field. Raises YamlSyntaxError."""
    try:
        loader = BoundedLoader(text)
    except yaml.reader.ReaderError as error:  # the reader rejects control characters up front
        line = text.count("\n", 0, error.position) + 1
        problem = f"invalid YAML: character {chr(error.character)!r} is not allowed"
        raise YamlSyntaxError(problem, line) from None
    documents: list[Document] = []
    start: int | None = None
    try:
        while loader.check_node():
            node = loader.get_node()
            if node is None:
                continue
            start = node.start_mark.line + 1
            value = loader.construct_document(node)
            lines: dict[Path, int] = {(): node.start_mark.line + 1}
            _record_lines(loader, node, (), lines)
            documents.append(Document(value, lines, node.start_mark.line + 1))
    except ParseLimitError as error:
        raise YamlSyntaxError(error.message, error.line, error.limit) from None
    except yaml.MarkedYAMLError as error:
        mark = error.problem_mark or error.context_mark
        where = mark.line + 1 if mark is not None else None
        problem = error.problem or str(error)
        context = f" {error.context}" if error.context else ""
        raise YamlSyntaxError(f"invalid YAML: {problem}{context}", where) from None
    except yaml.YAMLError as error:
        raise YamlSyntaxError(f"invalid YAML: {error}", None) from None
    except ValueError:  # int() refuses a number of more than 4300 digits
        raise YamlSyntaxError("invalid YAML: a number too long to read (over 4300 digits)", start) from None
    finally:
        loader.dispose()
    return documents


def _record_lines(loader: BoundedLoader, node: Node, path: Path, lines: dict[Path, int]) -> None:
    """Record each child's line (a mapping entry's key line, a list item's own line), depth first."""
    if isinstance(node, MappingNode):
        for key_node, value_node in node.value:
            if not isinstance(key_node, ScalarNode):
                continue
            key = loader.construct_object(key_node)
            if not isinstance(key, str | int | float | bool):
                continue
            child = (*path, key if isinstance(key, str | int) else str(key))
            lines[child] = key_node.start_mark.line + 1
            _record_lines(loader, value_node, child, lines)
    elif isinstance(node, SequenceNode):
        for index, item in enumerate(node.value):
            child = (*path, index)
            lines[child] = item.start_mark.line + 1
            _record_lines(loader, item, child, lines)
