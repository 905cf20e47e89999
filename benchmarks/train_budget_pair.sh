#!/bin/bash
# BC and TD3+BC side by side on one GPU, each for a budget of wall time (benchmarks/train_budget.py), the
# exports and logs in $OUT (8 files: <algo>.pt, <algo>.curve.csv, <algo>-extras.tar, <algo>.log per algorithm).
#
#   DATA=.gpu-data/demos/OpenCabinetDrawer.h5 POINTS=320 BUDGET=380 OUT=/tmp/out \
#       PYTHONPATH=.gpu-data/pkg bash benchmarks/train_budget_pair.sh [extra train_budget.py arguments]
#
# The issue-18 GPU run (docs/benchmarks.md) ran it from a folder that held this script, train_budget.py
# and the handleit package laid out for PYTHONPATH (SCRIPT_DIR below). gpu_large; BC at lr 1e-3 (the pipeline
# check's), TD3+BC at the config's 3e-4. Each run is stopped by SIGTERM (timeout) BUDGET + 120 s after its start
# if the probe's step count overruns: it then exports what it has.
set -u
: "${DATA:?a demonstration file}" "${POINTS:?points per observation, as in the file}" "${BUDGET:?seconds}" "${OUT:?folder}"
SCRIPT_DIR=${SCRIPT_DIR:-$(cd "$(dirname "$0")" && pwd)}
RUN_DIR=${RUN_DIR:-/tmp/train-budget-run}
PYTHON=${PYTHON:-python3}
export PYTHONUNBUFFERED=1 MPLBACKEND=Agg OMP_NUM_THREADS=2
mkdir -p "$OUT" "$RUN_DIR"
"$PYTHON" -c "import torch, h5py, matplotlib, handleit.baselines.training; print('torch', torch.__version__, 'cuda', torch.cuda.is_available(), torch.cuda.get_device_name(0) if torch.cuda.is_available() else '')" || exit 3
start=$(date +%s)
for algo in bc td3bc; do
    lr=(); [ "$algo" = bc ] && lr=(--set lr=1e-3)
    timeout -s TERM -k 30 $((BUDGET + 120)) "$PYTHON" "$SCRIPT_DIR/train_budget.py" --algo "$algo" --data "$DATA" \
        --config gpu_large "${lr[@]}" --set num_points="$POINTS" --budget-s "$BUDGET" --probe-s 20 \
        --out "$RUN_DIR/$algo.pt" --export "$OUT" --snapshots 3 "$@" > "$OUT/$algo.log" 2>&1 &
done
while sleep 60; do  # progress, while both run
    jobs -r | grep -q . || break
    echo "--- $(( $(date +%s) - start )) s"; tail -n 1 "$OUT/bc.log" "$OUT/td3bc.log"; nvidia-smi --query-gpu=utilization.gpu,memory.used --format=csv,noheader 2>/dev/null
done
wait
echo "=== done after $(( $(date +%s) - start )) s"
tail -n 40 "$OUT/bc.log" "$OUT/td3bc.log"
ls -la "$OUT"
