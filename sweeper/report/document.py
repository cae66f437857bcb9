"""The report as a list of blocks, written as Markdown (figures as files) or HTML (figures inlined).

Inline text may hold ``**bold**`` and ```code``` spans; both writers understand them, and
the HTML writer escapes everything else.
"""

from __future__ import annotations

import base64
import html
import os
import re
import shutil
import tempfile
import weakref
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import matplotlib.figure
    import pandas as pd

_INLINE = re.compile(r"\*\*(.+?)\*\*|`([^`]+)`")


@dataclass(frozen=True)
class Heading:
    text: str
    level: int = 2


@dataclass(frozen=True)
class Paragraph:
    text: str


@dataclass(frozen=True)
class Bullets:
    items: tuple[str, ...]


@dataclass(frozen=True)
class Table:
    header: tuple[str, ...]
    rows: tuple[tuple[str, ...], ...]


@dataclass(frozen=True)
class Figure:
    file: str  # a PNG next to the report
    caption: str


Block = Heading | Paragraph | Bullets | Table | Figure


def table(header: Sequence[str], rows: Sequence[Sequence[object]]) -> Table:
    """Build a :class:`Table`, writing each cell with :func:`cell`."""
    return Table(tuple(header), tuple(tuple(cell(v) for v in row) for row in rows))


def cell(value: object) -> str:
    """A table cell: floats to 6 significant digits, None/NaN as an em dash."""
    if value is None or (isinstance(value, float) and value != value):
        return "—"
    if isinstance(value, float):
        return f"{value:.6g}"
    return str(value)


def _md_cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def render_markdown(blocks: Sequence[Block]) -> str:
    """Write the blocks as GitHub-flavoured Markdown; figures reference their PNG files."""
    out: list[str] = []
    for b in blocks:
        if isinstance(b, Heading):
            out.append(f"{'#' * b.level} {b.text}")
        elif isinstance(b, Paragraph):
            out.append(b.text)
        elif isinstance(b, Bullets):
            out.append("\n".join(f"- {item}" for item in b.items))
        elif isinstance(b, Table):
            lines = ["| " + " | ".join(_md_cell(h) for h in b.header) + " |",
                     "|" + "|".join("---" for _ in b.header) + "|"]
            lines += ["| " + " | ".join(_md_cell(c) for c in row) + " |" for row in b.rows]
            out.append("\n".join(lines))
        else:
            out.append(f"![{b.caption}]({b.file})\n\n*{b.caption}*")
    return "\n\n".join(out) + "\n"


def _inline(text: str) -> str:
    parts: list[str] = []
    pos = 0
    for m in _INLINE.finditer(text):
        parts.append(html.escape(text[pos:m.start()]))
        parts.append(f"<strong>{_inline(m.group(1))}</strong>" if m.group(1) is not None
                     else f"<code>{html.escape(m.group(2))}</code>")
        pos = m.end()
    parts.append(html.escape(text[pos:]))
    return "".join(parts)


_STYLE = """
body{font-family:system-ui,-apple-system,Segoe UI,sans-serif;max-width:1100px;margin:2em auto;padding:0 1em;
line-height:1.45;color:#222}
table{border-collapse:collapse;margin:.6em 0;font-size:.9em}th,td{border:1px solid #ccc;padding:.25em .5em;
text-align:left;vertical-align:top}th{background:#f3f3f3}code{background:#f3f3f3;padding:0 .2em}
figure{margin:1em 0}figcaption{font-style:italic;font-size:.9em}img{max-width:100%}
"""


