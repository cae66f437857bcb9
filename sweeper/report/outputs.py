"""Where the analysis commands put what they write: folder names keyed by what the folder holds.

A report or a map belongs to one sweep (its parent run), one filter (or none) and, for maps, one
kernel. Its local folder and its MLflow artifact folder are named by all of them, so the report
of another sweep of the same experiment, or a filtered report, never overwrites (or leaves files
in) another one:

- ``report-<experiment>-<run8>[-<filter hash>]/``, logged under ``report/`` (no filter) or
  ``report-filtered-<filter hash>/``;
- ``multiverse-<experiment>-<run8>-<kernel>[-<filter hash>]/``, logged under
  ``multiverse/<kernel>/`` or ``multiverse/<kernel>-filtered-<filter hash>/``.

``<run8>`` is the first 8 characters of the sweep's parent run id; the filter hash is the first
8 hex digits of the SHA-256 of the parsed rule, so ``"acc>=0.9"`` and ``"acc >= 0.90"`` share it.
"""

from __future__ import annotations

import hashlib
import re

from sweeper.report.filtering import TrialFilter

#: The MLflow artifact folder of an unfiltered report.
REPORT_ARTIFACT_DIR = "report"
#: The MLflow artifact folder of the maps of each kernel, ``multiverse/<kernel>``.
MULTIVERSE_ARTIFACT_DIR = "multiverse"


def filter_hash(rule: TrialFilter | None) -> str | None:
    """The 8 hex digits naming a filter (None for no filter): equal rules, however spelled, share it."""
    if rule is None:
        return None
    return hashlib.sha256(f"{rule.metric} {rule.op} {rule.value!r}".encode()).hexdigest()[:8]


def slug(name: str) -> str:
    """A name safe as one path component (an experiment may be called ``team/svm v2``)."""
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", name).strip(".") or "_"


def report_folder(experiment: str, parent_run_id: str, rule: TrialFilter | None) -> str:
    """The default local folder of a report, e.g. ``report-svm-3f2a9c1d`` or ``report-svm-3f2a9c1d-0b1e22aa``."""
    digest = filter_hash(rule)
    return f"report-{slug(experiment)}-{parent_run_id[:8]}" + (f"-{digest}" if digest else "")


def multiverse_folder(experiment: str, parent_run_id: str, kernel: str, rule: TrialFilter | None) -> str:
    """The default local folder of a multiverse analysis, e.g. ``multiverse-svm-3f2a9c1d-matern52-ard``."""
    digest = filter_hash(rule)
    return f"multiverse-{slug(experiment)}-{parent_run_id[:8]}-{kernel}" + (f"-{digest}" if digest else "")


def report_artifact_dir(rule: TrialFilter | None) -> str:
    """The MLflow artifact folder of a report: ``report`` or ``report-filtered-<hash>``."""
    digest = filter_hash(rule)
    return f"{REPORT_ARTIFACT_DIR}-filtered-{digest}" if digest else REPORT_ARTIFACT_DIR


def multiverse_artifact_dir(kernel: str, rule: TrialFilter | None) -> str:
    """The MLflow artifact folder of a multiverse analysis: ``multiverse/<kernel>[-filtered-<hash>]``."""
    digest = filter_hash(rule)
    return f"{MULTIVERSE_ARTIFACT_DIR}/{kernel}" + (f"-filtered-{digest}" if digest else "")
