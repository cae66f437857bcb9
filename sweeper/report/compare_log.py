"""A comparison in MLflow: a run of its own that links the sweeps it compares, and a tag on each of them.

The run (tag ``sweeper.role = comparison``; never a sweep, so no command takes it for one) goes into
the first sweep's experiment unless another is named: a comparison usually pits a new sweep against
the one before it, and the first sweep's experiment is where its reader looks. One run stands for
one question, the ordered sweeps, metric and mode (tag ``sweeper.compare_key``): asking it again
replaces that run's ``compare/`` artifacts and description rather than adding a run. The run's
description (``mlflow.note.content``, shown at the top of its page in the MLflow UI) names and links
each sweep's run and says who is ahead where; its tags ``sweeper.compared.<i>`` hold the sweeps' run
ids. Each compared sweep gets the tag ``sweeper.compared_in.<comparison run id>`` back.

NOTE: docs/decisions/0041-compare-run.md
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import TYPE_CHECKING

from sweeper.record.note import NOTE_TAG
from sweeper.report.build_report import log_files
from sweeper.report.compare_page import verdict_lines

if TYPE_CHECKING:
    from sweeper.record.tracking import MLflowTracker
    from sweeper.report.compare import Comparison
    from sweeper.report.compare_page import ComparisonFiles

#: The main file of a comparison, the one its description links.
MAIN_FILE = "compare.html"


@dataclass(frozen=True)
class LoggedComparison:
    """Where a comparison went in MLflow.

    Attributes:
        tracker: The writer of the comparison's experiment.
        run_id: The comparison's run.
        artifacts: The artifact paths written, e.g. ``compare/compare.md``.
        stale: Files of an earlier comparison the store could not delete (see
            :class:`~sweeper.report.build_report.ArtifactsNotReplaced`); empty when the folder was replaced.
    """

    tracker: MLflowTracker
    run_id: str
    artifacts: list[str]
    stale: str | None = None


def compare_key(c: Comparison) -> str:
    """What one comparison run stands for: the sweeps' run ids in order, the metric and the mode."""
    return " ".join([*(k.records.parent_run_id for k in c.curves), c.metric, c.mode])


def log_comparison(written: ComparisonFiles, *, experiment: str | None = None, command: str | None = None,
                   local_dir: str | None = None) -> LoggedComparison:
    """Log a written comparison to the sweeps' store as a run of its own, and tag each compared sweep.

    Args:
        written: The comparison's files (:func:`~sweeper.report.compare_page.write_comparison`).
        experiment: Where the run goes; default the first sweep's experiment (created when absent).
        command: The command that made it, shown in the description.
        local_dir: Where its files were written, shown in the description.

    Returns:
        The :class:`LoggedComparison`; its ``stale`` names old files the store kept.
    """
    from sweeper.record.tracking import MLflowTracker
    from sweeper.report.build_report import ArtifactsNotReplaced

    c = written.comparison
    first = c.curves[0].records
    tracker = MLflowTracker(first.tracking_uri, experiment or first.experiment)
    key = compare_key(c)
    run_id = tracker.run_tagged("compare_key", key) or tracker.start_run(
        "compare-" + "-".join(k.records.parent_run_id[:8] for k in c.curves),
        tags={"role": "comparison", "compare_key": key})
    stale = None
    try:
        artifacts = log_files(written.files, tracker, run_id, written.artifact_dir)
    except ArtifactsNotReplaced as exc:
        artifacts, stale = [f"{written.artifact_dir}/{p.name}" for p in written.files], str(exc)
    links = {k.records.parent_run_id: MLflowTracker(first.tracking_uri, k.records.experiment).run_url(
        k.records.parent_run_id) for k in c.curves}
    artifact_uri = tracker.client.get_run(run_id).info.artifact_uri
    tracker.log(run_id, tags={
        "metric": c.metric, "mode": c.mode, "compared_runs": ",".join(links),
        **{f"compared.{i}": k.records.parent_run_id for i, k in enumerate(c.curves, 1)},
        NOTE_TAG: render_note(c, links, command=command, artifact_uri=artifact_uri, local_dir=local_dir,
                              artifact_dir=written.artifact_dir)})
    tracker.finish(run_id)
    for k in c.curves:
        others = [i for i in links if i != k.records.parent_run_id]
        tracker.log(k.records.parent_run_id, tags={f"compared_in.{run_id}": json.dumps(
            {"experiment": tracker.experiment_name, "with": others, "file": f"{written.artifact_dir}/{MAIN_FILE}"})})
    return LoggedComparison(tracker=tracker, run_id=run_id, artifacts=artifacts, stale=stale)


def render_note(c: Comparison, links: dict[str, str], *, command: str | None, artifact_uri: str | None,
                local_dir: str | None, artifact_dir: str) -> str:
    """The comparison run's description (Markdown): the command, each sweep linked, who is ahead, the files."""
    lines = [f"**Comparison of {len(c.curves)} sweeps** (multiverse-sweeper): expected best `{c.metric}` ({c.mode}) "
             f"vs the number of random trials.", ""]
    if command:
        lines += ["Command:", "", f"    {command}", ""]
    lines += ["Sweeps compared:", ""]
    for k in c.curves:
        r = k.records
        lines.append(f"- **{k.label}**: sweep run [`{r.parent_run_id}`]({links[r.parent_run_id]}) of experiment "
                     f"`{r.experiment}` ({r.strategy}, {k.n_trials} finished trials, {k.kind} curve).")
    lines += ["", "Who is ahead (P(best): the probability that its expected best is the highest):", ""]
    lines += [f"- {line}." for line in verdict_lines(c)]
    lines += ["", "Results (artifacts of this run):", "",
              f"- `{artifact_dir}/{MAIN_FILE}`" + (f" (at `{artifact_uri.rstrip('/')}/{artifact_dir}/`)"
                                                    if artifact_uri else "")
              + (f", written to `{local_dir}`" if local_dir else "")]
    return "\n".join(lines) + "\n"
