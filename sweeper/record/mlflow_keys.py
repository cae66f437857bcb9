"""MLflow's alphabet of param, metric and tag keys, without importing MLflow.

The tracker cleans every key it writes with it; the analysis maps a dimension's name to the
param key the tracker wrote for it.
"""

from __future__ import annotations

import re

#: A character MLflow refuses in a key: it allows letters, digits and ``_-. /``.
BAD_KEY_CHARS = re.compile(r"[^A-Za-z0-9_\-. /]")


def clean_key(key: str) -> str:
    """MLflow keys allow letters, digits, ``_-. /``; anything else becomes ``_``."""
    return BAD_KEY_CHARS.sub("_", key)
