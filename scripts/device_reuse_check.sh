#!/usr/bin/env bash
# ray.reuse_actors on the lent GPU machine (docs/gpu.md), from the repository root, with .whl carried
# (scripts/device_wheelhouse.sh): the same 16-trial sweep through the whole command (Hydra -> Ray Tune ->
# MLflow in SQLite), 4 trials per GPU, once with workers reused (the default) and once with a fresh worker
# per trial. Each sweep's MLflow file, log and wall time go to $OUT (docs/gpu.md reads them).
#   bash scripts/device_reuse_check.sh
set -uo pipefail
source scripts/device_setup.sh
out=${OUT:-.}
for reuse in true false; do
  start=$EPOCHREALTIME
  timeout "${SWEEP_TIMEOUT:-240}" python3 experiments/train.py --multirun +experiment=seeds/cpu env.device=cuda epochs=2 \
    "hydra.sweeper.params={env.seed:'range(0, 8)',env.deterministic:'choice(true, false)'}" \
    hydra.sweeper.num_trials=16 hydra.sweeper.n_initial=16 hydra.sweeper.batch_size=16 \
    ray.resources_per_trial.cpu=1 ray.resources_per_trial.gpu=0.25 ray.reuse_actors=$reuse \
    "mlflow.tracking_uri=sqlite:///$out/reuse_$reuse.db" hydra.sweep.dir=/tmp/sweep-reuse-$reuse \
    > "$out/sweep_reuse_$reuse.log" 2>&1
  rc=$?
  echo "reuse_actors=$reuse exit=$rc wall_s=$(python3 -c "print(round($EPOCHREALTIME - $start, 1))")" | tee -a "$out/times.txt"
  tail -3 "$out/sweep_reuse_$reuse.log"
done
