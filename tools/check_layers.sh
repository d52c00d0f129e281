#!/usr/bin/env bash
# Checks kiln's layering: every #include of a kiln header points down (or
# sideways within its own folder), and the public API's headers pull in no
# MLIR, no LLVM IR/ORC, and nothing of the compile cache, JIT or lowering
# (kernels/KernelRegistry.h is public: users write kernels against it).
#   runtime -> ops -> {kernels, lowering, codegen} -> cache -> jit -> api -> {serve, python} -> tools
# (serve/, the server, sits on the public API alone: <kiln/...> and serve/;
# python/src, the Python binding, on the C API alone: <kiln/kiln_c.h>).
# and inside lowering/ its rooms (ir -> guards, cpu, gpu -> pipelines -> graph -> models).
# and the host runtime does not include device runtimes (runtime/cuda).
# Usage: check_layers.sh [ROOT] (default: this checkout). Exit status 1 and
# one line per violation when something points up.
set -euo pipefail
cd "${1:-$(dirname "$0")/..}"
declare -A level=([runtime]=0 [ops]=1 [kernels]=2 [lowering]=2 [codegen]=2 [cache]=3 [jit]=4 [api]=5 [serve]=6 [tools]=7)
bad=0
for dir in "${!level[@]}"; do
  while IFS= read -r line; do
    file=${line%%:*}
    inc=$(sed -E 's/.*#include "([a-z]+)\/.*/\1/' <<<"$line")
    [[ -n "${level[$inc]+x}" ]] || continue  # generated or third-party
    if [[ "$inc" != "$dir" && ${level[$inc]} -ge ${level[$dir]} ]]; then
      echo "layering: $file includes $inc/ (${dir} is level ${level[$dir]}, ${inc} is level ${level[$inc]})"
      bad=1
    fi
  done < <(grep -HE '^#include "[a-z]+/' -r "$dir" --include='*.h' --include='*.cpp' || true)
done
# Inside lowering/, rooms in their own order (lowering/CMakeLists.txt):
#   ir -> guards, cpu, gpu -> pipelines -> graph -> models
# a file in lowering/<room>/ includes only its own room and rooms below it
# (levels strictly increase, so no circle), and lowering/ has no loose
# sources outside a room.
declare -A room=([ir]=0 [guards]=1 [cpu]=1 [gpu]=1 [pipelines]=2 [graph]=3 [models]=4)
if [ -d lowering ]; then
  while IFS= read -r line; do
    file=${line%%:*}
    from=$(cut -d/ -f2 <<<"$file")
    to=$(sed -E 's/.*#include "lowering\/([a-z]+)\/.*/\1/' <<<"$line")
    if [[ "$file" != lowering/*/* ]]; then
      continue  # a loose file: reported below
    elif [[ -z "${room[$from]+x}" ]]; then
      echo "layering: $file is in no room of lowering/ (rooms: ${!room[*]})"
      bad=1
    elif [[ -z "${room[$to]+x}" ]]; then
      echo "layering: $file includes lowering/$to/, which is no room of lowering/"
      bad=1
    elif [[ "$to" != "$from" && ${room[$to]} -ge ${room[$from]} ]]; then
      echo "layering: $file includes lowering/$to/ (room $from is level ${room[$from]}, $to is level ${room[$to]})"
      bad=1
    fi
  done < <(grep -HE '^#include "lowering/' -r lowering --include='*.h' --include='*.cpp' || true)
  while IFS= read -r file; do
    echo "layering: $file is in no room of lowering/ (rooms: ${!room[*]})"
    bad=1
  done < <(find lowering -maxdepth 1 -type f \( -name '*.h' -o -name '*.cpp' \) || true)
fi
# serve/ includes kiln only through the installed public API (<kiln/kiln.hpp>).
if [ -d serve ]; then
  while IFS= read -r line; do
    echo "layering: serve/ includes a kiln header other than the public API: $line"
    bad=1
  done < <(grep -HE '^#include "[a-z]+/' -r serve --include='*.h' --include='*.cpp' | grep -vE '#include "serve/' || true)
fi
# The Python binding (python/src) sits on the C API alone: <kiln/kiln_c.h>,
# nanobind and the standard library; no kiln header of another room.
if [ -d python/src ]; then
  while IFS= read -r line; do
    echo "layering: python/ includes something other than the C API and nanobind: $line"
    bad=1
  done < <(grep -HE '^#include' -r python/src | grep -vE ':#include (<kiln/kiln_c\.h>|<nanobind/[a-z_/]+\.h>|<[a-z_]+>)' || true)
fi
# Device runtimes (runtime/<device>/) sit beside the host runtime: nothing
# of the host runtime (runtime/*.h, runtime/*.cpp) includes them.
while IFS= read -r line; do
  echo "host runtime includes a device runtime: $line"
  bad=1
done < <(grep -HE '^#include "runtime/[a-z]+/' runtime/*.h runtime/*.cpp || true)
# The public API's headers: tensors, futures, options, errors only (api/impl/
# holds what only the API's own .cpp files include, e.g. Module::Impl).
while IFS= read -r line; do
  echo "public header: $line"
  bad=1
done < <(grep -HE '^#include "(mlir|cache|jit|lowering|codegen)/|^#include "llvm/(IR|ExecutionEngine|Target|MC|CodeGen)/' \
           api/*.h || true)
# The installed public headers (api/include/kiln: the C API and the C++ API
# over it): the C and C++ standard library and each other, nothing else.
while IFS= read -r line; do
  echo "installed public header: $line"
  bad=1
done < <(grep -HE '^#include' api/include/kiln/* | grep -vE ':#include (<[a-z_]+(\.h)?>|"kiln/[a-z_]+\.h(pp)?")' || true)
exit $bad
