#!/usr/bin/env bash
# The from-scratch runs of docs/learning-at-scale.md: MAPPO and IPPO (5 seeds each) and flat PPO,
# all scenarios, 20M frames or MAX_WALL seconds, whichever comes first (the frames each reached are
# in its fast.json / best_model.json). Background, nice 19, one torch thread each (measured: on this
# loaded 2-core box 2 threads are 3-4x slower per step than 1).
set -euo pipefail
MAX_WALL=${MAX_WALL:-2100}
EVAL="--eval-interval ${EVAL_INTERVAL:-500000} --eval-episodes ${EVAL_EPISODES:-4} --max-wall-s $MAX_WALL"
mkdir -p runs/fast logs
for alg in ${ALGS:-mappo ippo}; do
  for seed in ${SEEDS:-0 1 2 3 4}; do
    OMP_NUM_THREADS=1 nice -n 19 python -m hospital_marl_cli train fast-mappo --algorithm "$alg" \
      --frames 20000000 --all-scenarios --seed "$seed" $EVAL \
      --save "runs/fast/${alg}_s${seed}" > "logs/fast_${alg}_s${seed}.log" 2>&1 &
  done
done
for seed in ${PPO_SEEDS:-0 1 2}; do
  OMP_NUM_THREADS=1 nice -n 19 python -m hospital_marl_cli train fast-ppo --track flat \
    --frames 20000000 --all-scenarios --seed "$seed" $EVAL \
    --save "runs/fast/ppo_flat_s${seed}" > "logs/fast_ppo_flat_s${seed}.log" 2>&1 &
done
wait
