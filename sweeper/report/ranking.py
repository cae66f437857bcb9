"""The report's ranking section: a sweep of listed configurations (``hydra.sweeper.configurations``, what
``sweeper rerun`` runs) crossed with replicates, i.e. every combination of its other dims' values (seeds,
environment conditions). Per configuration: its QRA over the replicates (Belz et al. 2022) and how often it is
the best, with the Wilson interval of that share; for the whole, Kendall's W (:mod:`sweeper.analysis.ranking`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from sweeper.analysis.qra import QRA, qra_replicates
from sweeper.analysis.ranking import rank_counts, wilson_interval
from sweeper.analysis.top_configurations import configuration_key, configuration_keys
from sweeper.report.document import Block, Bullets, Heading, OutputDir, Paragraph, table
from sweeper.report.groups import object_label, value_text

if TYPE_CHECKING:
    import pandas as pd

    from sweeper.analysis.runs import SweepRecords

RERUN_OF_TAG = "sweeper.rerun_of"
CONFIDENCE = 0.95


@dataclass(frozen=True)
class ConfigurationRow:
    """One listed configuration's numbers.

    Attributes:
        number: Its place in the list, from 1 (in a rerun, its rank in the sweep re-run).
        configuration: Its values, key -> value.
        n: Its finished trials that count; ``failed``: its trials that failed.
        mean: The mean of its metric over them.
        qra: Its QRA over the replicates, or why there is none.
        wins: Complete replicates where it was the best (a tie shared).
        p_best: ``wins`` over the complete replicates; ``p_best_ci`` its Wilson interval.
        mean_rank: Its mean rank over the complete replicates (1 = best).
    """

    number: int
    configuration: dict[str, Any]
    n: int
    failed: int
    mean: float
    qra: QRA | str
    wins: float
    p_best: float
    p_best_ci: tuple[float, float]
    mean_rank: float


@dataclass(frozen=True)
class RankingStability:
    """How stable the order of the listed configurations is over the replicates.

    Attributes:
        rows: One per listed configuration, in the list's order.
        replicate_dims: The dims one replicate fixes a value of (e.g. ``env.seed``); none: one replicate.
        replicates: Replicates with a trial; ``complete``: those where every configuration finished (ranked).
        best_ties: Complete replicates whose best was a tie.
        kendall_w: Kendall's W over the complete replicates (NaN below 2 of them or 2 configurations).
        rerun_of: The sweep this one re-runs (tag ``sweeper.rerun_of``), or None.
    """

    rows: list[ConfigurationRow]
    replicate_dims: list[str]
    replicates: int
    complete: int
    best_ties: int
    kendall_w: float
    rerun_of: str | None


def replicate_params(records: SweepRecords) -> list[str]:
    """The dims that replicate a configuration, i.e. conditions of measurement of a sweep with listed configurations
    or of a rerun (all but the configurations' dims: the seed, ``--env`` conditions); none for another sweep."""
    space = records.space
    if space is None or not (space.joint or records.parent_tags.get(RERUN_OF_TAG)):
        return []
    return [d.name for d in space.dims if d.name not in space.joint]


def ranking_stability(records: SweepRecords, kept: pd.DataFrame, metric: str, maximize: bool,
                      scale_min: float = 0.0) -> RankingStability | None:
    """The ranking of a sweep with listed configurations (None for any other sweep), from its ``kept`` trials."""
    space = records.space
    if space is None or not space.joint:
        return None
    joint = [space.dims[space.names.index(name)] for name in space.joint]
    replicating = replicate_params(records)
    others = [d for d in space.dims if d.name in replicating]
    listed = [configuration_key(row) for row in space.configurations]
    trials = records.trials.sort_values("index")
    replicate_of = configuration_keys(trials, others)
    replicates = list(dict.fromkeys(k for k in replicate_of if k is not None))
    config_of, kept_replicate = configuration_keys(kept, joint), configuration_keys(kept, others)
    values = kept[f"metric.{metric}"].to_numpy(dtype=np.float64)
    failed = configuration_keys(records.failed(), joint).value_counts().to_dict() if len(records.failed()) else {}
    matrix = np.full((len(listed), len(replicates)), np.nan)
    for i, key in enumerate(listed):
        for j, replicate in enumerate(replicates):
            here = values[(config_of == key).to_numpy() & (kept_replicate == replicate).to_numpy()]
            matrix[i, j] = here.mean() if here.size else np.nan
    counts = rank_counts(matrix, maximize)
    rows = []
    for i, (key, config) in enumerate(zip(listed, space.configurations, strict=True)):
        mask = (config_of == key).to_numpy()
        mine = values[mask]
        obj = dict(zip(space.joint, config, strict=True))
        try:
            qra: QRA | str = qra_replicates(mine, list(kept_replicate[mask]), scale_min, name=metric,
                                            label=object_label(obj))
        except ValueError as exc:
            qra = str(exc)
        p = counts.wins[i] / counts.m if counts.m else math.nan
        rows.append(ConfigurationRow(i + 1, obj, int(mine.size), int(failed.get(key, 0)),
                                     float(mine.mean()) if mine.size else math.nan, qra, float(counts.wins[i]), p,
                                     wilson_interval(float(counts.wins[i]), counts.m, CONFIDENCE),
                                     float(counts.mean_rank[i])))
    return RankingStability(rows, [d.name for d in others], len(replicates), counts.m, counts.best_ties,
                            counts.w, records.parent_tags.get(RERUN_OF_TAG))


def _cv_text(r: QRA | str) -> tuple[str, str]:
    """CV* and the CI of std as table cells, or the status / reason there are none."""
    if isinstance(r, QRA) and r.defined:
        return f"{r.cv_star:.4g}", f"[{r.std_ci[0]:.4g}, {r.std_ci[1]:.4g}]"
    return (r.status if isinstance(r, QRA) else "undefined"), "—"


def _interval(low: float, high: float) -> str:
    return "—" if math.isnan(low) else f"[{low:.2f}, {high:.2f}]"


def ranking_section(out: OutputDir, ranking: RankingStability | None, *, metric: str,
                    rerun_of: str | None = None) -> list[Block]:
    """The section's heading, how to read it, its table (and ``ranking.csv``); a line for a one-configuration
    rerun (``rerun_of`` without ranking), nothing for a sweep without listed configurations."""
    title = Heading("Ranking over replicates: does the best stay best?")
    if ranking is None:
        return [] if rerun_of is None else [title, Paragraph(
            f"This sweep re-runs one configuration of sweep `{rerun_of}`: there is no ranking to assess; its spread "
            f"over the seeds is in the QRA section.")]
    import pandas as pd

    out.csv("ranking.csv", pd.DataFrame([ranking_record(r) for r in ranking.rows]))
    origin = (f" re-running the best {len(ranking.rows)} of sweep `{ranking.rerun_of}` (tag `{RERUN_OF_TAG}`; "
              f"# is each one's rank there)" if ranking.rerun_of else "")
    per = ", ".join(f"`{d}`" for d in ranking.replicate_dims) or "nothing (one replicate)"
    blocks: list[Block] = [title, Paragraph(
        f"This sweep ran {len(ranking.rows)} listed configurations (`hydra.sweeper.configurations`){origin}, each "
        f"once per replicate: one value of each of {per}. A configuration's P(best) is the share of the "
        f"{ranking.complete} replicates where every configuration finished in which its `{metric}` was the best (a "
        f"tie for the best is shared), with its {CONFIDENCE * 100:g} % Wilson score interval (Wilson 1927); its "
        f"mean rank is over the same replicates (1 = best). CV* and the CI of the std are QRA's (Belz et al. 2022) "
        f"over its replicates. " + _w_text(ranking))]
    notes = _notes(ranking)
    if notes:
        blocks.append(Bullets(tuple(notes)))
    lines = []
    for r in ranking.rows:
        cv, ci = _cv_text(r.qra)
        config = ", ".join(f"{k}={value_text(v)}" for k, v in r.configuration.items())
        lines.append([r.number, config, r.n, r.failed, r.mean, cv, ci, f"{r.wins:g} of {ranking.complete}",
                      "—" if math.isnan(r.p_best) else f"{r.p_best:.2f}", _interval(*r.p_best_ci),
                      "—" if math.isnan(r.mean_rank) else f"{r.mean_rank:.2f}"])
    blocks.append(table(["#", "configuration", "n", "failed", f"mean {metric}", "CV*", "95 % CI of std", "best in",
                         "P(best)", f"{CONFIDENCE * 100:g} % Wilson CI", "mean rank"], lines))
    return blocks


def _w_text(ranking: RankingStability) -> str:
    if math.isnan(ranking.kendall_w):
        return ("Kendall's W needs 2 or more configurations ranked in 2 or more complete replicates that do not tie "
                "everything: not defined here.")
    return (f"Kendall's W = {ranking.kendall_w:.3f} (tie-corrected; 1: every replicate orders the configurations "
            f"alike, 0: their orders cancel out).")


def _notes(ranking: RankingStability) -> list[str]:
    notes = []
    left = ranking.replicates - ranking.complete
    if left:
        notes.append(f"{left} of {ranking.replicates} replicates are left out of P(best), the ranks and W: a "
                     f"configuration failed (or was filtered out) there.")
    if ranking.complete == 0:
        notes.append("No replicate has every configuration finished: nothing could be ranked.")
    if ranking.best_ties:
        notes.append(f"{ranking.best_ties} replicate(s) had a tie for the best: each tied configuration got an "
                     f"equal share of it.")
    return notes


def ranking_record(r: ConfigurationRow) -> dict[str, Any]:
    """One row of ``ranking.csv`` (and of ``summary.json``)."""
    q = r.qra
    return {"number": r.number, "configuration": " ".join(f"{k}={value_text(v)}" for k, v in r.configuration.items()),
            "n": r.n, "failed": r.failed, "mean": r.mean,
            "cv_star": q.cv_star if isinstance(q, QRA) else math.nan,
            "std": q.std if isinstance(q, QRA) else math.nan,
            "std_ci_low": q.std_ci[0] if isinstance(q, QRA) else math.nan,
            "std_ci_high": q.std_ci[1] if isinstance(q, QRA) else math.nan,
            "qra_status": q.status if isinstance(q, QRA) else f"undefined: {q}",
            "wins": r.wins, "p_best": r.p_best, "p_best_low": r.p_best_ci[0], "p_best_high": r.p_best_ci[1],
            "mean_rank": r.mean_rank}


def ranking_summary(ranking: RankingStability | None) -> dict[str, Any] | None:
    """The ranking's part of ``summary.json``."""
    if ranking is None:
        return None
    return {"rerun_of": ranking.rerun_of, "replicate_dims": ranking.replicate_dims,
            "replicates": ranking.replicates, "complete": ranking.complete, "best_ties": ranking.best_ties,
            "kendall_w": ranking.kendall_w, "interval": "wilson", "confidence": CONFIDENCE,
            "configurations": [ranking_record(r) for r in ranking.rows]}


__all__ = ["ConfigurationRow", "RankingStability", "ranking_section", "ranking_stability", "ranking_summary",
           "replicate_params"]
