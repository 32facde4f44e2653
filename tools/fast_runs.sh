#!/usr/bin/env bash
# The from-scratch runs of docs/learning-at-scale.md: MAPPO and IPPO, 5 seeds each, all scenarios,
# 20M frames or MAX_WALL seconds, whichever comes first (the frames reached are in each fast.json).
# Background, nice 19, one torch thread each (measured: 2 threads are 3-4x slower on a loaded box).
set -euo pipefail
MAX_WALL=${MAX_WALL:-4200}
mkdir -p runs/fast logs
for alg in ${ALGS:-mappo ippo}; do
  for seed in ${SEEDS:-0 1 2 3 4}; do
    OMP_NUM_THREADS=1 nice -n 19 python -m hospital_marl_cli train fast-mappo --algorithm "$alg" \
      --frames 20000000 --all-scenarios --seed "$seed" --eval-interval 1000000 --max-wall-s "$MAX_WALL" \
      --save "runs/fast/${alg}_s${seed}" > "logs/fast_${alg}_s${seed}.log" 2>&1 &
  done
done
wait
