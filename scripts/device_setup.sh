#!/usr/bin/env bash
# Sourced by the scripts/device_*_check.sh scripts on the lent GPU machine, from the repository root,
# with .whl carried (scripts/device_wheelhouse.sh): installs what the machine's image lacks into
# /tmp/site, makes the `sweeper` command as `pip install -e .` would, and prints the versions.
export PYTHONUNBUFFERED=1
mkdir -p /tmp/site
tar -C /tmp/site -xJf .whl/ray312.tar.xz || exit 1
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH="/tmp/site:$PWD"
python=$(command -v python3)
printf '#!%s\nimport sys\nfrom sweeper.cli import main\nsys.exit(main())\n' "$python" > "$(dirname "$python")/sweeper"
chmod +x "$(dirname "$python")/sweeper"
nvidia-smi -L
python3 -c "import torch, torchvision, ray, mlflow, hydra, sweeper
print('torch', torch.__version__, 'torchvision', torchvision.__version__, 'ray', ray.__version__, 'mlflow', mlflow.__version__)" \
  || exit 1
