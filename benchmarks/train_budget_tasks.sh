#!/bin/bash
# BC and TD3+BC for several tasks at once on one GPU (benchmarks/train_budget_pair.sh per task, side by side),
# from demonstration parts (`handleit compact-demos --first/--episodes`) that earlier device calls staged in
# $STAGE and that this call carries in ./part-*/. Packs what comes back into few files (the device tool returns
# at most 8): per task <task>-final.tar (policies, curve CSVs, logs) and <task>-<algo>-extras.tar (plot,
# snapshots, summary).
#
#   TASKS="PushChair MoveBucket" BUDGET=450 OUT=$OUT PYTHONPATH=$PWD/pkg \
#       bash train_budget_tasks.sh --set state_qvel=false --set alpha=0.1
#
# Run it from a folder that holds this script, train_budget.py, train_budget_pair.sh and the package laid out
# for PYTHONPATH (pkg/handleit/...), as the issue-18 GPU runs did (docs/benchmarks.md).
set -u
: "${TASKS:?task names}" "${BUDGET:?seconds}" "${OUT:?folder}"
cd "$(dirname "$0")"
STAGE=${STAGE:-/tmp/stage}; POINTS=${POINTS:-400}
mkdir -p "$STAGE" "$OUT"
for p in part-*; do [ -d "$p" ] && cp -r "$p" "$STAGE/"; done
nvidia-smi --query-gpu=name,utilization.gpu,memory.used --format=csv,noheader 2>/dev/null
for task in $TASKS; do
    datas=( "$STAGE"/*/"$task".h5 )
    [ -e "${datas[0]}" ] || { echo "no staged parts for $task in $STAGE" >&2; exit 2; }
    more=(); for d in "${datas[@]:1}"; do more+=(--data "$d"); done
    echo "$task: ${#datas[@]} part(s)"
    DATA=${datas[0]} POINTS=$POINTS BUDGET=$BUDGET OUT=/tmp/out/$task RUN_DIR=/tmp/run-$task \
        bash train_budget_pair.sh "$@" "${more[@]}" > "/tmp/out-$task-pair.log" 2>&1 &
done
wait
for task in $TASKS; do
    d=/tmp/out/$task; cp "/tmp/out-$task-pair.log" "$d/pair.log"
    (cd "$d" && tar cf "$OUT/$task-final.tar" ./*.pt ./*.csv ./*.log)
    for algo in bc td3bc; do [ -f "$d/$algo-extras.tar" ] && cp "$d/$algo-extras.tar" "$OUT/$task-$algo-extras.tar"; done
    tail -n 25 "$d/bc.log" "$d/td3bc.log"
done
ls -la "$OUT"
