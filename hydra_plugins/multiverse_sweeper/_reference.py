"""The settings reference of the docs (docs/settings.md), generated from the dataclasses of config.py.

A setting's description is the comment written with its field in ``config.py``: the comment lines
directly above the field, then its trailing ``# comment``. A field with neither raises
:class:`UndocumentedSetting`, so the reference cannot silently lose a setting's documentation.
Fields whose type is itself a dataclass (``ray.resources_per_trial``) are expanded into their own
keys; fields named ``_like_this_`` (Hydra's ``_target_``) are not settings and are left out.

Only the docs build (docs/hooks/settings_reference.py) and its test import this module. The
leading underscore keeps it out of the plugin scan Hydra runs at every application start; it
imports only the standard library at module level, and ``config`` when a reference is asked for.
"""

from __future__ import annotations

import ast
import dataclasses
import io
import re
import tokenize
from dataclasses import dataclass
from pathlib import Path
from typing import Any

#: The documented blocks: the key prefix a user types, and the dataclass of config.py behind it.
SECTIONS: tuple[tuple[str, str], ...] = (
    ("hydra.sweeper", "MultiverseSweeperConf"),
    ("ray", "RayConf"),
    ("mlflow", "MLflowConf"),
    ("env", "EnvConf"),
)


class UndocumentedSetting(ValueError):
    """A config field has no comment to describe it in the settings reference."""


@dataclass(frozen=True)
class Setting:
    """One row of the reference: what a user types, its type, its default, and what it does."""

    key: str  # e.g. "hydra.sweeper.strategy"
    type: str  # e.g. "float or null"
    default: str  # as YAML writes it: null, true, [], {cpu: 1.0}
    description: str


def field_comments(source: str) -> dict[int, str]:
    """Line number -> the text of the ``#`` comment on that line (the ``#`` and spaces stripped)."""
    comments = {}
    for token in tokenize.generate_tokens(io.StringIO(source).readline):
        if token.type == tokenize.COMMENT:
            comments[token.start[0]] = token.string.lstrip("#:").strip()
    return comments


def _type_name(node: ast.expr) -> str:
    """``Optional[List[str]]`` or ``list[str] | None`` -> ``list of str or null``: the annotation as a YAML user
    reads it."""
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.BitOr):
        return f"{_type_name(node.left)} or {_type_name(node.right)}"
    if isinstance(node, ast.Constant) and node.value is None:
        return "null"
    if isinstance(node, ast.Subscript):
        outer = ast.unparse(node.value)
        inner = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
        if outer == "Optional":
            return f"{_type_name(inner[0])} or null"
        if outer in ("List", "list"):
            item = ast.unparse(inner[0])
            return "list" if item == "Any" else f"list of {_type_name(inner[0])}"
        if outer in ("Dict", "dict"):
            return "mapping"
    return {"Any": "any", "str": "str", "int": "int", "float": "float", "bool": "bool"}.get(ast.unparse(node),
                                                                                           ast.unparse(node))


