#!/usr/bin/env bash
# The performance run on the H200, in one call (issue: GEMMs against cuBLAS, FP8 against
# torch._scaled_mm, copy/add bandwidth, call overhead and compile latency):
#   bench/h200_perf.sh OUT_DIR [SWEEP...]
# installs the package over the machine's torch/triton, then runs `croqtile bench` with
# autotuning (choices cached under OUT_DIR/cache) and the overhead and latency scripts.
# Results (CSV, JSON, logs) go to OUT_DIR; the summary tables are printed last. With
# PACK=1 they are also packed into OUT_DIR.tgz, one file that survives a copy-back limit
# on the number of files (the run's output is then lost only if the call itself is).
# BENCH_ARGS adds arguments to `croqtile bench` (the LLM sweep takes 460 s of a 600 s call
# limit: BENCH_ARGS="--dtype f16" and "--dtype bf16" split it in two).
# The user-style sweeps (attention, epilogue, decode) run in a `croqtile bench` call of their
# own, compiled as a user would (no --autotune full: decode tunes with quick by itself);
# TUTORIAL and UPSTREAM name the checkouts (or files) of the published attention kernels.
set -uo pipefail
cd "$(dirname "$0")/.."
out=${1:?usage: bench/h200_perf.sh OUT_DIR [SWEEP...]}
shift
sweeps=("$@")
[ ${#sweeps[@]} -eq 0 ] && sweeps=(square fp8 memory llm)
mkdir -p "$out"
python3 -m pip install -q --no-deps --no-build-isolation -e . > "$out/install.log" 2>&1
if compgen -G ".whl/parso*.whl" > /dev/null; then  # the GPU image lacks parso
    carried=$(mktemp -d)
    python3 -m pip install -q --no-deps --target "$carried" .whl/parso*.whl >> "$out/install.log" 2>&1
    export PYTHONPATH=$carried${PYTHONPATH:+:$PYTHONPATH}
fi
export CROQTILE_CACHE_DIR=$(mktemp -d)  # tuning afresh; the choices are copied to OUT_DIR
for script in call_overhead compile_latency; do
    [ -f "bench/$script.py" ] && python3 "bench/$script.py" --json "$out/$script.json" \
        > "$out/$script.txt" 2>&1
done
# a croqtile operator under torch.compile against a hand-written triton_op (issue 17)
[ -f bench/op_overhead.py ] && python3 bench/op_overhead.py --reduce-overhead --out "$out" \
    > "$out/op_overhead.txt" 2>&1
read -r -a extra <<< "${BENCH_ARGS:-}"  # e.g. BENCH_ARGS="--dtype f16": half the LLM sweep
tuned=() user=()
for sweep in "${sweeps[@]}"; do
    case $sweep in attention|epilogue|decode) user+=("$sweep") ;; *) tuned+=("$sweep") ;; esac
done
if [ ${#tuned[@]} -gt 0 ]; then
    python3 -m croqtile bench "${tuned[@]}" "${extra[@]}" --autotune full --out "$out" \
        > "$out/bench.txt" 2> "$out/bench.err"
    echo "croqtile bench ${tuned[*]}: exit $?"
fi
if [ ${#user[@]} -gt 0 ]; then
    checkouts=()
    [ -n "${TUTORIAL:-}" ] && checkouts+=(--tutorial "$TUTORIAL")
    [ -n "${UPSTREAM:-}" ] && checkouts+=(--upstream "$UPSTREAM")
    python3 -m croqtile bench "${user[@]}" "${extra[@]}" "${checkouts[@]}" --out "$out" \
        > "$out/bench_user.txt" 2> "$out/bench_user.err"
    echo "croqtile bench ${user[*]}: exit $?"
fi
python3 - "$CROQTILE_CACHE_DIR/tuning" "$out/tuning_choices.json" <<'PY'
import json, pathlib, sys
records = [json.loads(p.read_text()) for p in sorted(pathlib.Path(sys.argv[1]).glob("*.json"))]
pathlib.Path(sys.argv[2]).write_text(json.dumps(records, indent=1))
PY
cat "$out"/call_overhead.txt "$out"/compile_latency.txt "$out"/op_overhead.txt 2>/dev/null \
    | tail -n 30
tail -n 40 "$out/bench.txt" "$out/bench_user.txt" 2>/dev/null
if [ "${PACK:-0}" = 1 ]; then
    tar czf "$out.tgz" -C "$(dirname "$out")" "$(basename "$out")" && rm -rf "$out"
fi