def render_html(blocks: Sequence[Block], title: str, figure_dir: Path) -> str:
    """Write the blocks as one self-contained HTML page, PNGs inlined as base64 data URIs."""
    out = [f"<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>{html.escape(title)}</title>"
           f"<style>{_STYLE}</style></head><body>"]
    for b in blocks:
        if isinstance(b, Heading):
            out.append(f"<h{b.level}>{_inline(b.text)}</h{b.level}>")
        elif isinstance(b, Paragraph):
            out.append(f"<p>{_inline(b.text)}</p>")
        elif isinstance(b, Bullets):
            out.append("<ul>" + "".join(f"<li>{_inline(i)}</li>" for i in b.items) + "</ul>")
        elif isinstance(b, Table):
            head = "".join(f"<th>{_inline(h)}</th>" for h in b.header)
            body = "".join("<tr>" + "".join(f"<td>{_inline(c)}</td>" for c in row) + "</tr>" for row in b.rows)
            out.append(f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>")
        else:
            data = base64.b64encode((figure_dir / b.file).read_bytes()).decode("ascii")
            out.append(f"<figure><img alt=\"{html.escape(b.caption)}\" src=\"data:image/png;base64,{data}\">"
                       f"<figcaption>{_inline(b.caption)}</figcaption></figure>")
    out.append("</body></html>")
    return "\n".join(out) + "\n"


#: The file every folder the analysis commands write holds: a folder without it is not replaced.
MARKER = "summary.json"


class OutputDirError(ValueError):
    """An output folder cannot be (re)written; the message says why and what to do."""


def check_replaceable(path: Path) -> None:
    """Refuse a target the commands must not delete: a file, or a non-empty folder without :data:`MARKER`.

    A report replaces its whole folder (no file of an earlier report may outlive it), so an
    ``--out`` naming, say, the project's root must stop the command before anything is written.
    """
    path = Path(path)
    if path.exists() and not path.is_dir():
        raise OutputDirError(f"--out {path}: it is a file, not a folder; give a new folder")
    if path.is_dir() and any(path.iterdir()) and not (path / MARKER).is_file():
        raise OutputDirError(f"--out {path}: the folder holds files but no {MARKER}, so it is not an earlier "
                             f"report or map, and it would be replaced as a whole; give a new or empty folder")


class OutputDir:
    """The report's folder: writes each file once and remembers it, in order.

    The files go to a new hidden folder beside ``path`` (:attr:`path`), which :meth:`commit`
    swaps in for ``path`` as a whole: no file of an earlier report survives into this one, and a
    build that fails midway leaves the earlier report as it was (its staging folder is deleted
    when this object is, or at exit). :attr:`target` is where the files will be.

    Raises:
        OutputDirError: ``path`` is a file or a folder of something else (:func:`check_replaceable`).
    """

    def __init__(self, path: Path) -> None:
        self.target = Path(path).resolve()
        check_replaceable(self.target)
        self.target.parent.mkdir(parents=True, exist_ok=True)
        self.path = Path(tempfile.mkdtemp(prefix=f".{self.target.name}.", suffix=".partial", dir=self.target.parent))
        self._discard = weakref.finalize(self, shutil.rmtree, self.path, True)
        self.files: list[Path] = []

    @property
    def final_files(self) -> list[Path]:
        """The files written, at the paths they have once committed."""
        return [self.target / p.name for p in self.files]

    def commit(self) -> Path:
        """Replace ``target`` (if any) by the written folder; return ``target``.

        Two renames: the old folder to a hidden name, the new one to ``target``; then the old one
        is deleted. Only a crash between the renames leaves ``target`` missing (the old folder
        then remains beside it as ``.<name>.*.old``).
        """
        check_replaceable(self.target)  # as at the start: something else may have appeared there meanwhile
        self._discard.detach()
        old = None
        if self.target.exists():
            old = Path(tempfile.mkdtemp(prefix=f".{self.target.name}.", suffix=".old", dir=self.target.parent))
            os.replace(self.target, old / self.target.name)
        os.replace(self.path, self.target)
        self.files, self.path = self.final_files, self.target
        if old is not None:
            shutil.rmtree(old, ignore_errors=True)
        return self.target

    def _add(self, name: str) -> Path:
        path = self.path / name
        if path not in self.files:
            self.files.append(path)
        return path

    def text(self, name: str, text: str) -> Path:
        """Write a UTF-8 text file."""
        path = self._add(name)
        path.write_text(text, encoding="utf-8")
        return path

    def csv(self, name: str, frame: pd.DataFrame) -> Path:
        """Write a pandas DataFrame as CSV (floats at full precision, no index)."""
        path = self._add(name)
        frame.to_csv(path, index=False, float_format="%.17g")
        return path

    def figure(self, name: str, fig: matplotlib.figure.Figure) -> Path:
        """Save a matplotlib Figure as PNG."""
        path = self._add(name)
        fig.savefig(path, dpi=110)
        return path
