"""Structured configs of the multiverse sweeper, registered in Hydra's ConfigStore.

Hydra imports this module on every application start, so it imports nothing heavy.
Two nodes are stored:

- ``hydra/sweeper=multiverse``: the sweeper's own settings (``hydra.sweeper.*``);
- ``sweeper_defaults`` (root level): the top-level ``ray`` and ``mlflow`` blocks, short to
  type on a cluster command line (``ray.address=auto mlflow.tracking_uri=http://...``).
  Add ``- sweeper_defaults`` to an application's defaults list to get them typed.
"""

from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional

from hydra.core.config_store import ConfigStore


@dataclass
class MultiverseSweeperConf:
    """Settings of one sweep; field names equal the sweeper's constructor arguments."""

    _target_: str = "hydra_plugins.multiverse_sweeper.multiverse_sweeper.MultiverseSweeper"
    strategy: str = "ivr"  # random | sobol | grid | ivr | ucb
    metric: str = "objective"  # the task's output to model; a float return is named this
    mode: str = "max"  # max | min
    n_initial: int = 8  # Sobol points before the GP takes over (ivr, ucb)
    batch_size: int = 8  # points chosen together from the same results
    num_trials: int = 32
    params: Dict[str, Any] = field(default_factory=dict)  # search space, Hydra override grammar
    seed: int = 0  # the searcher's own seed: Sobol scramble, integration points, GP restarts
    deterministic: bool = False  # commit to whole batches: same points whatever the timing
    max_failure_rate: float = 0.5  # stop once failures exceed this fraction of num_trials
    trial_timeout_s: Optional[float] = None  # a trial running longer ends TIMEOUT (a failure); null: no limit
    ucb_beta: float = 2.0  # exploration weight of the ucb strategy
    n_candidates: int = 2048  # quasi-random candidates the acquisition is maximised over
    n_integration: int = 1024  # quasi-random Monte-Carlo points of the IVR integral
    gp_restarts: int = 3  # optimiser starts of a cold GP fit (warm refits: the last optimum + the fixed start)
    gp_max_fit_points: Optional[int] = 300  # above this many results the restarts fit a seeded subset (null: all)
    gp_refine_max_points: Optional[int] = 1000  # up to this many, the best restart is refined on all (null: never)
    gp_lengthscale_prior: bool = False  # MAP fit with a LogNormal lengthscale prior (Hvarfner et al. 2024)
    ivr_local_search: bool = False  # ivr: add local-search candidates around the best Sobol candidates
    kernel: str = "matern52-ard"  # matern52-ard | matern52 | rbf-ard | rbf (continuous dims)
    coregion_rank: int = 1  # rank of W in each categorical dim's B = W W^T + diag(kappa)
    stop_on_bayes_factor: Optional[float] = None  # T: stop once K > T or K < 1/T (interaction test)
    # [low, high] the metric can take, either null ([0, 1] for an accuracy): the GP models it warped
    # so every prediction respects them; a trial returning a value outside them FAILS. null: no bounds.
    metric_bounds: Optional[List[Any]] = None
    resume: bool = False  # continue the interrupted sweep in hydra.sweep.dir (see `sweeper resume`)


#: What ``ray.working_dir`` leaves out unless told otherwise: environments, records, outputs.
UPLOAD_EXCLUDES = (".git", ".venv", "venv", "__pycache__", "*.pyc", "multirun", "outputs", "mlruns", "mlruns.db",
                   "mlartifacts")


@dataclass
class ResourcesConf:
    """Resources one trial reserves; fractional GPUs pack several trials on one GPU."""

    cpu: float = 1.0
    gpu: float = 0.0
    custom: Dict[str, float] = field(default_factory=dict)


@dataclass
class RayConf:
    """Where trials run: a local Ray started by the sweeper (address null) or a cluster."""

    address: Optional[str] = None  # null: start a local Ray; auto | host:6379 | ray://host:10001
    num_cpus: Optional[int] = None  # local Ray only; null: all cores
    num_gpus: Optional[int] = None  # local Ray only; null: detect
    resources_per_trial: ResourcesConf = field(default_factory=ResourcesConf)
    log_to_driver: bool = False  # forward the workers' stdout/stderr to this console
    max_concurrent_trials: Optional[int] = None  # null: as many as the resources per trial allow
    max_failures: int = 0  # retries of a trial whose worker died (not of task exceptions)
    # Ray Tune's experiment state (and trial checkpoints); null: the sweep dir on the driver.
    # On several nodes: a path every node mounts at the same place (NFS), or s3://bucket/prefix.
    storage_path: Optional[str] = None
    # Code for the nodes (runtime_env working_dir): auto uploads the launch directory when joining
    # a cluster (ray.address set) and nothing on a local Ray; a path uploads it; null uploads nothing.
    working_dir: Optional[str] = "auto"
    py_modules: List[str] = field(default_factory=list)  # package folders or names shipped too, e.g. [sweeper]
    excludes: List[str] = field(default_factory=lambda: list(UPLOAD_EXCLUDES))  # left out of working_dir
    runtime_env: Dict[str, Any] = field(default_factory=dict)  # more of Ray's runtime_env: pip, conda, env_vars


@dataclass
class MLflowConf:
    """Where records go: a local SQLite file by default, a tracking server on a cluster."""

    tracking_uri: str = "sqlite:///mlruns.db"
    # null: the app's name (Hydra's job name), filled in by the sweeper's driver.
    experiment_name: Optional[str] = None


@dataclass
class EnvConf:
    """Environment conditions of every trial, put in force in its worker by sweeper.environment.

    Every key is sweepable: env.seed='range(0,200)' env.threads=1,2 env.deterministic=true,false
    """

    seed: int = 0  # seeds Python, NumPy and torch (CPU and CUDA)
    threads: Optional[int] = None  # BLAS/OpenMP and torch threads; null leaves them as they are
    deterministic: bool = False  # torch deterministic algorithms, CUBLAS_WORKSPACE_CONFIG, cuDNN deterministic
    cudnn: bool = True  # cuDNN enabled
    cudnn_benchmark: bool = False  # cuDNN autotuner (fast, not reproducible); forced off by deterministic
    device: str = "auto"  # cpu | cuda | auto (cuda when the trial was given a GPU)
    matmul_precision: str = "highest"  # float32 matmul precision: highest | high | medium


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
