"""Dodge et al.'s reporting checklist, filled from what MLflow recorded about a sweep.

Each item is answered from the records or marked *not recorded*; nothing is guessed.
The data splits and dataset version are read from the recorded config by key (see
:func:`data_keys`); when the config names none, the item is not recorded, so the author
sees what the paper must still say.

References:
    Dodge, J., Gururangan, S., Card, D., Schwartz, R., & Smith, N. A. (2019). Show Your
    Work: Improved Reporting of Experimental Results. EMNLP-IJCNLP 2019 (Figure 1 and
    the reproducibility checklist in its appendix).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    import pandas as pd

    from sweeper.analysis.runs import SweepRecords

GPU_TAG_PREFIXES = ("gpu", "cuda", "cudnn", "nvidia", "device")


@dataclass(frozen=True)
class ChecklistItem:
    """One line of the checklist: ``value`` is None when the records lack it."""

    item: str
    value: str | None

    @property
    def recorded(self) -> bool:
        return self.value is not None


def _tag_values(trials: pd.DataFrame, key: str) -> str | None:
    """``value`` or ``a (3 trials), b (2 trials)`` for a ``tag.<key>`` column; None when absent."""
    column = f"tag.{key}"
    if column not in trials:
        return None
    counts = Counter(v for v in trials[column] if isinstance(v, str) and v)
    if not counts:
        return None
    if len(counts) == 1:
        return next(iter(counts))
    return ", ".join(f"{v} ({n} trials)" for v, n in counts.most_common())


def _tags_with_prefix(trials: pd.DataFrame, prefixes: tuple[str, ...]) -> dict[str, str]:
    keys = sorted(c[4:] for c in trials.columns if c.startswith("tag.") and c[4:].startswith(prefixes))
    found = {k: _tag_values(trials, k) for k in keys}
    return {k: v for k, v in found.items() if v is not None}


def fill_checklist(records: SweepRecords, *, metric: str, mode: str, kept: pd.DataFrame, n_filtered: int,
                   best: dict[str, Any] | None, figure: str | None) -> list[ChecklistItem]:
    """Answer each checklist item from the records.

    Args:
        records: The sweep.
        metric: The reported metric.
        mode: ``max`` or ``min``.
        kept: Finished trials with a finite metric that passed the filter.
        n_filtered: Finished trials the filter excluded.
        best: The best kept trial (``index``, ``run_id``, ``value``, ``params``), or None.
        figure: File name of the expected-max figure, or None if there is none.

    Returns:
        The items, in the checklist's order.
    """
    s, trials = records.settings, records.trials
    strategy = f"{records.strategy} (searcher seed {s.get('seed', '?')})"
    if records.strategy in ("ivr", "ucb"):
        strategy += f", {s.get('n_initial', '?')} Sobol points first, batches of {s.get('batch_size', '?')}"
    bounds = None
    if records.space is not None:
        bounds = "; ".join(f"`{k}`: `{v}`" for k, v in records.space.describe().items()) or "no search dimension"
        fixed = s.get("fixed_overrides") or " ".join(records.space.fixed_overrides)
        if fixed:
            bounds += f"; fixed: `{fixed}`"
    failed = int(records.failed().shape[0])
    counts = (f"{s.get('num_trials', '?')} planned, {len(trials)} run: {len(kept)} finished and kept, "
              f"{failed} failed, {n_filtered} filtered")
    values = kept[f"metric.{metric}"].to_numpy(dtype=np.float64) if len(kept) else np.array([])
    spread = (f"{values.mean():.6g} ± {values.std(ddof=1):.6g} (mean ± sd, n = {values.size})" if values.size > 1
              else f"{values[0]:.6g} (one trial)" if values.size else None)
    best_text = None
    if best is not None:
        point = ", ".join(f"{k}={v}" for k, v in best["params"].items())
        best_text = f"trial #{best['index']}: {point} → {metric} = {best['value']:.6g} (run `{best['run_id']}`)"
    durations = kept["duration_s"].to_numpy(dtype=np.float64) if len(kept) else np.array([])
    durations = durations[np.isfinite(durations)]
    runtime = (f"{durations.mean():.4g} s per trial (total {durations.sum():.4g} s over {durations.size} trials)"
               if durations.size else None)
    cpu = _tag_values(trials, "cpu.model")
    if cpu is not None:
        cores = _tag_values(trials, "cpu.count")
        hosts = _tag_values(trials, "host")
        cpu = f"{cpu}; {cores or '?'} cores; host {hosts or 'not recorded'}"
    software = {"python": _tag_values(trials, "python"), **_tags_with_prefix(trials, ("pkg.",))}
    software_text = ", ".join(f"{k.removeprefix('pkg.')} {v}" for k, v in software.items() if v) or None
    return [
        ChecklistItem("Search strategy and seed", strategy),
        ChecklistItem("Selection criterion", f"{mode} `{metric}` on the trials' returned value"),
        ChecklistItem("Bounds of every hyperparameter", bounds),
        ChecklistItem("Number of trials", counts),
        ChecklistItem("Best configuration and its score", best_text),
        ChecklistItem(f"Mean ± sd of {metric} over finished trials", spread),
        ChecklistItem("Expected validation performance vs budget",
                      f"figure `{figure}` and the table above" if figure else None),
        ChecklistItem("Average run time per trial", runtime),
        ChecklistItem("Hardware: CPU", cpu),
        ChecklistItem("Hardware: GPU", gpu_text(trials, records.parent_tags)),
        ChecklistItem("Software versions", software_text),
        ChecklistItem("Code version (git commit or file hashes)", code_text(records)),
        ChecklistItem("Data splits and dataset version", data_text(trials)),
    ]


def _condition(records: SweepRecords, key: str) -> str | None:
    """A condition as the trials recorded it, else as the sweep's run did (``sweeper.<key>`` or the driver's)."""
    found = _tag_values(records.trials, key)
    if found is None:
        tags = records.parent_tags
        found = tags.get(f"sweeper.{key}") or tags.get(f"sweeper.driver.{key}") or None
    return found


def gpu_text(trials: pd.DataFrame, parent_tags: Mapping[str, str] | None = None) -> str | None:
    """The GPUs' tags; ``none (CPU only)`` when every trial recorded ``gpu.count`` 0; None when nothing says.

    The trials' tags, else the sweep run's ``sweeper.gpu*``/``sweeper.cuda*`` tags (conditions common to all
    trials recorded once there); never the driver's, whose machine need not be the trials'.
    """
    gpu = _tags_with_prefix(trials, GPU_TAG_PREFIXES) or {
        k.removeprefix("sweeper."): v for k, v in sorted((parent_tags or {}).items())
        if k.startswith("sweeper.") and k.removeprefix("sweeper.").startswith(GPU_TAG_PREFIXES) and v}
    if gpu.get("gpu.count") == "0" and not any(k.startswith(("gpu.name", "cuda.devices")) for k in gpu):
        cuda = gpu.get("cuda.version")
        return "none (CPU only)" + (f"; torch built for CUDA {cuda}" if cuda and cuda != "None" else "")
    return ", ".join(f"{k} {v}" for k, v in gpu.items()) or None


def code_text(records: SweepRecords) -> str | None:
    """The git commit, dirty flag and untracked files, then the script's and config folder's SHA-256.

    Without git the hashes alone identify the code; None when neither was recorded.
    """
    parts = []
    commit = _condition(records, "git.commit")
    if commit is not None:
        dirty = _condition(records, "git.dirty") or "not recorded"
        untracked = _condition(records, "git.untracked")
        commit += f" (dirty: {dirty}" + (f"; untracked: {untracked}" if untracked else "") + ")"
        parts.append(f"git {commit}")
    for what, path_key, hash_key in (("script", "code.script", "code.script_sha256"),
                                     ("config folder", "code.config_dir", "code.config_sha256")):
        digest = _condition(records, hash_key)
        if digest is not None:
            path = _condition(records, path_key)
            parts.append(f"{what} {f'`{path}` ' if path else ''}sha256 {digest}")
    return "; ".join(parts) or None


#: Config blocks that hold the data: every key under them whose name has a :data:`DATA_WORDS` word is reported.
DATA_BLOCKS = ("data", "dataset", "datasets")
#: Words in a key's last part that make it a split or dataset-version key under :data:`DATA_BLOCKS`.
DATA_WORDS = ("split", "seed", "test_size", "val_size", "valid", "fold", "version", "name", "path", "root",
              "dir", "file", "url", "source", "subset", "fraction", "ratio", "train_size")
#: Words that make a key a split key in any block (``model.cv_folds``, ``split_seed`` at the top).
SPLIT_WORDS = ("split", "test_size", "val_size", "train_size", "fold")
#: Data keys shown in the row; the rest are counted.
MAX_DATA_KEYS = 12


def data_keys(columns: list[str] | pd.Index) -> list[str]:
    """The config keys (``param.<key>`` columns) that describe the data splits and the dataset's version.

    A key is one when it is under a :data:`DATA_BLOCKS` block (``data.test_size``, ``dataset.name``)
    and its last part holds a :data:`DATA_WORDS` word, or anywhere when its last part holds a
    :data:`SPLIT_WORDS` word (``split_seed``, ``cv.n_folds``).
    """
    found = []
    for column in columns:
        if not column.startswith("param."):
            continue
        key = column.removeprefix("param.")
        parts = key.lower().split(".")
        under_data = parts[0] in DATA_BLOCKS and len(parts) > 1 and any(w in parts[-1] for w in DATA_WORDS)
        if under_data or any(w in parts[-1] for w in SPLIT_WORDS):
            found.append(key)
    return sorted(found)


def data_text(trials: pd.DataFrame) -> str | None:
    """``from the config: `data.test_size` = 0.3; `data.split_seed` = 0 ...``; None when it names none."""
    keys = data_keys(trials.columns)
    if not keys:
        return None
    shown = []
    for key in keys[:MAX_DATA_KEYS]:
        values = Counter(str(v) for v in trials[f"param.{key}"] if v is not None and v == v)
        if len(values) == 1:
            shown.append(f"`{key}` = {next(iter(values))}")
        elif values:
            shown.append(f"`{key}` varies: " + ", ".join(v for v, _ in values.most_common(5))
                         + (f" ({len(values)} values)" if len(values) > 5 else ""))
    more = f"; {len(keys) - MAX_DATA_KEYS} more data keys in the trials' params" if len(keys) > MAX_DATA_KEYS else ""
    return ("from the config: " + "; ".join(shown) + more) if shown else None
