#!/usr/bin/env bash
# Advance packed training runs on a lent machine for a few minutes each, side by side, and pack
# them again for the way back: the "laptop -> GPU box -> laptop" trip of docs/training.md
# ("Archives: a run that outlives its machine"). Not installed and not run by the tests: it is
# what a call to a lent GPU machine runs, from the repository's root, with the archives and
# wheels carried along (docs/results/hard-boulderdash-campaign-log.md, "The take-off").
#
#   tools/device/advance_runs.sh ARCHIVES MINUTES WORKERS [DEVICE]
#
# ARCHIVES  a folder holding one `sgps pack` archive per run (ARCHIVES/NAME/archive.json ...)
# MINUTES   training minutes each run gets here; passed as a raised `--time-limit`, a guard that
#           stops a run between batches with a checkpoint, so that it resumes exactly from there
# WORKERS   search processes per run (the runs share the machine: runs x (WORKERS + 1) <= cores)
# DEVICE    cuda (default) or cpu
#
# Each run is unpacked into a fresh /tmp/advance.XXXXXX/NAME, resumed with `--time-limit` at its
# own training minutes so far plus MINUTES, then packed into $OUT/NAME (or ./advanced/NAME without
# $OUT), with its console output in $OUT/NAME.log. Wheels in .whl/ (packages the machine lacks)
# are installed first into /tmp/site. A resume elsewhere must raise the guard again
# (`--time-limit`). A run still busy 3 minutes after its guard (a batch far slower than expected)
# is stopped by SIGTERM; it then resumes from its last checkpoint, which is what its archive holds.
set -u -o pipefail
archives=${1:?ARCHIVES folder}
minutes=${2:?MINUTES per run}
workers=${3:?WORKERS per run}
device=${4:-cuda}
out=${OUT:-advanced}
work=$(mktemp -d /tmp/advance.XXXXXX)  # fresh each call: a warm machine keeps the last call's /tmp
mkdir -p "$out"
export OMP_NUM_THREADS=1 MKL_NUM_THREADS=1 PYTHONUNBUFFERED=1
if compgen -G ".whl/*.whl" >/dev/null; then
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
        --target /tmp/site .whl/*.whl || exit 2
    export PYTHONPATH=/tmp/site:$PWD/src
else
    export PYTHONPATH=$PWD/src
fi
python3 - "$device" <<'EOF' || exit 3
import sys

import igraph, pydantic, torch  # noqa: F401  (what the machine must have before any run starts)
import sgps  # noqa: F401

print("torch", torch.__version__, "cuda", torch.cuda.is_available(),
      torch.cuda.get_device_name(0) if torch.cuda.is_available() else "-")
if sys.argv[1] == "cuda" and not torch.cuda.is_available():
    sys.exit("asked for cuda, and torch sees no GPU")
EOF
echo "cores $(nproc); $(date -u)"

backstop=$(python3 -c "import sys; print(round(60 * (float(sys.argv[1]) + 3)))" "$minutes")
names=()
for archive in "$archives"/*/; do
    name=$(basename "$archive")
    python3 -m sgps unpack "$archive" --out "$work/$name" || exit 4
    names+=("$name")
done

for name in "${names[@]}"; do
    run=$work/$name
    # The guard counts all of a run's training time, so it is the run's own minutes plus MINUTES.
    guard=$(python3 -c "import csv,sys; rows=list(csv.DictReader(open(sys.argv[1]))); \
print(round(float(rows[-1]['seconds']) / 60 + float(sys.argv[2]), 2))" "$run/metrics/outstanding.csv" "$minutes")
    echo "$name: resumed with --time-limit $guard on $device, $workers workers ($(date -u +%T))"
    timeout -s TERM "$backstop" python3 -m sgps train --problems "$run/problems/train.txt" --out "$run" --resume --time-limit "$guard" \
        --device "$device" --workers "$workers" --threads 1 --quiet >"$out/$name.log" 2>&1 &
done
wait
echo "runs stopped ($(date -u +%T))"

status=0
for name in "${names[@]}"; do
    run=$work/$name
    tail -n 3 "$run/log.txt"
    python3 -m sgps pack "$run" --problems "$run/problems/train.txt" --out "$out/$name" || status=5
done
ls -l "$out"/*
exit $status
