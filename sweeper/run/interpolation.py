"""Values of a config's interpolated nodes, as OmegaConf resolves them, each interpolation's text parsed once.

Why: OmegaConf parses an interpolation's text with its ANTLR grammar every time it resolves it,
about 0.2 ms for ``${hydra.job.num}`` (NOTE: docs/decisions/0064-per-trial-job-work.md). Every trial
of a worker process reads the same few interpolations of the hydra node: the job's output directory
(``hydra.sweep.dir``, ``hydra.sweep.subdir``) and its log file's name (``hydra.job_logging``); their
values change from trial to trial (the job's number is in them), their text does not.

What: :func:`value_of` is ``parent[key]``: a node that is not an interpolation, or whose resolution
fails (for OmegaConf's own error message), goes through ``parent[key]``; an interpolation is resolved
by OmegaConf's own step (``Container._resolve_interpolation_from_parse_tree``, what ``parent[key]``
runs after parsing: node interpolations, resolvers and their cache, type conversion of a typed node)
from a parse tree kept by text. A parse tree is only read when resolved (its tokens keep their own
input), so one tree serves every resolution of its text. ``_resolve_interpolation_from_parse_tree``
is OmegaConf's private API: where it is missing, :func:`value_of` is ``parent[key]``. How breakage
shows: tests/unit/test_interpolation.py.
"""

from __future__ import annotations

from typing import Any

from omegaconf import Container, ValueNode
from omegaconf._utils import _get_value
from omegaconf.grammar_parser import parse

#: Parse trees by interpolation text (a process's trials read a handful; bounded in case of more).
_TREES: dict[str, Any] = {}
_MAX_TREES = 256


def value_of(parent: Container, key: Any) -> Any:
    """``parent[key]`` (an interpolation resolved), its text parsed once per process."""
    node = parent._get_node(key)  # noqa: SLF001 - OmegaConf has no public call for a child's node
    if not isinstance(node, ValueNode) or not node._is_interpolation():  # noqa: SLF001 - as parent[key] asks
        return parent[key]
    text = node._value()  # noqa: SLF001 - the interpolation's text
    try:
        tree = _TREES.get(text)
        if tree is None:
            if len(_TREES) >= _MAX_TREES:
                _TREES.clear()
            tree = _TREES[text] = parse(text)
        resolved = parent._resolve_interpolation_from_parse_tree(  # noqa: SLF001 - parent[key]'s step after parsing
            parent=parent, value=node, key=key, parse_tree=tree, throw_on_resolution_failure=True, memo=set())
    except Exception:  # noqa: BLE001 - parent[key] raises OmegaConf's own error (or resolves, where the API differs)
        return parent[key]
    return _get_value(resolved)
