"""Shared paths for the test suite."""

from __future__ import annotations

from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
