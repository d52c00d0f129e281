#!/usr/bin/env bash
# On a machine with an NVIDIA GPU, in one go (about 5 minutes): the GPU
# tests, kiln's ResNet-50 (batch 1) on the GPU and on the host, the zoo
# models in .gpu-zoo (bench/gpu/zoo.sh) likewise, outputs compared, and
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
  # The pack's own loader and glibc; the driver's libraries from the system;
  # cuDNN and cuBLAS from the toolkit or from PyTorch's wheels (nvidia.*).
  wheels=$(python3 -c 'import glob, importlib.util as u, os
s = u.find_spec("nvidia")
print(":".join(sorted(glob.glob(os.path.join(list(s.submodule_search_locations)[0], "*", "lib")))) if s else "")' 2>/dev/null)
  libpath="$dir/lib:/usr/local/nvidia/lib64:/usr/local/cuda/lib64${wheels:+:$wheels}:/usr/lib/x86_64-linux-gnu:/usr/lib64:/lib/x86_64-linux-gnu"
  loader=("$dir/lib/ld-linux-x86-64.so.2" --library-path "$libpath")
  kiln=("${loader[@]}" "$dir/kiln")
  tests=("${loader[@]}" "$dir/kiln_gpu_tests")
fi
export PATH="$PATH:/usr/local/cuda/bin"

tmp=$(mktemp -d /tmp/kiln-gpu-out.XXXX)
# compare NAME GPU_DIR HOST_DIR: the outputs' largest differences.
compare() {
  "${PYTHON:-python3}" - "$@" <<'PY' 2>&1 | tee -a "$summary"
import glob, os, sys
import numpy as np
name, gpu, host = sys.argv[1:4]
files = sorted(glob.glob(os.path.join(host, "out*.npy")))
if not files or not os.path.isdir(gpu):
    print(f"  {name}: compare: no outputs (gpu {os.path.isdir(gpu)}, host {len(files)})")
for f in files:
    g = os.path.join(gpu, os.path.basename(f))
    if not os.path.exists(g):
        print(f"  {name}: {os.path.basename(f)} missing from the GPU run"); continue
    a, b = np.load(g).astype(np.float64), np.load(f).astype(np.float64)
    if a.shape != b.shape:
        print(f"  {name}: shapes differ: gpu {a.shape} host {b.shape}"); continue
    d = np.abs(a - b)
    rel = d.max() / max(np.abs(b).max(), 1e-30)
    ok = np.allclose(a, b, rtol=1e-3, atol=1e-3 * max(np.abs(b).max(), 1e-6)) and np.isfinite(a).all()
    print(f"  {name} {os.path.basename(f)}: {'MATCH' if ok else 'DIFFER'} max|gpu-host| {d.max():.3g} "
          f"(relative to max|host| {rel:.3g}), gpu finite {np.isfinite(a).all()}")
PY
}

say "# kiln on a GPU, $(date -u +%Y-%m-%dT%H:%MZ)"
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv,noheader 2>&1 | sed 's/^/gpu: /' | tee -a "$summary"
say "toolkit: $(ls /usr/local/cuda/bin/ptxas /usr/local/cuda/nvvm/libdevice/libdevice.10.bc 2>&1 | tr '\n' ' ')"
say "driver: $(ls /usr/local/nvidia/lib64/libcuda.so.1 2>&1; ldconfig -p | grep -m1 'libcuda.so.1')"

say "## kiln_gpu_tests"
timeout 200 "${tests[@]}" --gtest_color=no >"$out/gpu-tests.txt" 2>&1
rc=$?
grep -E '^\[  (PASSED|FAILED|SKIPPED) |^GPU 0:' "$out/gpu-tests.txt" | tee -a "$summary"
say "kiln_gpu_tests exit status: $rc"

say "## kiln run resnet50 (batch 1, f32): the GPU (cuDNN and cuBLAS; generated kernels) against the host"
# variant NAME: the environment and options of each way to run
variant() {
  case $1 in
    cuda) echo "--device cuda" ;;
    cuda-heuristic) echo "KILN_GPU_CONV_ALGO=heuristic --device cuda" ;;
    cuda-tf32) echo "KILN_GPU_TF32=1 --device cuda" ;;
    cuda-graphs) echo "KILN_GPU_GRAPHS=1 --device cuda" ;;
    cuda-tf32-graphs) echo "KILN_GPU_TF32=1 KILN_GPU_GRAPHS=1 --device cuda" ;;
    cuda-generated) echo "--device cuda --op-mode tosa.conv2d=jit,tosa.matmul=jit" ;;
    cpu) echo "--device cpu" ;;
  esac
}
runVariant() {  # NAME LOG [EXTRA_ENV...]: kiln run resnet50 that way
  local name=$1 log=$2
  shift 2
  local envs=() opts=()
  for w in $(variant "$name"); do
    if [[ $w == *=* && $w != --* && $w != *,* ]]; then envs+=("$w"); else opts+=("$w"); fi
  done
  env "${envs[@]}" "$@" timeout 150 "${kiln[@]}" run resnet50 "${opts[@]}" --cache off -n 30 \
    -o "$tmp/resnet50-$name" >"$log" 2>&1
}
for name in cuda cuda-heuristic cuda-tf32 cuda-graphs cuda-tf32-graphs cuda-generated cpu; do
  runVariant "$name" "$tmp/resnet50-$name.log"
  rc=$?
  { echo "### $name (exit $rc)"; cat "$tmp/resnet50-$name.log"; } >>"$out/resnet50.txt"
  say "$name: $(variant "$name") (exit $rc):"
  grep -iE '^output|first call|steady|error' "$tmp/resnet50-$name.log" | head -6 | sed 's/^/  /' | tee -a "$summary"
