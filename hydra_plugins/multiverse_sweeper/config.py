"""Structured configs of the multiverse sweeper, registered in Hydra's ConfigStore.

Hydra imports this module on every application start, so it imports nothing heavy.
Two nodes are stored:

- ``hydra/sweeper=multiverse``: the sweeper's own settings (``hydra.sweeper.*``);
- ``sweeper_defaults`` (root level): the top-level ``ray`` and ``mlflow`` blocks, short to
  type on a cluster command line (``ray.address=auto mlflow.tracking_uri=http://...``).
  Add ``- sweeper_defaults`` to an application's defaults list to get them typed.
"""

import sys
from dataclasses import dataclass, field, fields
from typing import Any

from hydra.core.config_store import ConfigStore


@dataclass
class MultiverseSweeperConf:
    """Settings of one sweep; field names equal the sweeper's constructor arguments."""

    _target_: str = "hydra_plugins.multiverse_sweeper.multiverse_sweeper.MultiverseSweeper"
    # random | sobol | grid (the full factorial of the discrete dims in a seeded order, each point once) | ivr
    # (Sobol points, then GP integrated variance reduction) | ucb (Sobol points, then GP-UCB)
    strategy: str = "ivr"
    metric: str = "objective"  # the task's output to model; a float return is named this
    # max | min: the metric's direction (for ucb and for the best trial). null: max, with a warning at the start
    # when the metric's name reads like lower-is-better (loss, error, mse, regret, perplexity, ...)
    mode: str | None = None
    n_initial: int = 8  # Sobol points before the GP takes over (ivr, ucb)
    # points planned together from one GP fit; with ivr and without deterministic, the rest of a batch is
    # re-planned when results arrived since it was planned and the refit is short next to the trials
    batch_size: int = 8
    # trials in the sweep, failed ones included; null: 32, or with strategy=grid the grid's size x grid_repeats
    # (any other number is refused there)
    num_trials: int | None = None
    grid_repeats: int = 1  # strategy=grid: how many times the whole grid runs, in the same order
    # the search space: key -> a string of Hydra's override grammar, e.g. lr: tag(log, interval(1e-4, 1));
    # a key given on the command line replaces the same key here; hydra.sweeper.params={} (or null) on the
    # command line clears what the YAML gives
    params: dict[str, Any] | None = field(default_factory=dict)
    # strategy=grid: a list of joint points, e.g. [{lr: 0.1, depth: 2}, {lr: 0.01, depth: 8}], each run as one
    # point of the grid, crossed with the values of the other dims (e.g. params env.seed: range(0,5)): two
    # configurations, not the four combinations of their values. Every configuration sets the same keys; each key is
    # a param of its own in the records; a key with one value in all is a fixed value. null: none (see `sweeper rerun`)
    configurations: list[Any] | None = None
    # the MLflow run id of the sweep this one re-runs (`sweeper rerun` sets it): this sweep's run is tagged
    # sweeper.rerun_of=<id>, and that run sweeper.rerun_by=<this run's id> (comma-separated, one per rerun). null: none
    rerun_of: str | None = None
    seed: int = 0  # the searcher's own seed: Sobol scramble, candidates, integration points, GP restarts
    deterministic: bool = False  # commit to whole batches: same points whatever the timing
    max_failure_rate: float = 0.5  # start no new trial once more than this fraction of num_trials failed
    # stop once the first this many trials to end all raised the same exception (type and message): a bug in the
    # task, e.g. a misspelt config key. The trials in flight finish first; if one succeeds, the sweep goes on.
    # Only exceptions count: a NaN, a timeout or a dead worker among those first trials rules it out. null or 0: never
    stop_on_identical_failures: int | None = 3
    trial_timeout_s: float | None = None  # a trial running longer ends TIMEOUT (a failure); null: no limit
    ucb_beta: float = 2.0  # exploration weight of the ucb strategy
    n_candidates: int = 2048  # quasi-random candidates the acquisition is maximised over
    n_integration: int = 1024  # quasi-random Monte-Carlo points of the IVR integral
    gp_restarts: int = 3  # optimiser starts of a cold GP fit (warm refits: the last optimum + the fixed start)
    # above this many results the restarts fit a seeded random subset (null: all); the posterior
    # always conditions on every result
    gp_max_fit_points: int | None = 300
    gp_refine_max_points: int | None = 1000  # up to this many, the best restart is refined on all (null: never)
    # fit the GP as MAP with a LogNormal prior on the continuous lengthscales (Hvarfner et al. 2024,
    # BoTorch's default); false: maximum likelihood
    gp_lengthscale_prior: bool = False
    ivr_local_search: bool = False  # ivr: add local-search candidates around the best Sobol candidates
    # ivr: weight the integrated variance by 1 + w * (slope of the fit's mean) / (its mean slope), so trials go
    # where a stationary GP's map errs most (cliffs, steep edges); 0: plain IVR (Bell et al. 2022)
    ivr_slope_weight: float = 2.0
    # ivr with metric_bounds: choose by IVR over the raw fit (half) and the posterior mixture the maps are drawn
    # with (up to 100 results), each one's variance in the metric's units (refused without bounds); false: the raw
    # fit alone chooses
    ivr_mixture: bool = False
    kernel: str = "matern52-ard"  # matern52-ard | matern52 | rbf-ard | rbf (continuous dims)
    coregion_rank: int = 1  # rank of W in each categorical dim's B = W W^T + diag(kappa)
    # T: before each batch, test an additive GP against a shared one (Bell et al. 2022, eq. 8) and stop once
    # K > T or K < 1/T; null: never
    stop_on_bayes_factor: float | None = None
    # [low, high] the metric can take, either null ([0, 1] for an accuracy): the GP models it warped
    # so every prediction respects them; a trial returning a value outside them FAILS. null: no bounds.
    metric_bounds: list[Any] | None = None
    resume: bool = False  # continue the interrupted sweep in hydra.sweep.dir (see `sweeper resume`)
    # after each GP batch (ivr, ucb), its map on the sweep's MLflow run while the sweep runs: posterior mean and sd
    # PNGs under live/, the GP's leave-one-out check and the trials it rests on as metrics (step = the batch);
    # drawn off the search's loop. false: none
    live_maps: bool = True
    # checkpoints (sweeper.save_checkpoint) of a running trial kept on ray.storage_path, the newest; a trial that
    # restarts continues from the newest complete one
    keep_checkpoints: int = 1
    keep_finished_checkpoints: bool = False  # keep a trial's checkpoints once it ended (false: deleted then)
    # after SIGTERM to the driver: seconds the running trials get to save their next checkpoint before the sweep
    # stops, to be continued by `sweeper resume` (exit status 75)
    preempt_grace_s: float = 120.0


