"""MkDocs hook: fills ``<!-- settings-reference -->`` markers with tables generated from config.py.

``<!-- settings-reference -->`` becomes the whole reference (docs/settings.md);
``<!-- settings-reference env -->`` one block's table. The generator is
``hydra_plugins.multiverse_sweeper._reference``; this file only wires it into the build.
"""

from __future__ import annotations

from typing import Any

from hydra_plugins.multiverse_sweeper._reference import fill_markers


def on_page_markdown(markdown: str, page: Any, config: Any, files: Any) -> str:
    return fill_markers(markdown)
