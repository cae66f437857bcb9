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
"""

from __future__ import annotations

import re

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
