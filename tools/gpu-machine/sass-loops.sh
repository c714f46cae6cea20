#!/usr/bin/env bash
# The machine code of one CUDA file's kernels on the build machine, without a GPU: compiles FILE for
# sm_90a with the flags of the bundle's build directory (make-prebuilt.sh's), disassembles it with
# cuobjdump and prints, for each kernel whose mangled name contains PATTERN, its instruction count,
# its opcode mix and that of its largest loop (the back edge whose body holds the most FFMA, FADD and
# HGMMA, then the most instructions: the per-item or per-edge loop). For checking, before a device
# call, what a change does to a kernel's instructions (e.g. scalar shared loads merged into 128-bit
# ones, address arithmetic folded into immediates); counts are static, per loop body, not executed
# instructions (ncu gives those).
#   bash tools/gpu-machine/sass-loops.sh cuda/source_backward.cu 'source_backward_wILi3ELi2E'
# cuobjdump is not part of the CUDA compiler packages on the build machine: the first run fetches
# NVIDIA's wheels `nvidia-cuda-cuobjdump` and `nvidia-cuda-nvdisasm` (which it runs) from PyPI into
# ~/.cache/sezm/cuobjdump (SEZM_CUOBJDUMP: a cuobjdump to use instead, nvdisasm beside it).
# SEZM_BUNDLE_BUILD_DIR: the configured build directory.
set -euo pipefail
[ $# -eq 2 ] || { echo "usage: $0 FILE.cu PATTERN" >&2; exit 2; }
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
src="$(cd "$(dirname "$1")" && pwd)/$(basename "$1")"
build="${SEZM_BUNDLE_BUILD_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/sezm/bundle-build}"
rsp="$build/cuda/CMakeFiles/sezm_cuda.dir/includes_CUDA.rsp"
[ -f "$rsp" ] || { echo "no configured build in $build: run tools/gpu-machine/make-prebuilt.sh first" >&2; exit 1; }
dump="${SEZM_CUOBJDUMP:-}"
if [ -z "$dump" ]; then
  dump="$(command -v cuobjdump || true)"
fi
if [ -z "$dump" ]; then
  cache="${XDG_CACHE_HOME:-$HOME/.cache}/sezm/cuobjdump"
  dump="$(find "$cache" -name cuobjdump -type f 2>/dev/null | head -n 1 || true)"
  if [ -z "$dump" ]; then
    mkdir -p "$cache"
    python3 -m pip download --no-deps -q -d "$cache" nvidia-cuda-cuobjdump nvidia-cuda-nvdisasm
    for w in "$cache"/*.whl; do python3 -m zipfile -e "$w" "$cache/x"; done
    dump="$(find "$cache/x" -name cuobjdump -type f | head -n 1)"
  fi
  chmod +x "$(dirname "$dump")"/*
fi
export PATH="$(dirname "$dump"):$PATH"  # cuobjdump runs nvdisasm (the same wheel family)
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
(cd "$build/cuda" && nvcc -O3 -DNDEBUG -DSEZM_HAVE_CUDA=1 -DSEZM_HAVE_SM90A=1 --options-file "$rsp" -arch=sm_90a \
  -std=c++17 -diag-suppress=20012 -cubin "$src" -o "$tmp/k.cubin")
"$dump" -sass "$tmp/k.cubin" > "$tmp/k.sass"
python3 - "$tmp/k.sass" "$2" <<'EOF'
import collections, re, sys
text, pattern = open(sys.argv[1]).read(), sys.argv[2]
parts = re.split(r"\n\s*Function : (\S+)", text)
line = re.compile(r"\s*/\*([0-9a-f]{4,})\*/\s+(?:@!?U?P\w+\s+)?([A-Z0-9_]+)")
found = False
for name, body in zip(parts[1::2], parts[2::2]):
    if pattern not in name:
        continue
    found = True
    ins = [(int(m.group(1), 16), m.group(2), l) for l in body.split("\n") for m in [line.match(l)] if m]
    mix = lambda ops: " ".join(f"{k} {v}" for k, v in collections.Counter(ops).most_common(14))
    print(f"{name}\n  all: {len(ins)} instructions: {mix(o for _, o, _ in ins)}")
    best = None
    for a, op, l in ins:
        t = re.search(r"BRA\s+(?:`\([^)]*\)\s*)?0x([0-9a-f]+)", l)
        if op == "BRA" and t and int(t.group(1), 16) < a:
            loop = [o for x, o, _ in ins if int(t.group(1), 16) <= x <= a]
            key = (sum(loop.count(o) for o in ("FFMA", "FADD", "HGMMA")), len(loop))
            if best is None or key > best[3]:
                best = (int(t.group(1), 16), loop, a, key)
    if best:
        print(f"  loop {best[0]:#x}..{best[2]:#x}: {len(best[1])} instructions: {mix(best[1])}")
if not found:
    sys.exit(f"no kernel name contains {pattern!r}")
EOF