def yaml_value(value: Any) -> str:
    """``value`` as it is written in YAML flow style (null, true, [a, b], {k: v})."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(yaml_value(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k}: {yaml_value(v)}" for k, v in value.items()) + "}"
    if dataclasses.is_dataclass(value):
        return yaml_value(dataclasses.asdict(value))  # type: ignore[arg-type]  # an instance, not the class
    return str(value)


def _default(f: dataclasses.Field[Any]) -> Any:
    if f.default is not dataclasses.MISSING:
        return f.default
    if f.default_factory is not dataclasses.MISSING:
        return f.default_factory()
    return dataclasses.MISSING


def describe(cls: type, source: str, prefix: str, filename: str = "config.py") -> list[Setting]:
    """The settings of dataclass ``cls``, defined in ``source``, as keys under ``prefix``.

    Raises:
        UndocumentedSetting: a field has no comment above it nor on its line.
    """
    tree = ast.parse(source)
    classes = {node.name: node for node in ast.walk(tree) if isinstance(node, ast.ClassDef)}
    comments = field_comments(source)
    lines = source.splitlines()
    fields = {f.name: f for f in dataclasses.fields(cls)}
    rows: list[Setting] = []
    for node in classes[cls.__name__].body:
        if not (isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name)):
            continue
        name = node.target.id
        if name.startswith("_") or name not in fields:
            continue
        key = f"{prefix}.{name}"
        annotated = fields[name].type
        nested = (annotated if isinstance(annotated, type) and dataclasses.is_dataclass(annotated)
                  else next(iter(_dataclasses_named(cls, ast.unparse(node.annotation))), None))
        if nested is not None:
            rows += describe(nested, source, key, filename)
            continue
        above: list[str] = []
        line = node.lineno - 1
        while line >= 1 and lines[line - 1].strip().startswith("#"):
            above.insert(0, comments.get(line, ""))
            line -= 1
        trailing = [comments[n] for n in range(node.lineno, (node.end_lineno or node.lineno) + 1) if n in comments]
        description = " ".join(part for part in above + trailing if part)
        if not description:
            raise UndocumentedSetting(
                f"{filename}:{node.lineno}: {cls.__name__}.{name} ({key}) has no comment: write what it does "
                f"in a `# comment` on its line or the line above (docs/settings.md is generated from them)")
        default = _default(fields[name])
        rows.append(Setting(key, _type_name(node.annotation),
                            "" if default is dataclasses.MISSING else yaml_value(default), description))
    return rows


def _dataclasses_named(cls: type, name: str) -> list[type]:
    """The dataclass called ``name`` in the module that defines ``cls``, if there is one."""
    import sys

    found = getattr(sys.modules.get(cls.__module__), name, None)
    return [found] if isinstance(found, type) and dataclasses.is_dataclass(found) else []


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


def _code(text: str) -> str:
    return f"`{text}`" if text else ""


def table(rows: list[Setting]) -> str:
    """The rows as a Markdown table: key, type, default, meaning."""
    out = ["| key | type | default | meaning |", "|---|---|---|---|"]
    out += [f"| {_code(r.key)} | {_cell(r.type)} | {_cell(_code(r.default))} | {_cell(r.description)} |"
            for r in rows]
    return "\n".join(out)


def _config() -> tuple[Any, str, str]:
    from hydra_plugins.multiverse_sweeper import config

    path = Path(config.__file__)
    return config, path.read_text(encoding="utf-8"), f"hydra_plugins/multiverse_sweeper/{path.name}"


def settings(prefix: str) -> list[Setting]:
    """Every setting of one block of :data:`SECTIONS` (``"hydra.sweeper"``, ``"ray"``, ``"mlflow"``, ``"env"``)."""
    config, source, filename = _config()
    name = dict(SECTIONS)[prefix]
    return describe(getattr(config, name), source, prefix, filename)


def env_presets() -> str:
    """The ``env`` presets (``env=reproducible``, ``env=fast``) as a table of what each sets."""
    config, _, _ = _config()
    default = dataclasses.asdict(config.EnvConf())
    out = ["| preset | sets (the other `env.*` keys keep their defaults) |", "|---|---|"]
    for name, preset in config.ENV_PRESETS.items():
        changed = [f"`env.{k}={yaml_value(v)}`" for k, v in dataclasses.asdict(preset).items() if v != default[k]]
        out.append(f"| `env={name}` | {', '.join(changed) or 'nothing: every default'} |")
    return "\n".join(out)


def section(prefix: str, heading: str = "##") -> str:
    """One block: a heading (``heading`` empty: none), the dataclass's summary, and its table."""
    config, _, _ = _config()
    cls = getattr(config, dict(SECTIONS)[prefix])
    summary = (cls.__doc__ or "").strip().split("\n\n")[0].replace("\n", " ")
    parts = [f"{heading} `{prefix}` {{#{prefix.replace('.', '-')}}}"] if heading else []
    parts += [f"{summary} (`{cls.__name__}`)", table(settings(prefix))]
    if prefix == "env":
        parts += ["Presets of the `env` group:", env_presets()]
    return "\n\n".join(parts)


def settings_reference() -> str:
    """The whole reference: one section per block of :data:`SECTIONS`."""
    return "\n\n".join(section(prefix) for prefix, _ in SECTIONS)


_MARKER = re.compile(r"<!-- settings-reference(?: ([\w.]+))? -->")


def fill_markers(markdown: str) -> str:
    """Replace ``<!-- settings-reference -->`` with the whole reference, and ``<!-- settings-reference env -->``
    with one block's table (no heading)."""
    return _MARKER.sub(lambda m: section(m.group(1), heading="") if m.group(1) else settings_reference(), markdown)