SWEEPER_KEY = "hydra.sweeper"


def unknown_setting_problem(key: str, value: Any) -> str:
    """The problem of ``hydra.sweeper.KEY=value`` naming no setting, with the closest setting (difflib) as the fix."""
    import difflib

    names = [f.name for f in fields(MultiverseSweeperConf) if f.name != "_target_"]
    close = difflib.get_close_matches(key, names, n=1)
    text = value if isinstance(value, str) else repr(value)
    fix = (f"did you mean {SWEEPER_KEY}.{close[0]}? Try {SWEEPER_KEY}.{close[0]}={text}" if close
           else f"the settings are {', '.join(names)}")
    return f"{SWEEPER_KEY}.{key}={text} is not a setting of the multiverse sweeper: {fix}."


def _override_problem(override: Any) -> str | None:
    """What is wrong with one override of a ``hydra.sweeper`` key Hydra refused, or None if nothing we know of."""
    key = str(override.key_or_group)
    if not key.startswith(SWEEPER_KEY + "."):
        return None
    name = key[len(SWEEPER_KEY) + 1:].split(".")[0]
    if override.is_delete():
        if name == "params":
            return (f"~{key}: the sweeper's settings cannot be deleted; to sweep only what the command line "
                    f"gives, clear the YAML's params with {SWEEPER_KEY}.params={{}}.")
        return f"~{key}: the sweeper's settings cannot be deleted; give it a value instead, e.g. {key}=null."
    if name not in {f.name for f in fields(MultiverseSweeperConf)}:
        return unknown_setting_problem(name, override.input_line.split("=", 1)[1] if "=" in override.input_line
                                       else "")
    return None


