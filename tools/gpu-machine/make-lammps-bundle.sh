#!/usr/bin/env bash
# Builds lmp_sezm (Debian 12's LAMMPS + pair_style sezm, CUDA engine for sm_90a only, no
# -march=native) and packs it with every shared library it needs and a relocatable Open MPI
# runtime (mpirun, MCA components, PMIx, help texts) into ONE archive for a GPU machine that has
# no LAMMPS and no MPI:
#
#   bash tools/gpu-machine/make-lammps-bundle.sh [--no-verify] [--no-build]
#
# Output: .devdeps/lammps-gpu.tar.xz (git-ignored; carry .devdeps to the GPU machine), unpacking
# to sezm-lammps/ (bin/ lib/ share/ etc/ env.sh MANIFEST.txt). On the GPU machine:
#   tar xJf .devdeps/lammps-gpu.tar.xz -C /tmp && source /tmp/sezm-lammps/env.sh
#   mpirun -np 2 lmp_sezm -in ...            (gpu-lammps.sh does all of this)
#
# Run make-devdeps.sh (if at all) BEFORE this script: it deletes .devdeps/.
#
# What stays with the host: glibc (libc, libm, libpthread, libdl, librt, libresolv, ld-linux),
# libstdc++, libgcc_s and the NVIDIA driver (libcuda). Everything else is copied from this
# machine's Debian packages, except the libraries that liblammps.so.0 (and libzip) only need for
# LAMMPS features an MD run with pair_style sezm never touches: Python (PYTHON package), KIM,
# curl (KIM downloads), OpenSSL's libcrypto (zip encryption), FFTW (KSPACE), voro++ (compute
# voronoi/atom), libjpeg/libpng (dump image), zstd (compressed dumps). Each is replaced by a stub
# with the same soname, symbol versions and the symbols the bundle imports from it; a stub
# function prints the symbol's name and aborts if it is ever called (SEZM_BUNDLE_STUBS
# overrides the list). This keeps the archive small: the device tool carries at most 64 MiB of
# working tree, ~55 MB of which is the repository itself (tools/gpu-machine/README.md).
#
# Environment: SEZM_BUNDLE_BUILD_DIR (default ~/.cache/sezm/bundle-build), SEZM_BUNDLE_OUT
# (default .devdeps/lammps-gpu.tar.xz), SEZM_BUNDLE_JOBS (default 2), SEZM_BUNDLE_MAX_BYTES
# (default 12 MiB; the bundle of 2026-12-02 is 8.6 MB), SEZM_BUNDLE_STUBS (sonames to stub).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
build="${SEZM_BUNDLE_BUILD_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/sezm/bundle-build}"
out="${SEZM_BUNDLE_OUT:-$here/.devdeps/lammps-gpu.tar.xz}"
jobs="${SEZM_BUNDLE_JOBS:-2}"
max_bytes="${SEZM_BUNDLE_MAX_BYTES:-12582912}"
stubs="${SEZM_BUNDLE_STUBS:-libpython3.11.so.1.0 libcurl.so.4 libkim-api.so.2 libcrypto.so.3 libfftw3.so.3 libfftw3_omp.so.3 libvoro++.so.1 libjpeg.so.62 libpng16.so.16 libzstd.so.1}"
verify=1 do_build=1 verify_only=0
for a in "$@"; do
  case "$a" in
    --no-verify) verify=0 ;;
    --no-build) do_build=0 ;;
    --verify-only) verify_only=1 ;;
    -h|--help) sed -n '2,32p' "$0"; exit 0 ;;
    *) echo "make-lammps-bundle: unknown argument '$a' (known: --no-verify, --no-build, --verify-only)" >&2; exit 2 ;;
  esac
done

multiarch=/usr/lib/x86_64-linux-gnu
say() { printf '== %s\n' "$*" >&2; }
die() { printf 'make-lammps-bundle: ERROR: %s\n' "$*" >&2; exit 1; }

