#!/usr/bin/env bash
# On a machine with an NVIDIA GPU, in one go (about 5 minutes): the GPU
# tests, kiln's ResNet-50 (batch 1) on the GPU and on the host, and
# PyTorch's ResNet-50 with cuDNN (FP32 and FP16, batch 1) when importable.
# Results go to $OUT (default /tmp/kiln-gpu-results): results.txt holds the
# summary, the other files the full logs.
#
# The GPU machine needs no build: run bench/gpu/pack.sh where kiln builds,
# carry .gpu-pack, then run this from the repository root there:
#   bench/gpu/run.sh [.gpu-pack/kiln-gpu.tar.xz]
# With a kiln build on the GPU machine itself, KILN_BUILD=build uses it instead.
set -uo pipefail
cd "$(dirname "$0")/../.."
out=${OUT:-/tmp/kiln-gpu-results}
mkdir -p "$out"
summary="$out/results.txt"
: >"$summary"
say() { echo "$*" | tee -a "$summary"; }

if [[ -n ${KILN_BUILD:-} ]]; then
  kiln=("$KILN_BUILD/bin/kiln")
  tests=("$KILN_BUILD/tests/kiln_gpu_tests")
else
  pack=${1:-.gpu-pack/kiln-gpu.tar.xz}
  [[ -f $pack ]] || { echo "run.sh: no pack at $pack (make one with bench/gpu/pack.sh)" >&2; exit 2; }
  dir=$(mktemp -d /tmp/kiln-gpu.XXXX)
  tar -C "$dir" -xJf "$pack" || exit 2
  # The pack's own loader and glibc; the driver's libraries from the system.
  libpath="$dir/lib:/usr/local/nvidia/lib64:/usr/lib/x86_64-linux-gnu:/usr/lib64:/lib/x86_64-linux-gnu"
  loader=("$dir/lib/ld-linux-x86-64.so.2" --library-path "$libpath")
  kiln=("${loader[@]}" "$dir/kiln")
  tests=("${loader[@]}" "$dir/kiln_gpu_tests")
fi
export PATH="$PATH:/usr/local/cuda/bin"

say "# kiln on a GPU, $(date -u +%Y-%m-%dT%H:%MZ)"
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv,noheader 2>&1 | sed 's/^/gpu: /' | tee -a "$summary"

say "## kiln_gpu_tests"
timeout 240 "${tests[@]}" --gtest_color=no >"$out/gpu-tests.txt" 2>&1
rc=$?
grep -E '^\[  (PASSED|FAILED|SKIPPED) |^GPU 0:' "$out/gpu-tests.txt" | tee -a "$summary"
say "kiln_gpu_tests exit status: $rc"

say "## kiln run resnet50 (batch 1, f32)"
for device in cuda cpu; do
  timeout 150 "${kiln[@]}" run resnet50 --device "$device" --cache off -n 30 >"$out/resnet50-$device.txt" 2>&1
  rc=$?
  say "--device $device (exit $rc):"
  grep -iE 'latency|p50|ms|error|checksum' "$out/resnet50-$device.txt" | head -8 | sed 's/^/  /' | tee -a "$summary"
done

say "## PyTorch ResNet-50 with cuDNN (batch 1)"
if timeout 120 python3 bench/gpu/torch_resnet50.py >"$out/torch.txt" 2>&1; then
  sed 's/^/  /' "$out/torch.txt" | tee -a "$summary"
else
  say "  skipped or failed: $(tail -1 "$out/torch.txt")"
fi
say "done"