def _explain_sweeper_overrides() -> None:
    """Make Hydra's refusal of a ``hydra.sweeper`` override say what to type instead.

    Hydra refuses ``hydra.sweeper.num_trails=8`` (no setting of that name) and ``~hydra.sweeper.params`` while
    it composes the config, before the sweeper exists, with a message that names no fix. When such an override
    fails, every such override is reported in the sweeper's own format, with the closest setting's name, and
    the command exits with status 2, as for the sweeper's other configuration errors.

    What it patches: Hydra's private ``ConfigLoaderImpl._apply_overrides_to_config`` (a staticmethod, the step
    of composition that applies the command line's overrides), wrapped once per process (this module is
    imported on every Hydra start). Why no public API suffices: Hydra has no hook between composition and its
    error message; a plugin runs only after the config composed. How breakage shows: the rows
    ``unknown-setting`` and ``params-deleted`` of tests/integration/test_bad_input.py (their message and exit
    status 2) fail if Hydra renames the method or stops calling it.
    """
    from hydra._internal.config_loader_impl import ConfigLoaderImpl
    from hydra.errors import ConfigCompositionException

    impl = ConfigLoaderImpl  # its step that refuses an override: Hydra has no public hook on that error
    original = impl._apply_overrides_to_config  # noqa: SLF001 - no error hook in Hydra; test_bad_input.py
    if getattr(original, "explains_sweeper_overrides", False):
        return

    def apply_overrides(overrides: list[Any], cfg: Any) -> None:
        try:
            original(overrides, cfg)
        except ConfigCompositionException as exc:
            problems = [p for o in overrides if (p := _override_problem(o))]
            if not problems or SWEEPER_KEY not in f"{exc} {exc.__cause__}":
                raise
            from sweeper.errors import SweeperConfigError

            sys.stderr.write(f"Error: {SweeperConfigError(problems)}\n")
            raise SystemExit(2) from None

    apply_overrides.explains_sweeper_overrides = True  # type: ignore[attr-defined]  # marks the wrapper: wrap once
    patched = staticmethod(apply_overrides)
    impl._apply_overrides_to_config = patched  # type: ignore[method-assign]  # noqa: SLF001 - no hook; test_bad_input


_explain_sweeper_overrides()


#: What ``ray.working_dir`` leaves out unless told otherwise: environments, records, outputs.
UPLOAD_EXCLUDES = (".git", ".venv", "venv", "__pycache__", "*.pyc", "multirun", "outputs", "mlruns", "mlruns.db",
                   "mlartifacts")


@dataclass
class ResourcesConf:
    """Resources one trial reserves; fractional GPUs pack several trials on one GPU."""

    cpu: float = 1.0  # CPUs one trial reserves
    gpu: float = 0.0  # GPUs one trial reserves; 0.25 runs 4 trials per GPU (they share its memory)
    # custom resources, e.g. {large_gpu: 1}: trials then run only on nodes started with
    # --resources='{"large_gpu": 1}'
    custom: dict[str, float] = field(default_factory=dict)


