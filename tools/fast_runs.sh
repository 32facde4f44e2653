#!/usr/bin/env bash
# The from-scratch runs of docs/learning-at-scale.md: MAPPO and IPPO (5 seeds each) and flat PPO,
# all scenarios, 20M frames or MAX_WALL seconds per run, whichever comes first (the frames each
# reached are in its fast.json / best_model.json). Background, niced, one torch thread each, JOBS
# at a time (default 2, this box's cores): a queue, so that the runs that finish are whole runs even
# if the session's time ends before the queue does. Order: every mappo seed, then every ippo seed,
# then flat PPO. NICE (default 10) is the runs' niceness.
set -euo pipefail
# A run that already finished (its metadata says complete) is not queued again: re-running the
# script resumes the queue. A run another queue has claimed (runs/fast/.claims/, as
# fast_ablations.sh) is skipped when its turn comes, so re-running the script while a queue is live
# does not run a seed twice. Delete a claim to re-run it.
finished() { [ -f "$1" ] && python -c 'import json,sys; sys.exit(not json.load(open(sys.argv[1])).get("complete", True))' "$1"; }
MAX_WALL=${MAX_WALL:-0}
FRAMES=${FRAMES:-20000000}
EVAL="--eval-interval ${EVAL_INTERVAL:-500000} --eval-episodes ${EVAL_EPISODES:-4} --max-wall-s $MAX_WALL"
mkdir -p runs/fast logs
{
  for alg in ${ALGS-mappo ippo}; do
    for seed in ${SEEDS-0 1 2 3 4}; do
      finished "runs/fast/${alg}_s${seed}/fast.json" ||
        echo "fast-mappo --algorithm $alg --save runs/fast/${alg}_s${seed} --seed $seed logs/fast_${alg}_s${seed}.log"
    done
  done
  for seed in ${PPO_SEEDS-0 1 2 3 4}; do  # PPO_SEEDS= : none
    finished "runs/fast/ppo_flat_s${seed}/best_model.json" ||
      echo "fast-ppo --track flat --save runs/fast/ppo_flat_s${seed} --seed $seed logs/fast_ppo_flat_s${seed}.log"
  done
} | OMP_NUM_THREADS=1 xargs -P "${JOBS:-2}" -L 1 sh -c \
  'mkdir -p runs/fast/.claims; mkdir "runs/fast/.claims/${5##*/}" 2>/dev/null || exit 0  # taken
   exec nice -n '"${NICE:-10}"' python -m hospital_marl_cli train "$1" "$2" "$3" "$4" "$5" "$6" "$7" \
     --frames '"$FRAMES"' --all-scenarios '"$EVAL"' > "$8" 2>&1' sh
