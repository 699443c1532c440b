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
# LIMIT    the last leg's expansion limit (default 200000000, PHS*(π^SG)'s)
#
# The legs, each ended by its expansion limit while PHS*(π) solves nothing (every batch then
# spends its whole budget):
#   1. `campaign/runs/phs-s0` under LTS-CM to 76,096,000 = after iteration 1, batch 140;
#   2. forked to a budget of 16,000, on to 92,480,000 = after iteration 1, batch 172;
#   3. forked with a solution memory of 32, on to LIMIT.
# PHS*(π^SG) was forked after those same batches. Should PHS*(π) solve a problem on the way,
# its batches cost less and the leg's limit falls after a later batch (a solve saves less than
# a batch, so usually the next one): the script then stops and says where the leg ended, and
# the fork is made by hand there with the same `sgps fork` command, recorded as that many
# batches later than PHS*(π^SG)'s.
# `sgps` is taken from $SGPS if set (e.g. "python -m sgps" with a frozen copy on PYTHONPATH).
set -euo pipefail
dir=${1:?DIR holding campaign/}
workers=${2:-1}
limit=${3:-200000000}
read -r -a sgps <<<"${SGPS:-sgps}"
cd "$dir"

last_batch() {  # "ITERATION BATCH" of the run folder's last searched batch
    grep -E '^iteration [0-9]+ batch [0-9]+:' "$1/log.txt" | tail -n 1 | sed -E 's/^iteration ([0-9]+) batch ([0-9]+):.*/\1 \2/'
}

leg() {  # RUN PROBLEMS MAX_EXPANSIONS EXPECTED_LAST_BATCH: resume RUN to its limit, check where it ended
    local run=$1 problems=$2 max=$3 expected=$4
    echo "carry_phs_campaign: $run to $max expansions"
    "${sgps[@]}" train --problems "$problems" --out "$run" --resume --threads 1 --workers "$workers" \
        --quiet --max-expansions "$max"
    local ended
    ended=$(last_batch "$run")
    if [[ "$ended" != "$expected" ]]; then
        echo "carry_phs_campaign: $run ended after iteration/batch '$ended', not '$expected' where" \
            "PHS*(π^SG) was forked: PHS*(π) solved a problem on the way, so its batches cost less;" \
            "fork it by hand where it ended and record the difference" >&2
        exit 3
    fi
}

if [[ ! -d campaign-phs-16000 ]]; then
    leg campaign/runs/phs-s0 campaign/problems/train.txt 76096000 "1 140"
    "${sgps[@]}" fork campaign/runs/phs-s0 --problems campaign/problems/train.txt --out campaign-phs-16000 \
        --initial-budget 16000 --checkpoint-every 2
fi
if [[ ! -d campaign-phs-16000-memory ]]; then
    leg campaign-phs-16000 campaign-phs-16000/problems/train.txt 92480000 "1 172"
    "${sgps[@]}" fork campaign-phs-16000 --problems campaign-phs-16000/problems/train.txt \
        --out campaign-phs-16000-memory --solution-memory 32
fi
echo "carry_phs_campaign: campaign-phs-16000-memory to $limit expansions"
"${sgps[@]}" train --problems campaign-phs-16000-memory/problems/train.txt --out campaign-phs-16000-memory \
    --resume --threads 1 --workers "$workers" --quiet --max-expansions "$limit"