@dataclass
class RayConf:
    """Where trials run: a local Ray started by the sweeper (address null) or a cluster."""

    # null: start a new local Ray (even where RAY_ADDRESS is set); auto: the cluster this machine is a node
    # of (or RAY_ADDRESS); host:6379: the head's GCS address; ray://host:10001: Ray Client, from anywhere
    address: str | None = None
    num_cpus: int | None = None  # local Ray only; null: all cores
    num_gpus: int | None = None  # local Ray only; null: detect
    resources_per_trial: ResourcesConf = field(default_factory=ResourcesConf)
    # forward the workers' stdout/stderr to this console (each job's log in its folder holds them too)
    log_to_driver: bool = False
    max_concurrent_trials: int | None = None  # null: as many as the resources per trial allow
    max_failures: int = 0  # retries of a trial whose worker or node died (task exceptions are never retried)
    # a finished trial's worker runs the next trial (Ray Tune's reuse_actors). Trials shorter than a new
    # worker's start then stay on the warm workers and a node that joins later may get none: false spreads them
    reuse_actors: bool = True
    # Ray Tune's experiment state (and trial checkpoints); null: the sweep dir on the driver.
    # On several nodes: a path every node mounts at the same place (NFS), or s3://bucket/prefix.
    storage_path: str | None = None
    # Code for the nodes (runtime_env working_dir): auto uploads the launch directory when joining
    # a cluster (ray.address set) and nothing on a local Ray; a path uploads it; null uploads nothing.
    working_dir: str | None = "auto"
    py_modules: list[str] = field(default_factory=list)  # package folders or names shipped too, e.g. [sweeper]
    excludes: list[str] = field(default_factory=lambda: list(UPLOAD_EXCLUDES))  # gitignore-style: not uploaded
    # anything else of Ray's runtime_env (pip, conda, container, env_vars), merged over what the sweeper sets
    runtime_env: dict[str, Any] = field(default_factory=dict)


@dataclass
class MLflowConf:
    """Where records go: a local SQLite file by default, a tracking server on a cluster."""

    # any MLflow tracking URI: http://host:5000 for a tracking server; a SQLite file works on a cluster too
    # (only the driver writes to it)
    tracking_uri: str = "sqlite:///mlruns.db"
    # null: the app's name (Hydra's job name), filled in by the sweeper's driver.
    experiment_name: str | None = None


@dataclass
class EnvConf:
    """Environment conditions of every trial, put in force in its worker by sweeper.environment.

    Every key is sweepable: env.seed='range(0,200)' env.threads=1,2 env.deterministic=true,false
    """

    seed: int = 0  # seeds Python's random, NumPy and torch (CPU and every CUDA device) in one call
    # BLAS/OpenMP pools (threadpoolctl), torch.set_num_threads and OMP/MKL/OPENBLAS_NUM_THREADS; null leaves
    # them as they are
    threads: int | None = None
    # torch.use_deterministic_algorithms, CUBLAS_WORKSPACE_CONFIG=:4096:8, cuDNN deterministic, autotuner off
    deterministic: bool = False
    cudnn: bool = True  # torch.backends.cudnn.enabled
    cudnn_benchmark: bool = False  # the cuDNN autotuner (fast, not reproducible); forced off by deterministic
    device: str = "auto"  # cpu | cuda | auto: cuda when Ray gave the trial a GPU
    # torch.set_float32_matmul_precision: highest | high | medium; at highest, TF32 convolutions
    # (torch.backends.cudnn.allow_tf32) are off too
    matmul_precision: str = "highest"


# The env group, for any application: `defaults: [env: default]`, then env=reproducible or env=fast.
ENV_PRESETS = {
    "default": EnvConf(),
    "reproducible": EnvConf(threads=1, deterministic=True, cudnn_benchmark=False, matmul_precision="highest"),
    "fast": EnvConf(deterministic=False, cudnn_benchmark=True, matmul_precision="high"),
}
for _name, _node in ENV_PRESETS.items():
    ConfigStore.instance().store(group="env", name=_name, node=_node, provider="multiverse_sweeper")

ConfigStore.instance().store(
    group="hydra/sweeper",
    name="multiverse",
    node=MultiverseSweeperConf,
    provider="multiverse_sweeper",
)
# A plain root with typed children: the application's own keys merge in beside them.
def _sweeper_defaults() -> Any:
    """The ``ray`` and ``mlflow`` blocks, with the open-ended maps open to new keys.

    Hydra puts the composed config in struct mode, where ``ray.resources_per_trial.custom=
    {large_gpu: 1}`` would be refused as an unknown key; those maps stay typed but open.
    """
    from omegaconf import OmegaConf

    ray = OmegaConf.structured(RayConf)
    for open_map in (ray.resources_per_trial.custom, ray.runtime_env):
        OmegaConf.set_struct(open_map, False)
    return {"ray": ray, "mlflow": MLflowConf}


ConfigStore.instance().store(name="sweeper_defaults", node=_sweeper_defaults(), provider="multiverse_sweeper")