done
compare resnet50 "$tmp/resnet50-cuda" "$tmp/resnet50-cpu"
for name in cuda-heuristic cuda-tf32 cuda-graphs cuda-tf32-graphs cuda-generated; do
  compare "resnet50-$name" "$tmp/resnet50-$name" "$tmp/resnet50-cpu"
done

# The zoo's GPU set: each MODEL.mlir[bc][.xz] (+ MODEL.npy, its input) in
# $KILN_GPU_ZOO (default .gpu-zoo, which bench/gpu/zoo.sh fills) runs
# on the GPU and on the host; outputs compared.
zoo=${KILN_GPU_ZOO:-.gpu-zoo}
if compgen -G "$zoo/*.mlir*" >/dev/null; then
  say "## the zoo on the GPU against the host"
  for m in "$zoo"/*.mlir*; do
    name=$(basename "${m%%.mlir*}")
    if [[ $m == *.xz ]]; then
      xz -dc "$m" >"$tmp/$(basename "${m%.xz}")" || { say "$name: cannot unpack $m"; continue; }
      m="$tmp/$(basename "${m%.xz}")"
    fi
    input=()
    [[ -f $zoo/$name.npy ]] && input=(-i "0=$zoo/$name.npy")
    for device in cuda cpu; do
      timeout 100 "${kiln[@]}" run "$m" "${input[@]}" --device "$device" --cache off -n 20 -o "$tmp/$name-$device" \
        >>"$out/zoo-$device.txt" 2>&1
      rc=$?
      say "$name --device $device (exit $rc): $(grep -E '^steady|error' "$out/zoo-$device.txt" | tail -1)"
    done
    compare "$name" "$tmp/$name-cuda" "$tmp/$name-cpu"
  done
fi

say "## where ResNet-50's GPU time goes (KILN_GPU_PROFILE=1: each launch timed with CUDA events)"
for name in cuda cuda-generated; do
  runVariant "$name" "$tmp/profile-$name.log" KILN_GPU_PROFILE=1
  rc=$?
  { echo "### $name (exit $rc)"; cat "$tmp/profile-$name.log"; } >>"$out/profile.txt"
  say "$name (exit $rc): $(grep 'kiln GPU profile' "$tmp/profile-$name.log")"
done

say "## PyTorch ResNet-50 with cuDNN (batch 1)"
if timeout 90 python3 bench/gpu/torch_resnet50.py >"$out/torch.txt" 2>&1; then
  sed 's/^/  /' "$out/torch.txt" | tee -a "$summary"
else
  say "  skipped or failed: $(tail -1 "$out/torch.txt")"
fi
say "done"
