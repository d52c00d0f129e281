#!/usr/bin/env bash
# Processes that share one compile cache are killed with SIGKILL at random
# moments while they compile, store and load entries; afterwards every entry
# is readable, and a read-only run uses the cache without any warning.
# Usage: kill_stress.sh KILN DIR [ROUNDS]
set -uo pipefail
kiln=$1
dir=$2
rounds=${3:-8}
RANDOM=7  # the same kill times on every run
for ((r = 0; r < rounds; ++r)); do
  pids=()
  for b in 1 2 3 4 8; do  # mlp at several batch sizes: several entries written at once
    "$kiln" prewarm mlp --shape x=${b}x64 --cache-dir "$dir" > /dev/null 2>&1 &
    pids+=($!)
  done
  "$kiln" run cnn -n 0 --cache-dir "$dir" > /dev/null 2>&1 &
  pids+=($!)
  # A big entry (ResNet-50's kernels): killed while compiling, writing or after.
  "$kiln" prewarm resnet50 --cache-dir "$dir" > /dev/null 2>&1 &
  pids+=($!)
  sleep "$((RANDOM % 2)).$((RANDOM % 10))"
  for p in "${pids[@]}"; do
    if ((RANDOM % 2)); then kill -9 "$p" 2> /dev/null; fi
  done
  wait
done
# Every entry that exists is whole.
"$kiln" cache stats --cache-dir "$dir"
# A read-only run of every model finds or compiles without one warning.
for b in 1 2 3 4 8; do
  "$kiln" prewarm mlp --shape x=${b}x64 --cache-dir "$dir" 2>&1 | grep -i "warning" && exit 1
done
"$kiln" run cnn -n 0 --cache-dir "$dir" --cache ro 2>&1 | grep -i "warning" && exit 1
echo "kill stress: $rounds rounds done"
