#!/usr/bin/env bash
# Ablations (NICE, default 10; JOBS at a time, default 2) of docs/learning-at-scale.md ("why does MAPPO from scratch not reach team_heuristic?"):
# fast MAPPO on all scenarios, one option changed per row, SEEDS each, FRAMES per run (default 2M:
# a tenth of the main runs, so every row fits in this box's time), graded only at the end on
# validation days (seed 1000, EVAL_EPISODES per scenario; no checkpoint choice, so no selection
# bias). Rows: name, then the options that differ from the trainer's defaults.
# Table: python benchmarks/fast_stats.py ablations --runs runs/fast_ablate, then --write.
set -euo pipefail
# A run that already finished (its metadata says complete) is not queued again: re-running the
# script resumes the queue, and a run another queue has claimed (runs/fast_ablate/.claims/) is
# skipped when its turn comes: several queues can share the list. Delete a claim to re-run it.
finished() { [ -f "$1" ] && python -c 'import json,sys; sys.exit(not json.load(open(sys.argv[1])).get("complete", True))' "$1"; }
FRAMES=${FRAMES:-2000000}
EVAL="--eval-interval $FRAMES --eval-episodes ${EVAL_EPISODES:-8}"
mkdir -p runs/fast_ablate logs
VARIANTS=(
  "baseline|"
  "ippo|--algorithm ippo"
  "shared_actor|--shared-actor"
  "entropy_0.01|--entropy 0.01"
  "entropy_0|--entropy 0"
  "reward_scale_0.1|--reward-scale 0.1"
  "gamma_0.995|--gamma 0.995"
  "rollout_256|--steps 256"
  "wide_128|--hidden 128 128"
  "score_reward|--reward score --reward-scale 0.3"
  "lr_1e-3|--learning-rate 0.001"
  "horizon_0.999|--gamma 0.999 --gae-lambda 0.99"
  "obs_norm|--obs-norm"
  "recurrent_gru|--recurrent"
  "norm_reward|--norm-reward"
)
{
  for seed in ${SEEDS:-0 1 2}; do
    for v in "${VARIANTS[@]}"; do
      name=${v%%|*}; flags=${v#*|}
      finished "runs/fast_ablate/${name}_s${seed}/fast.json" || echo "$name $seed${flags:+ $flags}"
    done
  done
} | OMP_NUM_THREADS=1 xargs -P "${JOBS:-2}" -L 1 sh -c \
  'name=$1; seed=$2; shift 2; mkdir -p runs/fast_ablate/.claims
   mkdir "runs/fast_ablate/.claims/${name}_s${seed}" 2>/dev/null || exit 0  # another queue took it
   exec nice -n '"${NICE:-10}"' python -m hospital_marl_cli train fast-mappo "$@" \
     --frames '"$FRAMES"' --all-scenarios --seed "$seed" '"$EVAL"' \
     --save "runs/fast_ablate/${name}_s${seed}" > "logs/fast_ablate_${name}_s${seed}.log" 2>&1' sh
