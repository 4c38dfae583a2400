"""What the frontmatter editor reads from a composed YAML node, as a comparable value."""

from __future__ import annotations

from ruamel.yaml.nodes import MappingNode, ScalarNode


def shape(node) -> object:
    """Class, tag, start and end marks (index, line, column), anchor, styles and value, recursively."""
    marks = (type(node).__name__, node.tag, node.start_mark.index, node.start_mark.line, node.start_mark.column,
             node.end_mark.index, node.end_mark.line, node.end_mark.column, node.anchor,
             getattr(node, "flow_style", None), getattr(node, "style", None))
    if isinstance(node, ScalarNode):
        return marks + (node.value,)
    if isinstance(node, MappingNode):
        return marks + tuple((shape(k), shape(v)) for k, v in node.value)
    return marks + tuple(shape(item) for item in node.value)
