"""Griffe extension: the docstrings' few reStructuredText habits, read as the Markdown mkdocstrings renders.

Loaded by mkdocstrings (mkdocs.yml), before a docstring is parsed:

- ``Example:`` sections become ``Examples:``: griffe parses only the plural as doctest code,
  Napoleon (Sphinx) reads both;
- Sphinx roles (``:func:`name```, ``:class:`~pkg.mod.Name```) become code spans of the name
  (the last part only after ``~``, as Sphinx shows them);
- a paragraph ending in ``::`` before a literal block ends in ``:`` (the block, indented, is
  Markdown code already).
"""

from __future__ import annotations

import re
from typing import Any

from griffe import Extension

_EXAMPLE = re.compile(r"^(\s*)Example:[ \t]*$", re.M)
_ROLE = re.compile(r":(?:func|class|meth|mod|attr|data|exc|obj|const):`(~?)([^`]+)`")
_LITERAL = re.compile(r"(\S)::[ \t]*$", re.M)


def _role(match: re.Match[str]) -> str:
    name = match.group(2)
    return f"`{name.rsplit('.', 1)[-1] if match.group(1) else name}`"


def markdown(docstring: str) -> str:
    """``docstring`` with the reStructuredText habits above replaced by their Markdown forms."""
    docstring = _EXAMPLE.sub(r"\1Examples:", docstring)
    docstring = _ROLE.sub(_role, docstring)
    return _LITERAL.sub(r"\1:", docstring)


class MarkdownDocstrings(Extension):
    """Rewrite each docstring with :func:`markdown` when griffe loads its object."""

    def on_instance(self, *, obj: Any, **kwargs: Any) -> None:
        if obj.docstring is not None:
            obj.docstring.value = markdown(obj.docstring.value)
