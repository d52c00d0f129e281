#!/usr/bin/env bash
# Processes that share one compile cache — compiling, storing, loading and
# clearing it — are killed with SIGKILL at random moments, with a symlink to
# a user's file and foreign files planted in the tree; afterwards every entry
# is readable, a read-only run uses the cache without any warning, and the
# files that are not the cache's are untouched.
# Usage: kill_stress.sh KILN DIR [ROUNDS]
set -uo pipefail
kiln=$1
dir=$2
rounds=${3:-8}
RANDOM=7  # the same kill times on every run
# Files that are not the cache's: a user file behind a symlink in the tree,
# foreign files in it. Nothing may touch them.
outside=$(mktemp -d)
mkdir -p "$dir/v1/ab" "$outside/keep"
echo precious > "$outside/keep/model.kiln"
ln -s "$outside/keep" "$dir/v1/ab/link"
ln -s "$outside/keep/model.kiln" "$dir/v1/ab/0123456789abcdef0123456789abcdef.kiln"
echo mine > "$dir/v1/notes.kiln"
echo mine > "$dir/README.txt"
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
  # And a process clearing the cache under them every other round.
  if ((r % 2)); then
    "$kiln" cache clear --cache-dir "$dir" > /dev/null 2>&1 &
    pids+=($!)
  fi
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
# The files that were not the cache's are untouched.
[[ $(cat "$outside/keep/model.kiln") == precious ]] || { echo "a file outside the cache changed"; exit 1; }
[[ -L "$dir/v1/ab/link" ]] || { echo "the planted symlink went"; exit 1; }
[[ $(cat "$dir/v1/notes.kiln") == mine && $(cat "$dir/README.txt") == mine ]] || { echo "a foreign file changed"; exit 1; }
rm -rf "$outside"
echo "kill stress: $rounds rounds done"
