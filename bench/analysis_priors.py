"""The analysis GP's priors set for one bench run: ``--analysis SHAPE_PRIOR_SD=1``.

The priors of the analysis's hyperparameter posterior are constants of
:mod:`sweeper.search.hyper_vector` (decisions 0005-0009 chose them). Measuring another setting against the truth
(decision 0084) needs the whole bench run, its worker processes included, to use it: :func:`apply` sets the
constant there and in every module that imported it by name, and the benches that start workers pass it to each.
Values are JSON (a prior's ``[mean, sd]`` is a list); only the names below can be set, so a typo is refused
before anything runs.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Mapping
from typing import Any

#: The constants ``--analysis`` may set (each defined in sweeper.search.hyper_vector).
PRIORS = ("NOISE_PRIOR", "SHAPE_PRIOR_SD", "INPUT_WARP_PRIOR_SD", "CEILING_PRIOR", "METRIC_NOISE", "METRIC_NOISE_PRIOR",
          "METRIC_NOISE_BOUNDS")


def analysis_overrides(items: list[str]) -> dict[str, Any]:
    """``["SHAPE_PRIOR_SD=1", "CEILING_PRIOR=[2, 1.5]"]`` -> ``{"SHAPE_PRIOR_SD": 1, "CEILING_PRIOR": (2, 1.5)}``."""
    from bench.efficiency import policy_overrides

    out = policy_overrides(items)
    unknown = sorted(set(out) - set(PRIORS))
    if unknown:
        raise SystemExit(f"--analysis {', '.join(unknown)}: not a prior of the analysis GP; one of {', '.join(PRIORS)}")
    return {k: tuple(v) if isinstance(v, list) else v for k, v in out.items()}


def apply(overrides: Mapping[str, Any]) -> None:
    """Set each prior in :mod:`sweeper.search.hyper_vector` and wherever a loaded module holds the same object."""
    if not overrides:
        return
    hyper_vector = importlib.import_module("sweeper.search.hyper_vector")
    importlib.import_module("sweeper.search.hyperposterior")  # the analysis's sampler, which imports them by name
    for name, value in overrides.items():
        shipped = getattr(hyper_vector, name)
        for module in list(sys.modules.values()):
            if getattr(module, "__name__", "").startswith("sweeper.") and getattr(module, name, None) is shipped:
                setattr(module, name, value)
