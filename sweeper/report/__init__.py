"""``sweeper report``: a sweep's records turned into a report that holds up.

The report (Markdown and HTML with the figures, plus CSV/JSON of every number) has:

- the expected best score vs budget (Dodge et al. 2019), per group, in trials and seconds,
  with a prominent warning when the trials were not i.i.d. random draws and a GP
  surrogate-based curve instead (:mod:`sweeper.report.surrogate`);
- QRA of every group of repeated measurements with Belz et al.'s conditions-of-measurement
  table (:mod:`sweeper.report.groups`);
- paired tests between two values of an environment condition (Crane 2018);
- failed and filtered trials (:mod:`sweeper.report.filtering`);
- Dodge et al.'s reporting checklist filled from the records (:mod:`sweeper.report.checklist`).

Building needs no MLflow (:func:`build_report` takes
:class:`~sweeper.analysis.runs.SweepRecords`); :func:`log_report` attaches the files to
the sweep's parent run. Usage::

    from sweeper.analysis import load_sweep
    from sweeper.report import build_report, log_report
    from sweeper.record.tracking import MLflowTracker

    records = load_sweep("svm-breast-cancer", "sqlite:///mlruns.db")
    report = build_report(records, group_by="kernel", out_dir=Path("report-svm"))
    log_report(report, MLflowTracker(records.tracking_uri, records.experiment))
"""

from __future__ import annotations

from sweeper.report.build_report import ARTIFACT_DIR, Report, build_report, log_report
from sweeper.report.filtering import FilterError, TrialFilter, parse_filter
from sweeper.report.request import ReportError

__all__ = [
    "ARTIFACT_DIR",
    "FilterError",
    "Report",
    "ReportError",
    "TrialFilter",
    "build_report",
    "log_report",
    "parse_filter",
]
