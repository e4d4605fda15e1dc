"""A YAML loader that refuses, while it composes, what would make the rest of skyless choke.

PyYAML's `SafeLoader` shares an aliased node, so a "billion laughs" (about 1 KB of aliases nesting
aliases) costs it nothing; whatever walks the value next (line positions, pydantic, JSON) expands it
and runs for minutes through gigabytes. A few thousand nesting levels overflow its recursive composer,
and a thousand documents are a thousand tasks to plan. `BoundedLoader` counts, as each node is
composed and before anything is constructed, what the value would be once aliases are expanded:
nodes, characters, nesting depth and documents, and the CPU time spent, and stops at the first
limit it passes with a `ParseLimitError` naming the limit and the line it was passed on.

Within the limits the memory a task file can take is bounded by them too: at most `MAX_YAML_NODES`
nodes and `MAX_YAML_EXPANDED_CHARS` characters, whatever walks it.
"""

from __future__ import annotations

import time
from typing import Any

import yaml
from yaml.events import AliasEvent, CollectionStartEvent
from yaml.nodes import MappingNode, Node, ScalarNode

from shared.task.limits import (
    MAX_PARSE_SECONDS,
    MAX_YAML_DEPTH,
    MAX_YAML_DOCUMENTS,
    MAX_YAML_EXPANDED_CHARS,
    MAX_YAML_NODES,
)


class ParseLimitError(Exception):
    """A task file past one of the parse limits; `line` is where the limit was passed (1-based)."""

    def __init__(self, message: str, line: int | None, limit: str) -> None:
        super().__init__(message)
        self.message = message
        self.line = line
        self.limit = limit


class BoundedLoader(yaml.SafeLoader):
    """`yaml.SafeLoader` with the limits of shared/task/limits.py checked as nodes are composed."""

    def __init__(self, stream: str) -> None:
        super().__init__(stream)
        # CPU time of this thread: the work this parse does, whatever the machine's other work is doing
        # to the wall clock (a loaded machine must not refuse a file it reads quickly when idle).
        self.deadline = time.thread_time() + MAX_PARSE_SECONDS
        self.documents = 0
        self.nodes = 0  # composed so far, every alias counted as the whole subtree it stands for
        self.chars = 0  # scalar characters so far, counted the same way
        self.depth = 0
        self.sizes: dict[int, tuple[int, int]] = {}  # id(node) -> (nodes, chars) of its expanded subtree

    def compose_document(self) -> Node | None:
        self.documents += 1
        if self.documents > MAX_YAML_DOCUMENTS:
            raise ParseLimitError(
                f"the file holds more than {MAX_YAML_DOCUMENTS} YAML documents ('---'); skyless reads "
                f"at most {MAX_YAML_DOCUMENTS} tasks a file",
                self._line(),
                "documents",
            )
        self.sizes = {}  # anchors do not outlive their document
        node: Node | None = super().compose_document()
        return node

    def compose_node(self, parent: Node | None, index: Any) -> Node | None:
        if time.thread_time() > self.deadline:
            raise ParseLimitError(
                f"reading the YAML took more than {MAX_PARSE_SECONDS:g} s of CPU, skyless's limit for a task "
                "file",
                self._line(),
                "parse time",
            )
        if self.check_event(AliasEvent):
            return self._alias(parent, index)
        self.depth += 1
        if self.depth > MAX_YAML_DEPTH and self.check_event(CollectionStartEvent):
            raise ParseLimitError(
                f"the YAML nests more than {MAX_YAML_DEPTH} levels deep, skyless's limit for a task file",
                self._line(),
                "nesting depth",
            )
        node = super().compose_node(parent, index)
        self.depth -= 1
        if node is None:
            return None
        self.sizes[id(node)] = self._size(node)
        self.nodes += 1
        if isinstance(node, ScalarNode):
            self.chars += len(node.value)
        self._check_budget()
        return node

    def _alias(self, parent: Node | None, index: Any) -> Node | None:
        event = self.peek_event()
        node = super().compose_node(parent, index)  # PyYAML refuses an undefined alias
        size = self.sizes.get(id(node))
        if size is None:
            raise ParseLimitError(
                f"the alias *{event.anchor} stands inside its own anchor &{event.anchor}: a value that "
                "contains itself has no end, and skyless does not read it",
                event.start_mark.line + 1,
                "recursive alias",
            )
        self.nodes += size[0]
        self.chars += size[1]
        self._check_budget(event.start_mark.line + 1)
        return node

    def _size(self, node: Node) -> tuple[int, int]:
        if isinstance(node, ScalarNode):
            return 1, len(node.value)
        children = (
            [part for pair in node.value for part in pair] if isinstance(node, MappingNode) else node.value
        )
        nodes, chars = 1, 0
        for child in children:
            child_nodes, child_chars = self.sizes[id(child)]
            nodes += child_nodes
            chars += child_chars
        return nodes, chars

    def _check_budget(self, line: int | None = None) -> None:
        if self.nodes <= MAX_YAML_NODES and self.chars <= MAX_YAML_EXPANDED_CHARS:
            return
        line = line if line is not None else self._line()
        if self.nodes > MAX_YAML_NODES:
            raise ParseLimitError(
                f"the YAML holds more than {MAX_YAML_NODES:,} values once its aliases (*name) are expanded, "
                "skyless's limit for a task file",
                line,
                "values",
            )
        if self.chars > MAX_YAML_EXPANDED_CHARS:
            raise ParseLimitError(
                f"the YAML holds more than {MAX_YAML_EXPANDED_CHARS // 1024} KiB of text once its aliases "
                "(*name) are expanded, skyless's limit for a task file",
                line,
                "expanded text",
            )

    def _line(self) -> int | None:
        event = self.peek_event() if self.check_event() else None
        return event.start_mark.line + 1 if event is not None and event.start_mark is not None else None
