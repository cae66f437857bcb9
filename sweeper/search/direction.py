"""Whether a metric's name says lower is better, so that a sweep maximising a loss is questioned.

``hydra.sweeper.mode`` defaults to ``max``; a user who sets ``metric=loss`` and forgets
``mode=min`` would get a sweep that hunts for the worst loss and a "Best:" naming the worst
trial. When the mode is not set explicitly (``null``, the default), the sweep maximises and
:func:`direction_warning` says so once at its start if the name reads like lower-is-better.

**The name rule** (:func:`lower_is_better`). The name is split into words at ``_ . - /``,
blanks, camelCase and letter/digit boundaries (``val_loss``, ``valLoss``, ``val/loss``,
``testMSE``, ``loss2`` all give the word ``loss``), lowercased. It reads lower-is-better when
a word is one of :data:`LOWER_IS_BETTER_WORDS` (losses, errors and error rates, regret,
perplexity, cost, time) and no word is one of :data:`REVERSING_WORDS`, which turn such a
quantity into one to maximise (scikit-learn's ``neg_log_loss``, ``error_reduction``,
``loss_improvement``). Whole words only: ``lossless_acc``, ``errand``, ``timestamp`` and
``accuracy`` do not match. A name the rule misreads costs one line at most: an explicit
mode (``max`` or ``min``) never warns.

**Scores in [0, 1]** (:func:`reads_like_unit_score`). A metric whose words include one of
:data:`UNIT_SCORE_WORDS` (``val_acc``, ``test_accuracy``, ``f1_macro``, ``roc_auc``,
``precisionAt5``) takes values in [0, 1]; unbounded, the GP can map it outside (an accuracy
of 1.02, a band down to -0.22). When ``hydra.sweeper.metric_bounds`` is not set,
:func:`bounds_warning` says so at the sweep's start (the values are not known yet: on the name
alone); ``metric_bounds=[null,null]`` declares it unbounded on purpose and silences it.
:func:`bounds_hint` says the same to a report, once every value is seen to lie in [0, 1].
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from itertools import pairwise

#: Words that name a quantity to minimise.
LOWER_IS_BETTER_WORDS = frozenset({
    "loss", "losses", "nll", "error", "errors", "err", "mse", "rmse", "mae", "mape", "smape", "msle", "rmsle",
    "wer", "cer", "eer", "ece", "brier", "regret", "perplexity", "ppl", "bpd", "bpc", "fid", "kl", "divergence",
    "cost", "costs", "latency", "runtime", "duration", "time", "seconds",
})
#: Words that turn a lower-is-better quantity into a higher-is-better one.
REVERSING_WORDS = frozenset({
    "neg", "negative", "negated", "minus", "inv", "inverse", "reciprocal", "reduction", "improvement",
    "decrease", "drop", "gain", "saved", "speedup",
})

#: Words that name a score in [0, 1] ("f1" is the words "f" and "1" joined).
UNIT_SCORE_WORDS = frozenset({
    "acc", "accuracy", "accuracies", "f1", "auc", "auroc", "auprc", "precision", "recall", "iou", "jaccard", "dice",
})

_CAMEL_1 = re.compile(r"([a-z0-9])([A-Z])")
_CAMEL_2 = re.compile(r"([A-Z]+)([A-Z][a-z])")
_DIGITS = re.compile(r"([A-Za-z])([0-9])|([0-9])([A-Za-z])")
_NON_WORD = re.compile(r"[^A-Za-z0-9]+")


def name_words(name: str) -> list[str]:
    """The lowercase words of a metric name: ``'val/testMSE_2'`` -> ``['val', 'test', 'mse', '2']``."""
    spaced = _CAMEL_2.sub(r"\1 \2", _CAMEL_1.sub(r"\1 \2", str(name)))
    spaced = _DIGITS.sub(lambda m: f"{m[1]} {m[2]}" if m[1] else f"{m[3]} {m[4]}", spaced)
    return [w for w in _NON_WORD.split(spaced.lower()) if w]


def lower_is_better(name: str) -> bool:
    """Whether the metric's name reads like a quantity to minimise (see the module docstring)."""
    words = set(name_words(name))
    return bool(words & LOWER_IS_BETTER_WORDS) and not words & REVERSING_WORDS


def direction_warning(metric: str, mode: str | None, prefix: str = "hydra.sweeper.") -> str | None:
    """One line questioning the direction of a sweep, or None.

    ``mode`` is the mode as the user gave it: None when not set, in which case the sweep
    maximises. Only then, and only for a ``metric`` that reads lower-is-better, is there a line.
    """
    if mode is not None or not lower_is_better(metric):
        return None
    return (f"{prefix}metric={metric!r} reads like lower-is-better, but the sweep maximises it ({prefix}mode is "
            f"not set): add {prefix}mode=min, or {prefix}mode=max to keep maximising and silence this.")


def reads_like_unit_score(name: str) -> bool:
    """Whether the metric's name reads like a score in [0, 1] (see the module docstring)."""
    words = name_words(name)
    return bool(({*words} | {a + b for a, b in pairwise(words)}) & UNIT_SCORE_WORDS)


def bounds_warning(metric: str, bounds: object, prefix: str = "hydra.sweeper.") -> str | None:
    """One line at a sweep's start suggesting bounds [0, 1] for a score-like metric, or None.

    ``bounds`` is ``metric_bounds`` as the user gave it: None when not set (the only case
    that warns); ``[null, null]`` is an explicit "unbounded".
    """
    if bounds is not None or not reads_like_unit_score(metric):
        return None
    return (f"{prefix}metric={metric!r} reads like a score in [0, 1], but no bounds are declared: the GP may map "
            f"it outside [0, 1]. Add {prefix}metric_bounds=[0,1] (or {prefix}metric_bounds=[null,null] to model "
            f"it unbounded and silence this).")


def bounds_hint(metric: str, values: Sequence[float], bounded: bool) -> str | None:
    """A report's sentence suggesting bounds [0, 1], or None.

    Only for an unbounded analysis (``bounded`` false) of a score-like ``metric`` whose every
    value (finite, at least one) lies in [0, 1]: then the maps and curves may leave [0, 1].
    """
    finite = [float(v) for v in values if math.isfinite(float(v))]
    if bounded or not finite or not reads_like_unit_score(metric) or not all(0.0 <= v <= 1.0 for v in finite):
        return None
    return (f"`{metric}` reads like a score in [0, 1] and every value lies there, but it was modelled without "
            f"bounds: means and bands may leave [0, 1]. Rerun with `--bounds 0 1`, and declare "
            f"`hydra.sweeper.metric_bounds=[0,1]` for the next sweep.")
