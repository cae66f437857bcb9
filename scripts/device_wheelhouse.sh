#!/usr/bin/env bash
# What the lent GPU machine lacks to run a sweep through the whole command (Hydra -> Ray -> MLflow),
# as files to carry there (docs/gpu.md): .whl/*.whl (Python 3.12 wheels, installed there with
# --no-index --no-deps) and .whl/ray312.tar.xz (Ray unpacked, without Java, RLlib, Serve, LLM and the
# dashboard's web client: its wheel alone is 79 MB, over the 64 MiB a call may carry).
# The machine's image has torch, torchvision, numpy, scipy, pandas, scikit-learn, requests, ...
# (its package list: the device tool's KINDS.md); the names below are what requirements.lock
# pins that it lacks and a sweep imports. Run from the repository root; about 60 MB.
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=.whl
NEEDED="alembic annotated-types antlr4-python3-runtime cachetools cffi cryptography databricks-sdk decorator
fastapi gitdb gitpython google-auth greenlet hydra-core importlib-metadata jsonschema
jsonschema-specifications mako mlflow-skinny mlflow-tracing omegaconf opentelemetry-api opentelemetry-proto
opentelemetry-sdk opentelemetry-semantic-conventions pyasn1 pyasn1-modules pycparser pydantic
pydantic-core python-dotenv referencing rpds-py smmap sqlalchemy sqlparse starlette tensorboardx
typing-inspection wcwidth"
grep -qx '/.whl/' .git/info/exclude 2>/dev/null || echo '/.whl/' >> .git/info/exclude
rm -rf "$OUT" && mkdir -p "$OUT"
pins=$(mktemp)
for name in $NEEDED; do
  grep -iE "^${name//-/[-_.]}==" requirements.lock >> "$pins" || { echo "not in requirements.lock: $name"; exit 1; }
done
platforms="--platform manylinux_2_34_x86_64 --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64
  --platform manylinux_2_24_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64"
# antlr4-python3-runtime 4.9.3 (pinned by omegaconf) is published as a source archive only: built here.
grep -v '^antlr4' "$pins" > "$pins.bin"
python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp $platforms \
  -d "$OUT" -r "$pins.bin"
python3 -m pip wheel -q --no-deps -w "$OUT" "$(grep '^antlr4' "$pins")"
ray=$(grep -i '^ray==' requirements.lock | cut -d'=' -f3)
tmp=$(mktemp -d)
python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
  --platform manylinux2014_x86_64 -d "$tmp" "ray==$ray"
(cd "$tmp" && unzip -q ray-*.whl && rm ray-*.whl && rm -rf ray/jars ray/rllib ray/llm ray/serve ray/dashboard/client/build)
tar -C "$tmp" -cf - . | xz -T2 -6 > "$OUT/ray312.tar.xz"
rm -rf "$tmp" "$pins" "$pins.bin"
du -sh "$OUT"
