#!/usr/bin/env bash
# The GPU check run on the H200, in one call:
#   bench/h200_check.sh OUT_DIR [UPSTREAM_CHECKOUT [TUTORIAL_CHECKOUT]]
# installs the package over the machine's torch/triton, runs every GPU variant of the test
# suite (pytest -m gpu), and, when an upstream checkout is given, the end-to-end conformance
# harness on CUDA. Logs and the harness JSON go to OUT_DIR; a short summary is printed last.
set -uo pipefail
cd "$(dirname "$0")/.."
out=${1:?usage: bench/h200_check.sh OUT_DIR [UPSTREAM [TUTORIAL]]}
upstream=${2:-}
tutorial=${3:-}
mkdir -p "$out"
python3 -m pip install -q --no-deps --no-build-isolation -e . > "$out/install.log" 2>&1
# wheels carried with the working tree (the machine has no internet): parso, and a numpy
# older than 2.4 for Triton's interpreter
if compgen -G ".whl/*.whl" > /dev/null; then
    carried=$(mktemp -d)
    python3 -m pip install -q --no-deps --target "$carried" .whl/*.whl >> "$out/install.log" 2>&1
    export PYTHONPATH=$carried${PYTHONPATH:+:$PYTHONPATH}
fi
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > "$out/gpu.txt"
python3 -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__)" \
    >> "$out/gpu.txt"
python3 -m pytest -q -m gpu -p no:cacheprovider tests > "$out/pytest_gpu.log" 2>&1
echo "pytest -m gpu: exit $?" >> "$out/summary.txt"
if [ -n "$upstream" ]; then
    args=("$upstream" --device cuda --json "$out/e2e_cuda.json")
    [ -n "$tutorial" ] && args+=(--tutorial "$tutorial")
    python3 -m tests.conformance.e2e_upstream "${args[@]}" > "$out/e2e_cuda.txt" 2>&1
    echo "e2e harness: exit $?" >> "$out/summary.txt"
fi
cat "$out/gpu.txt" "$out/summary.txt"
tail -n 5 "$out/pytest_gpu.log"
[ -n "$upstream" ] && grep -v '^\[' "$out/e2e_cuda.txt" | head -n 40