# Unpacks the archive into a temporary directory and runs the diamond example from there on 1
# rank (singleton) and 2 ranks (the bundle's mpirun) in a minimal environment, recording every
# file the processes open (strace); fails if any shared object, MCA component or Open MPI data
# file comes from outside the unpacked bundle (glibc, libstdc++, libgcc_s excepted). Then
# repeats the 2-rank run in a private mount namespace in which the system's copies of every
# bundled library, Open MPI's directories and mpirun/orted are hidden (/dev/null or an empty
# directory bound over them); skipped if unshare is not permitted.
verify_bundle() {
  local archive="$1" v rc=0
  v="$(mktemp -d "${TMPDIR:-/tmp}/sezm-bundle-verify.XXXXXX")"
  tar -C "$v" -xJf "$archive" || { echo "cannot unpack $archive" >&2; return 1; }
  local b="$v/sezm-lammps"
  mkdir -p "$v/run"
  local lmpargs="-in $here/examples/diamond/in.diamond -var model $here/potentials/C.pt -var device cpu -var nvt 2 -var nve 2 -var every 1 -log none"
  local clean=(env -i HOME="$HOME" PATH=/usr/bin:/bin TMPDIR=/tmp OMP_NUM_THREADS=1)
  local tracer=() have_strace=0
  if command -v strace >/dev/null; then have_strace=1; fi
  run_case() {  # name, command (in the clean environment, after sourcing env.sh)
    local name="$1" cmd="$2" t=()
    [ "$have_strace" = 1 ] && t=(strace -ff -qq -e trace=open,openat,execve -o "$v/$name.st")
    ( cd "$v/run" && "${clean[@]}" "${t[@]}" bash -c "source '$b/env.sh' && $cmd" ) > "$v/$name.out" 2>&1
  }
  check_out() {  # name, expected processor grid
    local name="$1" grid="$2"
    if grep -q "Loop time" "$v/$name.out" && grep -q "$grid MPI processor grid" "$v/$name.out" \
       && grep -q "Total wall time" "$v/$name.out"; then
      echo "  PASS $name: ran to the end ($grid processor grid; last thermo: $(grep -B1 '^Loop time' "$v/$name.out" | tail -n 2 | head -n 1 | tr -s ' '))" >&2
    else
      echo "  FAIL $name: output:" >&2; tail -40 "$v/$name.out" >&2; return 1
    fi
  }
  check_opens() {  # name: every .so / Open MPI / PMIx file that a bundle program opened must be in the bundle
    local name="$1"
    [ "$have_strace" = 1 ] || { echo "  (no strace: cannot list opened files for $name)" >&2; return 0; }
    # one strace file per process; only what a process opens after exec'ing lmp_sezm/orterun/orted
    local opened bad execs
    opened="$(for f in "$v/$name".st.*; do
                awk -v b="$b/" '
                  /execve\(/ && !/= -1/ { split($0, q, "\""); prog = q[2] }
                  /open(at)?\(/ && !/= -1/ && index(prog, b) == 1 { split($0, q, "\""); print q[2] }' "$f"
              done | grep -E '\.so($|\.)|openmpi|pmix|help-|mca-params|hostfile' | sort -u)"
    execs="$(cat "$v/$name".st.* | grep -E 'execve\(' | grep -v '= -1' | cut -d'"' -f2 | sort -u)"
    bad="$(grep -vE "^$b/" <<<"$opened" | grep -vE '/(libc|libm|libmvec|libpthread|libdl|librt|libresolv|libstdc\+\+|libgcc_s)\.so|^/etc/ld\.so\.cache$|^/proc/|^/sys/|^/dev/' || true)"
    echo "  $name: processes $(tr '\n' ' ' <<<"$execs")" >&2
    echo "    $(grep -c "^$b/" <<<"$opened") bundle files opened, e.g." >&2
    grep -E "liblammps|libmpi\.so|libopen-pal|libpmix|mca_btl_vader|mca_pml_ob1|mca_pmix_ext3x|libcudart|help-|params" <<<"$opened" | sed "s|^|      |" | head -14 >&2
    echo "    from the host: $(grep -vE "^$b/" <<<"$opened" | tr '\n' ' ')" >&2
    if [ -n "$bad" ]; then echo "  FAIL $name: opened outside the bundle:" >&2; sed 's/^/      /' <<<"$bad" >&2; return 1; fi
    if grep -E 'lmp|orte|mpirun|mpiexec' <<<"$execs" | grep -vq "^$b/"; then
      echo "  FAIL $name: executed an Open MPI/LAMMPS program outside the bundle" >&2; return 1
    fi
    echo "  PASS $name: every library, MCA component and Open MPI/PMIx file came from the bundle" >&2
  }
  say "verify: unpacked to $b; 1 rank (singleton)"
  run_case rank1 "lmp_sezm $lmpargs" || true
  check_out rank1 "1 by 1 by 1" || rc=1
  check_opens rank1 || rc=1
  say "verify: 2 ranks (bundle mpirun)"
  run_case rank2 "mpirun -np 2 lmp_sezm $lmpargs" || true
  check_out rank2 "1 by 1 by 2" || rc=1
  check_opens rank2 || rc=1
  say "verify: Open MPI help texts are found in the bundle"
  run_case help "mpirun -np 2 --mca btl no_such_btl lmp_sezm $lmpargs" || true
  if grep -qi "couldn't open the help file\|could not open the help file" "$v/help.out"; then
    echo "  FAIL help: Open MPI could not find its help files:" >&2; head -20 "$v/help.out" >&2; rc=1
  elif grep -q "no_such_btl" "$v/help.out"; then
    echo "  PASS help: an error for a bogus MCA option printed its help text ($(grep -m1 -iE 'component|requested' "$v/help.out" | sed 's/^ *//'))" >&2
  else
    echo "  FAIL help: unexpected output:" >&2; head -20 "$v/help.out" >&2; rc=1
  fi
  check_opens help || rc=1
  grep -h 'help-' "$v"/help.st.* 2>/dev/null | grep -v '= -1' | cut -d'"' -f2 | sort -u | sed 's/^/    help file: /' >&2 || true
  say "verify: a stubbed library aborts loudly (dump image needs libjpeg)"
  printf '%s\n' "units metal" "lattice fcc 3.615" "region box block 0 1 0 1 0 1" "create_box 1 box" \
    "create_atoms 1 box" "mass 1 1" "pair_style zero 5.0" "pair_coeff * *" \
    "dump d all image 1 img.*.jpg type type" "run 0" > "$v/run/in.stub"
  run_case stub "lmp_sezm -in in.stub -log none" 2>/dev/null || true
  if grep -q "sezm bundle: jpeg_.* was called, but libjpeg.so.62 is only a stub" "$v/stub.out"; then
    echo "  PASS stub: $(grep -m1 'sezm bundle:' "$v/stub.out")" >&2
  else
    echo "  FAIL stub: no stub message:" >&2; tail -20 "$v/stub.out" >&2; rc=1
  fi
  say "verify: 2 ranks with the system's copies hidden (private mount namespace)"
  if unshare -m true 2>/dev/null; then
    local hide="$v/hide.sh" empty="$v/empty"
    mkdir -p "$empty"
    {
      echo "set -e"
      for f in "$b"/lib/*.so*; do
        for d in /usr/lib/x86_64-linux-gnu /lib/x86_64-linux-gnu "$multiarch/openmpi/lib" "$multiarch/pmix2/lib"; do
          [ -e "$d/$(basename "$f")" ] && echo "mount --bind /dev/null '$(readlink -f "$d/$(basename "$f")")'"
        done
      done
      for d in "$multiarch/openmpi" "$multiarch/pmix2" /usr/share/openmpi /etc/openmpi "$multiarch/hwloc"; do
        [ -d "$d" ] && echo "mount --bind '$empty' '$d'"
      done
      for f in /usr/bin/orterun /usr/bin/orted /usr/bin/lmp; do
        [ -e "$f" ] && echo "mount --bind /dev/null '$(readlink -f "$f")'"
      done
      # prove the hiding worked before running
      echo "[ ! -s '$(readlink -f /usr/lib/x86_64-linux-gnu/liblammps.so.0)' ] && [ ! -s '$(readlink -f /usr/lib/x86_64-linux-gnu/libmpi.so.40)' ] && [ -z \"\$(ls '$multiarch/openmpi')\" ] || { echo 'hiding the system copies did not work'; exit 1; }"
    } > "$hide"
    ( cd "$v/run" && unshare -m bash -c "source '$hide' && ${clean[*]} bash -c \"source '$b/env.sh' && mpirun -np 2 lmp_sezm $lmpargs\"" ) > "$v/hidden.out" 2>&1 || true
    if check_out hidden "1 by 1 by 2"; then
      echo "  ($(grep -c mount "$hide") system files/directories were hidden, e.g. $(readlink -f /usr/lib/x86_64-linux-gnu/liblammps.so.0), $multiarch/openmpi)" >&2
    else
      rc=1
    fi
  else
    echo "  SKIP: unshare -m is not permitted here" >&2
  fi
  if [ "$rc" = 0 ]; then rm -rf "$v"; say "verify: PASS"; else say "verify: FAIL (kept $v)"; fi
  return $rc
}
if [ "$verify_only" = 1 ]; then
  verify_bundle "$out" || die "verification of $out failed"
  exit 0
fi
for t in cmake readelf ldd gcc python3 xz tar dpkg-query strip; do
  command -v "$t" >/dev/null || die "'$t' is needed on the build machine"
done

# ---------------------------------------------------------------- 1. build lmp_sezm
if [ "$do_build" = 1 ]; then
  say "configure + build lmp_sezm in $build (CUDA sm_90a only, SEZM_NATIVE=OFF, -j$jobs)"
  mkdir -p "$build"
  cmake -S "$here" -B "$build" -DCMAKE_BUILD_TYPE=Release -DSEZM_NATIVE=OFF \
        -DSEZM_CUDA_ARCHITECTURES=90a-real -DSEZM_BUILD_TESTS=OFF > "$build/configure.log" 2>&1 \
    || { tail -40 "$build/configure.log" >&2; die "configure failed (log: $build/configure.log)"; }
  grep -E "native CPU tuning|CUDA engine|LAMMPS pair style" "$build/configure.log" >&2 || true
  grep -q "CUDA engine *: ON" "$build/configure.log" || die "the CUDA engine is not configured (no nvcc?)"
  grep -q "LAMMPS pair style : ON" "$build/configure.log" || die "the LAMMPS pair style is not configured (see $build/configure.log)"
  cmake --build "$build" -j "$jobs" --target lmp_sezm > "$build/build.log" 2>&1 \
    || { grep -E "error|Error" "$build/build.log" | head -40 >&2; die "build failed (log: $build/build.log)"; }
fi
lmp="$build/lammps/lmp_sezm"
[ -x "$lmp" ] || die "$lmp does not exist (build first, without --no-build)"
grep -q '^SEZM_NATIVE:BOOL=OFF' "$build/CMakeCache.txt" || die "$build was configured with SEZM_NATIVE=ON"

# ---------------------------------------------------------------- 2. staging layout
work="$(mktemp -d "${TMPDIR:-/tmp}/sezm-bundle.XXXXXX")"
trap 'rm -rf "$work"' EXIT
B="$work/sezm-lammps"
mkdir -p "$B/bin" "$B/lib/openmpi" "$B/lib/pmix" "$B/lib/hwloc" "$B/share/openmpi" "$B/share/pmix" "$B/etc"
say "staging in $B"

cp "$lmp" "$B/bin/lmp_sezm"
strip --strip-unneeded "$B/bin/lmp_sezm"
orterun="$(readlink -f /usr/bin/orterun)"; [ -x "$orterun" ] || die "no /usr/bin/orterun (apt install openmpi-bin)"
cp "$orterun" "$B/bin/orterun"
cp /usr/bin/orted "$B/bin/orted"
ln -s orterun "$B/bin/mpirun"
ln -s orterun "$B/bin/mpiexec"

# Open MPI MCA components: everything a single-node run over shared memory can use; no
# OpenSHMEM, MPI-IO, UCX/OFI/verbs/PSM networks, monitoring or netlink (their libraries are not
# bundled, and Open MPI would warn about components it cannot open).
ompi_pkglib="$multiarch/openmpi/lib/openmpi3"
[ -d "$ompi_pkglib" ] || die "$ompi_pkglib missing (apt install libopenmpi3)"
# Nor the larger optional ones (AVX reduction ops, treematch topology, han/adapt collectives,
# RDMA one-sided, message logging, the cm pml): about 250 kB of the archive.
skip_re='^mca_(atomic|memheap|scoll|spml|sshmem|io|fcoll|fbtl|fs|sharedfp|mtl)_|ucx|ofi|openib|psm|monitoring|reachable_netlink|pmix_flux|osc_pt2pt|osc_rdma|op_avx|topo_treematch|coll_han|coll_adapt|vprotocol|pml_cm|^libompi_dbg'
for f in "$ompi_pkglib"/*.so; do
  n="$(basename "$f")"
  [[ "$n" =~ $skip_re ]] && continue
  cp "$f" "$B/lib/openmpi/"
done
pmix_dir="$multiarch/pmix2"
[ -d "$pmix_dir/lib/pmix" ] || die "$pmix_dir/lib/pmix missing (apt install libpmix2)"
cp "$pmix_dir"/lib/pmix/*.so "$B/lib/pmix/"
cp /usr/share/openmpi/help-*.txt "$B/share/openmpi/"
cp -r /usr/share/openmpi/amca-param-sets "$B/share/openmpi/" 2>/dev/null || true
cp "$pmix_dir"/share/pmix/help-*.txt "$B/share/pmix/"
# Debian's defaults (no ofi mtl, no uct/openib/ofi btl, no ucx pml); env.sh adds ours.
cp /etc/openmpi/openmpi-mca-params.conf "$B/etc/"
cp /etc/openmpi/openmpi-default-hostfile "$B/etc/" 2>/dev/null || : > "$B/etc/openmpi-default-hostfile"
# Debian's pmix-mca-params.conf names /usr/lib/.../pmix2/lib/pmix; env.sh sets the path instead.
printf '# sezm bundle: the component path is set by env.sh (PMIX_MCA_mca_base_component_path)\n' \
  > "$B/etc/pmix-mca-params.conf"
printf 'Deliberately empty: hwloc must not load the host'"'"'s plugins (HWLOC_PLUGINS_PATH points here).\n' \
  > "$B/lib/hwloc/README"

# ---------------------------------------------------------------- 3. library closure
# Host-provided libraries (glibc, the C++ runtime, the NVIDIA driver): never copied.
is_host_lib() {
  case "$1" in
    linux-vdso.so.*|ld-linux*.so.*|libc.so.*|libm.so.*|libmvec.so.*|libpthread.so.*|libdl.so.*|librt.so.*|\
    libresolv.so.*|libutil.so.*|libanl.so.*|libstdc++.so.*|libgcc_s.so.*|libcuda.so.*|libnvidia-*) return 0 ;;
  esac
  return 1
}
is_stub() { case " $stubs " in *" $1 "*) return 0 ;; esac; return 1; }
needed() { readelf -d "$1" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p'; }

# soname -> path, as this machine resolves it (ldd of every root, plus known private dirs)
declare -A where=()
roots=("$B/bin/lmp_sezm" "$B/bin/orterun" "$B/bin/orted" "$B"/lib/openmpi/*.so "$B"/lib/pmix/*.so)
for r in "${roots[@]}"; do
  while read -r so _ path _; do
    [ -n "${path:-}" ] && [ -e "$path" ] && where[$so]="$path"
  done < <(LD_LIBRARY_PATH="$multiarch/openmpi/lib:$pmix_dir/lib" ldd "$r" 2>/dev/null | grep '=> /')
done
for so in libpmix.so.2; do where[$so]="$pmix_dir/lib/$so"; done

declare -A done_=() stubbed=()
queue=("${roots[@]}")
while [ "${#queue[@]}" -gt 0 ]; do
  obj="${queue[0]}"; queue=("${queue[@]:1}")
  for so in $(needed "$obj"); do
    [ -n "${done_[$so]:-}" ] && continue
    done_[$so]=1
    is_host_lib "$so" && continue
    if is_stub "$so"; then stubbed[$so]="${where[$so]:-}"; continue; fi
    p="${where[$so]:-}"
    [ -n "$p" ] || die "cannot resolve $so (needed by $obj) on this machine"
    cp -L "$p" "$B/lib/$so"
    queue+=("$B/lib/$so")
  done
done

# ---------------------------------------------------------------- 4. stub libraries
# Symbols the bundle imports (undefined in any bundled object); a stub defines those of them
# that the real library exports.
for f in "$B"/bin/lmp_sezm "$B"/bin/orte* "$B"/lib/*.so* "$B"/lib/openmpi/*.so "$B"/lib/pmix/*.so; do
  readelf --dyn-syms -W "$f" | awk '$7 == "UND" && $8 != "" {sub(/@.*/, "", $8); print $8}'
done | sort -u > "$work/imported.txt"
for so in "${!stubbed[@]}"; do
  real="${stubbed[$so]}"
  [ -n "$real" ] && [ -e "$real" ] || die "stubbed $so: real library not found to copy its symbol list from"
  say "stub $so (symbols of $real)"
  python3 - "$real" "$so" "$work/stub-$so" "$work/imported.txt" <<'PY'
import subprocess, sys
real, soname, base, imported = sys.argv[1:5]
wanted = set(open(imported).read().split())
out = subprocess.run(["readelf", "--dyn-syms", "-W", real], check=True, capture_output=True, text=True).stdout
funcs, objs, tls = [], [], []
versions = {}
for line in out.splitlines():
    f = line.split()
    if len(f) < 8 or not f[0].endswith(":") or f[6] in ("UND", "ABS") or f[4] not in ("GLOBAL", "WEAK"):
        continue  # ABS: the version-node marker symbols
    name = f[7]
    if "@@" in name:
        name, ver = name.split("@@", 1)
    elif "@" in name:
        continue  # non-default (old) versions: nothing we link refers to them
    else:
        ver = None
    if name not in wanted:
        continue
    typ, size = f[3], int(f[2], 0) if f[2].startswith("0x") else int(f[2])
    if typ in ("FUNC", "IFUNC"):
        funcs.append(name)
    elif typ == "OBJECT":
        objs.append((name, max(size, 8)))
    elif typ == "TLS":
        tls.append((name, max(size, 8)))
    else:
        continue  # NOTYPE/ABS version-node markers
    versions.setdefault(ver, []).append(name)
with open(base + ".c", "w") as c:
    c.write('#include <stdio.h>\n#include <stdlib.h>\n')
    c.write('__attribute__((noreturn, visibility("hidden"))) void sezm_stub_fail(const char *s) {\n'
            '  fprintf(stderr, "\\nsezm bundle: %%s was called, but %s is only a stub in this bundle "\n'
            '          "(a LAMMPS feature that needs it is not shipped). Aborting.\\n", s);\n'
            '  abort();\n}\n' % soname)
    for i, n in enumerate(funcs):
        c.write('void f%d(void) __asm__("%s"); void f%d(void) { sezm_stub_fail("%s"); }\n' % (i, n, i, n))
    for i, (n, s) in enumerate(objs):
        c.write('__attribute__((aligned(16))) char o%d[%d] __asm__("%s") = {0};\n' % (i, s, n))
    for i, (n, s) in enumerate(tls):
        c.write('__attribute__((aligned(16))) __thread char t%d[%d] __asm__("%s") = {0};\n' % (i, s, n))
with open(base + ".map", "w") as m:
    named = [v for v in versions if v is not None]
    if not named:
        m.write("{ global:\n" + "".join("  %s;\n" % n for n in versions.get(None, [])) + "local: *; };\n")
    else:
        # unversioned exports (rare) join the first node
        for k, v in enumerate(named):
            syms = versions[v] + (versions.get(None, []) if k == 0 else [])
            m.write("%s { global:\n%s%s};\n" % (v, "".join("  %s;\n" % n for n in syms),
                                                 "local: *;\n" if k == 0 else ""))
print("  %d functions, %d data, %d TLS symbols, versions: %s" % (len(funcs), len(objs), len(tls),
      " ".join(sorted(v for v in versions if v)) or "none"), file=sys.stderr)
PY
  gcc -shared -fPIC -O1 -fno-common -o "$B/lib/$so" "$work/stub-$so.c" \
      -Wl,-soname,"$so" -Wl,--version-script="$work/stub-$so.map" \
    || die "compiling the stub for $so failed"
  strip --strip-unneeded "$B/lib/$so"
done

# ---------------------------------------------------------------- 5. env.sh, manifest, checks
cat > "$B/env.sh" <<'ENV'
# Source this file (bash) after unpacking the bundle: lmp_sezm, mpirun and their libraries
# from here, Open MPI and PMIx relocated to here, settings safe in containers/gVisor.
# Preferably in a subshell, `(. env.sh; mpirun -np 2 lmp_sezm ...)`: LD_LIBRARY_PATH also hands
# this bundle's Debian 12 libraries, and its stubs (libpython3.11, libcrypto, ... that abort
# when called), to host programs started from the same shell.
if [ -n "${BASH_VERSION:-}" ]; then
  _sezm_b="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
else  # other shells cannot tell where a sourced file lives
  _sezm_b="${SEZM_BUNDLE:?env.sh: outside bash, set SEZM_BUNDLE to the unpacked sezm-lammps directory first}"
fi
export SEZM_BUNDLE="$_sezm_b"
export PATH="$_sezm_b/bin${PATH:+:$PATH}"
export LD_LIBRARY_PATH="$_sezm_b/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
# Open MPI 4.1 install directories (opal installdirs "env" component; each one explicit, as
# Debian's compiled-in values are absolute /usr paths, not ${prefix}-relative).
export OPAL_PREFIX="$_sezm_b" OPAL_EXEC_PREFIX="$_sezm_b" OPAL_BINDIR="$_sezm_b/bin" \
       OPAL_SBINDIR="$_sezm_b/bin" OPAL_LIBEXECDIR="$_sezm_b/bin" OPAL_LIBDIR="$_sezm_b/lib" \
       OPAL_PKGLIBDIR="$_sezm_b/lib/openmpi" OPAL_DATAROOTDIR="$_sezm_b/share" \
       OPAL_DATADIR="$_sezm_b/share" OPAL_PKGDATADIR="$_sezm_b/share/openmpi" \
       OPAL_SYSCONFDIR="$_sezm_b/etc" OPAL_INCLUDEDIR="$_sezm_b/include" \
       OPAL_PKGINCLUDEDIR="$_sezm_b/include" OPAL_LOCALSTATEDIR="$_sezm_b/var" \
       OPAL_SHAREDSTATEDIR="$_sezm_b/var" OPAL_MANDIR="$_sezm_b/share" OPAL_INFODIR="$_sezm_b/share"
export OMPI_MCA_mca_base_component_path="$_sezm_b/lib/openmpi"
export OMPI_MCA_mca_base_param_files="$_sezm_b/etc/openmpi-mca-params.conf"
export OMPI_MCA_orte_default_hostfile="$_sezm_b/etc/openmpi-default-hostfile"
# PMIx 4.2 (Open MPI's pmix ext3x component links it) likewise.
export PMIX_PREFIX="$_sezm_b" PMIX_EXEC_PREFIX="$_sezm_b" PMIX_BINDIR="$_sezm_b/bin" \
       PMIX_LIBDIR="$_sezm_b/lib" PMIX_PKGLIBDIR="$_sezm_b/lib/pmix" PMIX_DATAROOTDIR="$_sezm_b/share" \
       PMIX_DATADIR="$_sezm_b/share" PMIX_PKGDATADIR="$_sezm_b/share/pmix" PMIX_SYSCONFDIR="$_sezm_b/etc"
export PMIX_MCA_mca_base_component_path="$_sezm_b/lib/pmix"
export HWLOC_PLUGINS_PATH="$_sezm_b/lib/hwloc"
# Root inside a container; one node, shared memory only; no binding, no CMA (gVisor lacks
# process_vm_readv), no ssh needed (plm isolated launches local ranks only).
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_MCA_plm="${OMPI_MCA_plm:-isolated}"
export OMPI_MCA_pml="${OMPI_MCA_pml:-ob1}"
export OMPI_MCA_btl="${OMPI_MCA_btl:-self,vader}"
export OMPI_MCA_btl_vader_single_copy_mechanism=none
export OMPI_MCA_rmaps_base_oversubscribe=1
export OMPI_MCA_hwloc_base_binding_policy=none
export OMPI_MCA_btl_base_warn_component_unused=0
export PMIX_MCA_gds="${PMIX_MCA_gds:-hash}"
export PMIX_MCA_psec="${PMIX_MCA_psec:-native}"
export PMIX_MCA_pcompress_base_silence_warning=1
# A rank started without mpirun (singleton) runs without forking an orted daemon.
export OMPI_MCA_ess_singleton_isolated="${OMPI_MCA_ess_singleton_isolated:-1}"
unset _sezm_b
ENV

{
  echo "sezm LAMMPS bundle (lmp_sezm + relocatable Open MPI), built $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  echo "source: $(git -C "$here" describe --always --dirty 2>/dev/null || echo unknown) (the working tree as built)"
  git -C "$here" status --short -- src cuda kokkos CMakeLists.txt cmake 2>/dev/null | sed 's/^/  uncommitted: /' || true
  echo "build machine: $(. /etc/os-release; echo "$PRETTY_NAME"), $(ldd --version | head -1)"
  grep -E "native CPU tuning|CUDA engine|LAMMPS pair style" "$build/configure.log" | sed 's/^-- */configure: /'
  echo "packages: lammps $(dpkg-query -W -f='${Version}' liblammps0 2>/dev/null), openmpi $(dpkg-query -W -f='${Version}' libopenmpi3), pmix $(dpkg-query -W -f='${Version}' libpmix2)"
  echo "stubbed (abort if called): ${!stubbed[*]}"
  echo "taken from the host: glibc, libstdc++, libgcc_s, libcuda (NVIDIA driver)"
  echo
  echo "files:"
  (cd "$B" && find . -type f -o -type l | sort | while read -r f; do
     if [ -L "$f" ]; then echo "  $f -> $(readlink "$f")"; else printf '  %-48s %9d\n' "$f" "$(stat -c %s "$f")"; fi
   done)
} > "$B/MANIFEST.txt"

# Newest glibc / libstdc++ symbol versions required (gpu-lammps.sh compares with the host).
all_elf=("$B"/bin/lmp_sezm "$B"/bin/orterun "$B"/bin/orted "$B"/lib/*.so* "$B"/lib/openmpi/*.so "$B"/lib/pmix/*.so)
for v in GLIBC GLIBCXX CXXABI; do
  m="$(for f in "${all_elf[@]}"; do readelf -V -W "$f" 2>/dev/null; done | grep -o "Name: ${v}_[0-9.]*" \
       | sed "s/Name: ${v}_//" | sort -t. -k1,1n -k2,2n -k3,3n | tail -1)"
  echo "${v}_${m}"
done > "$B/REQUIRES"
say "requires from the host: $(tr '\n' ' ' < "$B/REQUIRES")"

# Every executable's full dependency closure must resolve inside the bundle + host core
# libraries, with all symbols bound (ldd -r processes every relocation).
check_env=(env -i PATH=/usr/bin:/bin LD_LIBRARY_PATH="$B/lib")
for e in "$B/bin/lmp_sezm" "$B/bin/orterun" "$B/bin/orted" "$B"/lib/openmpi/mca_pmix_ext3x.so; do
  r="$("${check_env[@]}" ldd -r "$e" 2>&1)"
  if grep -E "not found|undefined symbol" <<<"$r" | grep -vE "undefined symbol: (ompi_|opal_|orte_|mca_)" | grep -q .; then
    echo "$r" | grep -E "not found|undefined symbol" | head -20 >&2
    die "unresolved dependencies of $e inside the bundle"
  fi
  outside="$(awk '/=> \//{print $3}' <<<"$r" | grep -v "^$B/" || true)"
  for p in $outside; do is_host_lib "$(basename "$p")" || die "$e loads $p from outside the bundle"; done
done
say "ldd -r: all dependencies resolve inside the bundle (host: glibc, libstdc++, libgcc_s only)"

# ---------------------------------------------------------------- 6. archive
mkdir -p "$(dirname "$out")"
say "compressing (xz --x86 --lzma2=preset=9e) ..."
# The x86 branch filter before LZMA2 saves about 5 % on machine code; plain `tar xJf` reads it.
tar -C "$work" --owner=0 --group=0 -cf - sezm-lammps | xz --x86 --lzma2=preset=9e -T1 > "$out.tmp"
mv "$out.tmp" "$out"
size="$(stat -c %s "$out")"
say "$out: $size bytes ($(du -h "$out" | cut -f1)); unpacked $(du -sh "$B" | cut -f1)"
if [ "$size" -gt "$max_bytes" ]; then
  (cd "$B" && find . -type f -size +200k -exec ls -la {} + | sort -k5 -n | tail -15) >&2
  die "the archive is $size bytes > $max_bytes (SEZM_BUNDLE_MAX_BYTES); the largest files are listed above"
fi

# ---------------------------------------------------------------- 7. verify the relocation here
if [ "$verify" = 1 ]; then
  verify_bundle "$out" || die "verification of $out failed (see above)"
fi
echo "$out"
