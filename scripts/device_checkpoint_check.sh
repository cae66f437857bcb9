#!/usr/bin/env bash
# Issue 18's GPU check on the lent GPU machine (docs/gpu.md), from the repository root, with .whl
# carried (scripts/device_wheelhouse.sh): installs what the image lacks, then runs
# bench/checkpoint_gpu_check.py through the whole command; its JSON goes to $OUT.
#   bash scripts/device_checkpoint_check.sh --epochs 3 --kill-epochs 5
set -uo pipefail
source scripts/device_setup.sh
timeout "${CHECK_TIMEOUT:-520}" python3 bench/checkpoint_gpu_check.py --out "${OUT:-.}/ckpt.json" "$@"
