#!/usr/bin/env bash
# Issue 18's GPU check on the lent GPU machine (docs/gpu.md), from the repository root, with .whl
# carried (scripts/device_wheelhouse.sh): installs what the image lacks, then runs
# bench/checkpoint_gpu_check.py through the whole command; its JSON goes to $OUT.
#   bash scripts/device_checkpoint_check.sh --epochs 3 --kill-epochs 5
set -uo pipefail
export PYTHONUNBUFFERED=1
mkdir -p /tmp/site
tar -C /tmp/site -xJf .whl/ray312.tar.xz || exit 1
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH="/tmp/site:$PWD"
# The `sweeper` command (`sweeper resume`), as `pip install -e .` would make it.
python=$(command -v python3)
printf '#!%s\nimport sys\nfrom sweeper.cli import main\nsys.exit(main())\n' "$python" > "$(dirname "$python")/sweeper"
chmod +x "$(dirname "$python")/sweeper"
nvidia-smi -L
python3 -c "import torch, torchvision, ray, mlflow, hydra, sweeper
print('torch', torch.__version__, 'torchvision', torchvision.__version__, 'ray', ray.__version__, 'mlflow', mlflow.__version__)" \
  || exit 1
timeout "${CHECK_TIMEOUT:-520}" python3 bench/checkpoint_gpu_check.py --out "${OUT:-.}/ckpt.json" "$@"
