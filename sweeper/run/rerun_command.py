"""The command of a rerun: a sweep's own command (its manifest's), turned into a grid over chosen configurations.

``sweeper rerun`` runs the best configurations of a sweep again, over new seeds (and environment conditions), as a
sweep of its own. Its command is the first sweep's, as the manifest recorded it (run in the recorded directory,
as ``sweeper resume`` does), with:

- the first sweep's search space replaced: its dims dropped from the command line, ``hydra.sweeper.params={}``
  clearing the YAML's (the fixed values of both kept), then ``hydra.sweeper.configurations`` (the chosen
  configurations), the seeds and the ``--env`` conditions, as a grid (``strategy=grid``, ``num_trials`` its size,
  each point once, no interaction stop);
- a sweep dir of its own, and ``hydra.sweeper.rerun_of`` linking it to the first sweep.

Every setting of the first command that says how trials run or are recorded (the metric, its bounds, timeouts,
``ray.*``, ``mlflow.*``) stays: the rerun is an ordinary sweep, resumed by ``sweeper resume`` like any other.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from sweeper.run.resume import SweepManifest
from sweeper.search.space import SearchSpace, format_override_value

SWEEPER = "hydra.sweeper."
#: Settings the rerun sets itself: an original value of each is dropped from the command.
RERUN_SETTINGS = ("strategy", "num_trials", "grid_repeats", "configurations", "rerun_of", "resume",
                  "stop_on_bayes_factor")


def override_key(argument: str) -> str | None:
    """The key an override argument sets, without ``+``/``++``/``~`` (None for a flag or an option's value)."""
    if argument.startswith("-") or "=" not in argument:
        return None
    return argument.split("=", 1)[0].lstrip("+~")


def rerun_command(manifest: SweepManifest, *, configurations: Sequence[Mapping[str, Any]], seed_key: str,
                  seeds: Sequence[int], env: Sequence[tuple[str, str]], sweep_dir: Path,
                  first_run_id: str) -> list[str]:
    """The first sweep's command, made a grid over ``configurations`` x ``seeds`` x the ``env`` values.

    Args:
        manifest: The first sweep's manifest (its command, its search space).
        configurations: The configurations to run, override key -> value, best first.
        seed_key: The override key of the seed (e.g. ``env.seed``); ``seeds`` its values.
        env: ``(key, values)`` of each condition to cross with them, values as override text (``1,2``).
        sweep_dir: The rerun's own sweep dir.
        first_run_id: The first sweep's MLflow run, for ``hydra.sweeper.rerun_of``.
    """
    first = SearchSpace.from_dict(manifest.space)
    replaced = {d.override_key.lstrip("+~") for d in first.dims}
    replaced |= {seed_key.lstrip("+"), *(k.lstrip("+") for k, _ in env)}
    replaced |= {k.lstrip("+") for c in configurations for k in c}
    ours = {f"{SWEEPER}{name}" for name in RERUN_SETTINGS} | {"hydra.sweep.dir"}

    def dropped(key: str | None) -> bool:
        return key is not None and (key in replaced or key in ours or key.startswith(f"{SWEEPER}params"))

    kept = [a for a in manifest.command if not dropped(override_key(a))]
    on_command_line = {k for a in kept if (k := override_key(a)) is not None}
    # The first sweep's fixed values from its YAML params, which params={} clears: given again (the command
    # line's are kept in place).
    fixed = [o for o in first.fixed_overrides if (k := override_key(o)) is not None
             and k not in on_command_line and k not in replaced]
    seed_values = ",".join(str(s) for s in seeds)
    return [*kept, f"{SWEEPER}params={{}}", *fixed,
            f"{SWEEPER}strategy=grid", f"{SWEEPER}num_trials=null", f"{SWEEPER}grid_repeats=1",
            f"{SWEEPER}stop_on_bayes_factor=null",
            f"{SWEEPER}configurations={format_override_value([dict(c) for c in configurations])}",
            f"{seed_key}=choice({seed_values})" if len(seeds) > 1 else f"{seed_key}={seed_values}",
            *(f"{key}={values}" for key, values in env),
            f"hydra.sweep.dir={sweep_dir}", f"{SWEEPER}rerun_of={first_run_id}"]
