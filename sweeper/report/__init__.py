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

:func:`compare_sweeps` puts the curves of two or more sweeps on one axis and says which is ahead
at each budget, how sure, and where the order changes (:mod:`sweeper.report.compare`);
:func:`write_comparison` writes it to a folder, :func:`log_comparison` to MLflow as a run of its own.

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
from sweeper.report.compare import CompareError, CompareUsageError, Comparison, compare_sweeps
from sweeper.report.compare_log import log_comparison
from sweeper.report.compare_page import verdict_lines, write_comparison
from sweeper.report.compare_plot import plot_comparison
from sweeper.report.filtering import FilterError, TrialFilter, parse_filter
from sweeper.report.request import ReportError

__all__ = [
    "ARTIFACT_DIR",
    "CompareError",
    "CompareUsageError",
    "Comparison",
    "FilterError",
    "Report",
    "ReportError",
    "TrialFilter",
    "build_report",
    "compare_sweeps",
    "log_comparison",
    "log_report",
    "plot_comparison",
    "parse_filter",
    "write_comparison",
    "verdict_lines",
]
