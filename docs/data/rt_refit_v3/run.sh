#!/bin/bash
# Issue 42 item 6: the radiotherapy learners re-fitted on score v3 and the 5-of-8-bucket splits
# (2026-12-07/08, a shared 2-core box at load 15-23; every process OMP_NUM_THREADS=1 nice -n 10).
# What ran, in order (the session ran independent steps as parallel processes); outputs in runs/rt_v3,
# the small ones copied beside this file. CPU-s are each process's user time.
set -e
export OMP_NUM_THREADS=1
R=runs/rt_v3
CK=policies/radiotherapy/checkpoints
mkdir -p $R
python -c "import json; d = json.load(open('$CK/rt_option_selector.json')); json.dump(d['options'], open('$R/family.json', 'w'))"  # the v2 family (before this refit overwrote the checkpoint)

# FMO on the scoreboard's 60 new patients (13.6 CPU-s)
python tools/rt_fmo.py --episodes 10

# option selector: the 12-variant family on 30 validation patients per task (33 CPU-s), labels on
# 60 training patients per task per seed (61-70 CPU-s each), per-site sweep, one selector per seed
python tools/rt_options.py headroom --episodes 30 --family $R/family.json --json $R/headroom30.json
for s in 0 1 2 3 4; do
  python tools/rt_options.py label --seed $s --patients 60 --family $R/family.json --out $R/opt_train_s$s.npz
done
python tools/rt_options.py sweep --seeds 0 1 2 3 4 --family $R/family.json --validation $R/headroom30.json \
  --labels "$R/opt_train_s{seed}.npz" --out $R/opt_sweep.json
for s in 0 1 2 3 4; do
  python tools/rt_options.py select --seed $s --family $R/family.json --validation $R/headroom30.json \
    --labels $R/opt_train_s$s.npz --config $R/opt_sweep.json --out $CK/rt_option_selector_seed$s.npz
done

# ranked selector: each seed's option selector + an edit ranker on its own training patients
# (100 per task and round, 3 rounds: ~55 CPU-s per seed), swept per seed on 30 validation
# patients (ridge {0.03, 0.3} x tau {none, 0.1, 0.2}; ~30 CPU-s per seed), merged, saved
for s in 0 1 2 3 4; do
  python tools/rt_edits.py label --seed $s --patients 100 --rounds 3 --out $R/edits_s$s.npz
  python tools/rt_edits.py sweep --stats "$R/edits_s{seed}.npz" --seeds $s --ridges 0.03 0.3 --taus -1 0.1 0.2 \
    --out $R/edits_sweep_s$s.json
done
python tools/rt_edits.py sweep --stats "$R/edits_s{seed}.npz" --seeds --ridges 0.03 0.3 --taus -1 0.1 0.2 \
  --merge $R/edits_sweep_s0.json $R/edits_sweep_s1.json $R/edits_sweep_s2.json $R/edits_sweep_s3.json \
  $R/edits_sweep_s4.json --out $R/edits_sweep.json
for s in 0 1 2 3 4; do
  python tools/rt_edits.py save --seed $s --stats $R/edits_s$s.npz --config $R/edits_sweep.json \
    --out $CK/rt_ranked_selector_seed$s.npz
done

# ppo: MaskablePPO warm-started from a clone of anatomy_aware (the v2 recipe), 30,000 steps
# instead of 100,000 (CPU: ~220-230 CPU-s per seed, of which the clone is most)
for s in 0 1 2 3 4; do
  python -m hospital_marl_cli train radiotherapy --seed $s --timesteps 30000 --eval-freq 15000 --hidden 256 \
    --learning-rate 0.0001 --ent-coef 0.001 --warm-start anatomy_aware --warm-start-episodes 800 \
    --warm-start-epochs 60 --save $R/ppo_s$s
done

# ship each learner's best validation seed, then grade every row on the test splits
python tools/rt_ship.py --runs $R
# (what ran: 8 processes, each a share of the rows, then joined; equal to one
#  `python tools/rt_scoreboard.py --episodes 10 --write`)
for k in 0 1 2 3 4 5 6 7; do python tools/rt_scoreboard.py --episodes 10 --part $k/8 & done; wait
python tools/rt_scoreboard.py --merge docs/data/rt_scoreboard.json.part{0,1,2,3,4,5,6,7} --write
python tools/readme.py --scoreboard scoreboard-rt                 # docs/results.md's RT block
python tools/notebooks.py --execute 08                            # ci budget
python tools/docs_media.py --only rt-prostate --only rt-head-neck --only rt-pediatric-brain --only rt-plan
python -m tools.web_screenshots --rt
