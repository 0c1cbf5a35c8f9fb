"""Line numbers of a YAML document's keys and items, by path, for diagnostics that name a line."""

from __future__ import annotations

from typing import Any

import yaml

Path_ = tuple[str | int, ...]
YAML_LOADER: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # libyaml when built with it: ~10x faster


class YamlLines:
    """Line numbers of every mapping key / list item in a YAML document, by path."""

    def __init__(self, text: str) -> None:
        self.lines: dict[Path_, int] = {}
        try:
            root = yaml.compose(text, Loader=YAML_LOADER)
        except yaml.YAMLError:
            return
        if root is not None:
            self._walk(root, ())

    def _walk(self, node: yaml.Node, path: Path_) -> None:
        self.lines.setdefault(path, node.start_mark.line + 1)
        if isinstance(node, yaml.MappingNode):
            for key, value in node.value:
                sub = (*path, str(key.value))
                self.lines[sub] = key.start_mark.line + 1
                self._walk(value, sub)
        elif isinstance(node, yaml.SequenceNode):
            for index, item in enumerate(node.value):
                self._walk(item, (*path, index))

    def find(self, path: Path_) -> int | None:
        while path:
            if path in self.lines:
                return self.lines[path]
            path = path[:-1]
        return self.lines.get(())
