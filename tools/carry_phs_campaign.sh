#!/usr/bin/env bash
# Carry the hard BoulderDash campaign's PHS*(π) through the same recipe changes as PHS*(π^SG),
# at the same batches, so that the two halves of the verdict are compared at equal recipes
# (docs/results/hard-boulderdash-campaign-log.md, "Carrying the campaign on"). Not installed
# and not run by the tests. Run it again after any stop: every step looks at what is on disk
# and goes on from there.
#
#   tools/carry_phs_campaign.sh DIR [WORKERS] [LIMIT]
#
# DIR      holds `campaign`, the campaign's comparison folder (`sgps unpack
#          results/runs/campaign-hard-boulderdash --out DIR/campaign`), and, once they exist, the
#          forks `campaign-phs-16000` and `campaign-phs-16000-memory` (unpacked from
#          results/runs/campaign-hard-boulderdash-phs-16000[-memory] on a new machine)
# WORKERS  search processes (default 1); the split changes no result (docs/training.md)
# LIMIT    the expansion limit (default 132028313: PHS*(π^SG) passed 90% of its 10,000 in the batch
#          that ended there, so PHS*(π) stops after the batch that reaches as many; the comparison
#          is decided at equal expansions, and the final weights are tested from there)
#
# The legs, each stopped after the batch where PHS*(π^SG) was forked (`--max-batches`, counted
# from the batch the run's checkpoint holds; a pass is 313 batches: 10,000 problems in batches of 32):
#   1. `campaign/runs/phs-s0` under LTS-CM to after iteration 1, batch 140 (76,096,000
#      expansions while it solves nothing: every batch then spends its whole budget);
#   2. forked to a budget of 16,000, on to after iteration 1, batch 172 (92,480,000);
#   3. forked with a solution memory of 32, on to LIMIT expansions.
# Every leg runs with `--max-expansions LIMIT`, so no earlier expansion limit stops it short.
# Runs `$PYTHON -m sgps` (PYTHON: default python3; a frozen copy of sgps can come first on PYTHONPATH).
set -euo pipefail
dir=${1:?DIR holding campaign/}
workers=${2:-1}
limit=${3:-132028313}
py=${PYTHON:-python3}
sgps=("$py" -m sgps)
cd "$dir"

last_batch() {  # "ITERATION BATCH": the last batch the run folder's checkpoint holds (BATCH -1: none of that pass)
    "$py" - "$1" <<'EOF'
import sys
from pathlib import Path

from sgps.runs.trainer_state import read_trainer_state

loop = read_trainer_state(Path(sys.argv[1]) / "checkpoints" / "trainer.pt")["loop"]
print(loop["iteration"], loop["next_batch"] - 1)
EOF
}

BATCHES_PER_PASS=313

leg() {  # RUN PROBLEMS ITERATION BATCH: resume RUN until it has searched that batch, check where it ended
    local run=$1 problems=$2 iteration=$3 batch=$4 at_iteration at_batch
    read -r at_iteration at_batch <<<"$(last_batch "$run")"
    local left=$(( (iteration - at_iteration) * BATCHES_PER_PASS + batch - at_batch ))
    if (( left < 0 )); then
        echo "carry_phs_campaign: $run is past iteration $iteration batch $batch (at $at_iteration $at_batch)" >&2
        exit 3
    fi
    if (( left > 0 )); then
        echo "carry_phs_campaign: $run, $left batches to iteration $iteration batch $batch"
        "${sgps[@]}" train --problems "$problems" --out "$run" --resume --threads 1 --workers "$workers" \
            --quiet --max-expansions "$limit" --max-batches "$left"
    fi
    if [[ "$(last_batch "$run")" != "$iteration $batch" ]]; then
        echo "carry_phs_campaign: $run stopped at iteration/batch '$(last_batch "$run")' before" \
            "iteration $iteration batch $batch; run this script again to go on" >&2
        exit 3
    fi
}

if [[ ! -d campaign-phs-16000 ]]; then
    leg campaign/runs/phs-s0 campaign/problems/train.txt 1 140
    "${sgps[@]}" fork campaign/runs/phs-s0 --problems campaign/problems/train.txt --out campaign-phs-16000 \
        --initial-budget 16000 --checkpoint-every 2
fi
if [[ ! -d campaign-phs-16000-memory ]]; then
    leg campaign-phs-16000 campaign-phs-16000/problems/train.txt 1 172
    "${sgps[@]}" fork campaign-phs-16000 --problems campaign-phs-16000/problems/train.txt \
        --out campaign-phs-16000-memory --solution-memory 32
fi
echo "carry_phs_campaign: campaign-phs-16000-memory to $limit expansions"
"${sgps[@]}" train --problems campaign-phs-16000-memory/problems/train.txt --out campaign-phs-16000-memory \
    --resume --threads 1 --workers "$workers" --quiet --max-expansions "$limit"
