"""YAML read with limits: safe tags only, aliases may not expand a document past a small budget, nesting capped.

PyYAML's safe loader (libyaml when present) shares one Python object between an anchor and its aliases,
so a 500-byte "billion laughs" note loads in microseconds; it is everything that walks the result later
(JSON for the cache, comparisons, `str`) that expands it to gigabytes. So the composed node graph is
measured before anything is constructed: the size it would have with every alias expanded, in linear
time, and a document over budget is refused with the line of the collection that crossed it.
"""

from __future__ import annotations

import math
from datetime import date

import yaml
from yaml.nodes import MappingNode, ScalarNode, SequenceNode

# Nodes that aliases may add to a document (a legitimate anchor is reused a few times, not thousands).
MAX_ALIAS_NODES = 10_000
MAX_EXPANDED_CHARS = 1_000_000  # text of every scalar with aliases expanded: the note size limit
MAX_DEPTH = 100  # libyaml stops at 1000; deeper than this is no frontmatter, and recursive walks choke on it
JSON_KEYS = (str, int, float, bool, type(None))

_Base = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


class LimitExceeded(yaml.YAMLError):
    """A document over one of the limits; `problem` and `problem_mark` as in PyYAML's own errors."""

    def __init__(self, problem: str, mark):
        super().__init__(problem)
        self.problem = problem
        self.problem_mark = mark

    def __str__(self) -> str:
        return self.problem


def _measure(root) -> None:
    """Raise LimitExceeded when the node graph is cyclic, or with aliases expanded too big or too deep."""
    sizes: dict[int, tuple[int, int, int]] = {}  # id(node) -> (nodes, chars, depth) with aliases expanded
    distinct = 0
    open_: set[int] = set()
    stack: list[tuple[object, bool]] = [(root, False)]
    while stack:
        node, children_done = stack.pop()
        key = id(node)
        if children_done:
            open_.discard(key)
            nodes, chars, depth = 1, 0, 0
            for child in _children(node):
                child_nodes, child_chars, child_depth = sizes[id(child)]
                nodes, chars, depth = nodes + child_nodes, chars + child_chars, max(depth, child_depth)
            sizes[key] = (nodes, chars, depth + 1)
            if nodes > distinct + MAX_ALIAS_NODES or chars > MAX_EXPANDED_CHARS:
                raise LimitExceeded(f"aliases expand it past {MAX_ALIAS_NODES:,} extra values or "
                                    f"{MAX_EXPANDED_CHARS:,} characters (a YAML alias bomb?)", node.start_mark)
            if depth + 1 > MAX_DEPTH:
                raise LimitExceeded(f"it is nested more than {MAX_DEPTH} levels deep", node.start_mark)
            continue
        if key in sizes:
            continue  # an alias of a node already measured
        if key in open_:
            raise LimitExceeded("an alias refers to the collection that contains it (recursive YAML)",
                                node.start_mark)
        distinct += 1
        if isinstance(node, ScalarNode):
            sizes[key] = (1, len(node.value), 1)
            continue
        open_.add(key)
        stack.append((node, True))
        stack.extend((child, False) for child in _children(node))


def _children(node) -> list:
    if isinstance(node, SequenceNode):
        return node.value
    if isinstance(node, MappingNode):
        return [part for pair in node.value for part in pair]
    return []


class LimitedLoader(_Base):
    """The safe loader, measuring each document before constructing it; mapping keys kept JSON-compatible."""

    measure = True

    def get_single_data(self):
        node = self.get_single_node()
        if node is None:
            return None
        if self.measure:
            _measure(node)
        return self.construct_document(node)

    def construct_mapping(self, node, deep=False):
        mapping = super().construct_mapping(node, deep=deep)
        if all(isinstance(k, JSON_KEYS) for k in mapping):
            return mapping
        # `2024-01-01: x` makes a date key; JSON (the note cache) and most YAML readers want text keys.
        return {k if isinstance(k, JSON_KEYS) else (k.isoformat() if isinstance(k, date) else str(k)): v
                for k, v in mapping.items()}


def _forgiving(construct):
    """A scalar constructor that keeps the written text where PyYAML raises a plain Python error
    (`created: 2024-02-30`, `!!bool maybe`, a 5000-digit number) or makes a float JSON cannot hold (.nan, .inf)."""
    def forgiving(loader, node):
        try:
            value = construct(loader, node)
        except (ValueError, TypeError, KeyError, AttributeError, OverflowError):
            return node.value
        return node.value if isinstance(value, float) and not math.isfinite(value) else value
    return forgiving


def _construct_set(loader, node) -> list:
    """`!!set {a, b}` as the list of its members in the order written: a Python set would iterate in an order that
    changes with each process's hash seed, so the same note would cache (and show) differently run to run."""
    if not isinstance(node, MappingNode):  # `!!set [a, b]`, `!!set ab`: refused as PyYAML refuses them
        raise yaml.constructor.ConstructorError(None, None, f"a set must be a mapping, not a {node.id}",
                                                node.start_mark)
    loader.flatten_mapping(node)  # `<<: *base` merges, as in any mapping
    members = [loader.construct_object(key, deep=True) for key, _ in node.value]
    try:
        return list(dict.fromkeys(members))
    except TypeError:  # as PyYAML's own set: a list or mapping cannot be a member
        raise yaml.constructor.ConstructorError("while constructing a set", node.start_mark,
                                                "found an unhashable member", node.start_mark) from None


LimitedLoader.add_constructor("tag:yaml.org,2002:set", _construct_set)

for _tag in ("int", "float", "bool", "null", "timestamp"):
    _name = f"tag:yaml.org,2002:{_tag}"
    LimitedLoader.add_constructor(_name, _forgiving(LimitedLoader.yaml_constructors[_name]))


def _needs_measuring(text: str) -> bool:
    """False when the text cannot break a limit: no alias (`*`), and too few indicators to nest MAX_DEPTH deep."""
    return "*" in text or sum(map(text.count, "[{-:?")) >= MAX_DEPTH


def load(text: str):
    """One YAML document, safely and within the limits; raises yaml.YAMLError (LimitExceeded included)."""
    loader = LimitedLoader(text)
    loader.measure = _needs_measuring(text)  # the walk costs ~10 us a note; most notes need none
    try:
        return loader.get_single_data()
    finally:
        loader.dispose()
