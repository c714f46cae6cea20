#!/usr/bin/env bash
# LAMMPS with pair_style sezm `device cuda` on a GPU machine that has no LAMMPS and no MPI, using
# the bundle of make-lammps-bundle.sh (.devdeps/lammps-gpu.tar.xz: lmp_sezm, its libraries and a
# relocatable Open MPI). Run from anywhere:
#
#   bash tools/gpu-machine/gpu-lammps.sh [check] [drift] [bench4096] [committee] [all]   (default: all)
#
#   check      rattled diamond (64 atoms, C.pt) and fcc Cu (108 atoms, Cu.pt), run 0:
#              cuda vs cpu on 1 rank, cuda on 2 ranks (one GPU shared) vs both; energy,
#              virial and per-atom forces (examples/gpu/in.check, analyze.py compare).
#              Criteria: |dE|/|E| <= 1e-6, max|dF|/max|F| <= 1e-5, virial <= 1e-5 (relative to
#              its largest component).
#   drift      NVE on the GPU, 10 ps each: diamond 64 atoms at 0.5 fs (20000 steps), Cu 108
#              atoms at 1 fs (10000 steps); slope of etotal/atom vs time <= 1e-5 eV/atom/ps;
#              in each precision of SEZM_DRIFT_PRECISIONS (default: "default"; e.g. "default tf32").
#              Each run is capped by LAMMPS `timer timeout` so the whole script keeps to its
#              time budget; a capped run is fitted over what it did and says so.
#   bench4096  examples/diamond at 8x8x8 cells (4096 atoms) on cuda: 5 + 20 steps with LAMMPS's
#              timing breakdown and the pair style's per-call timing.
#   committee  pair_style sezm M1..M4 out_freq N (docs/lammps.md, "Model deviation"): the test
#              committee's deviation file (tests/data/model_devi, 4 frames through rerun, atomic)
#              on 1 and 2 ranks against deepmd-kit 3.2.0 (check_model_devi.py, --rtol
#              SEZM_COMMITTEE_RTOL, default 1e-3 of the largest value of each kind: fp32 forces);
#              then examples/committee with four copies of C.pt at SEZM_COMMITTEE_CELLS ("4 8":
#              512 and 4096 atoms), SEZM_COMMITTEE_STEPS (20) steps with out_freq 1 (every step an
#              output step: all models) and out_freq 0 (model 1 only): seconds per step of each.
#   scaling    examples/gpu/in.scaling on 1, 2, 4, 8 ranks, one GPU per rank (ranks beyond the
#              machine's GPUs are skipped): weak scaling at SEZM_SCALING_WEAK atoms per rank
#              ("4096 32768"), strong scaling of SEZM_SCALING_STRONG atoms ("32768 262144"), in each
#              mode of SEZM_SCALING_MODES ("lean fast"); 5 NVT + SEZM_SCALING_STEPS (20) NVE steps.
#              One line per run (seconds per NVE step, parallel efficiency against the fewest ranks
#              that ran, the pair style's engine / comm / ghost-staging seconds per call) and a
#              table; runs that do not fit in GPU memory are SKIP. Not part of `all` (it needs
#              several GPUs and longer than one device call: choose a subset through the variables).
#   all        check, bench4096, committee, drift (in that order). Prints PASS/FAIL lines and a summary;
#              exit status 1 if anything failed.
#
# Output: stdout, and when $OUT is set, five files there (summary, env, one log per part).
# Environment (all optional):
#   SEZM_GPU_LAMMPS_DEVICE=cpu   run the same flow with device cpu everywhere (no GPU needed;
#                                validates the plumbing: bundle, MPI launch, parsing, criteria)
#   SEZM_LAMMPS_BUNDLE           the archive (default .devdeps/lammps-gpu.tar.xz)
#   SEZM_GPU_LAMMPS_WORK         work directory (default /tmp/sezm-gpu-lammps; wiped)
#   SEZM_GPU_LAMMPS_BUDGET       seconds the whole script should take (default 480); drift
#                                timeouts shrink to fit it
#   SEZM_GPU_ID                  pass `gpu N` to the pair style on every rank (default: the
#                                style's choice, node-local rank mod #GPUs = 0 with one GPU)
#   SEZM_CHECK_SYSTEMS ("diamond cu"), SEZM_CHECK_CELLS (2 for diamond, 3 for cu), SEZM_CHECK_RANKS
#                                ("2"; "2 4 8" on a machine with 8 GPUs: one GPU per rank)
#   SEZM_DRIFT_SYSTEMS ("diamond cu"), SEZM_DRIFT_PRECISIONS ("default"), SEZM_DRIFT_CELLS_DIAMOND (2), SEZM_DRIFT_CELLS_CU (3),
#   SEZM_DRIFT_STEPS_DIAMOND (20000), SEZM_DRIFT_STEPS_CU (10000), SEZM_DRIFT_EVERY (100),
#   SEZM_DRIFT_TIMEOUT_DIAMOND (210 s), SEZM_DRIFT_TIMEOUT_CU (150 s), SEZM_DRIFT_MAX_SLOPE (1e-5)
#   SEZM_BENCH_CELLS (8; 1 with SEZM_GPU_LAMMPS_DEVICE=cpu), SEZM_BENCH_NP (1), SEZM_BENCH_STEPS (20)
#   SEZM_OMP_THREADS             OpenMP threads per rank (default: cores / ranks)
#   SEZM_MPI_FALLBACK=0          do not retry a failing 2-rank launch with other Open MPI settings
#   SEZM_SCALING_RANKS ("1 2 4 8" up to the GPUs; "1 2" with device cpu), SEZM_SCALING_WEAK,
#   SEZM_SCALING_STRONG (set empty, either leaves its series out), SEZM_SCALING_MODES,
#   SEZM_SCALING_STEPS, SEZM_SCALING_TIMEOUT (s per run, 420)
#   (device cpu defaults: 8 atoms per rank, 8 atoms, mode "cpu" (none), 2 steps: the plumbing only)
set -uo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
parts=("$@"); [ "${#parts[@]}" -eq 0 ] && parts=(all)
want() { local p; for p in "${parts[@]}"; do { [ "$p" = "$1" ] || { [ "$p" = all ] && [ "$1" != scaling ]; }; } && return 0; done; return 1; }
for p in "${parts[@]}"; do
  case "$p" in check|drift|bench4096|committee|scaling|all) ;; *) echo "gpu-lammps: unknown part '$p' (check, drift, bench4096, committee, scaling, all)" >&2; exit 2 ;; esac
done

dev="${SEZM_GPU_LAMMPS_DEVICE:-cuda}"
case "$dev" in cuda|cpu) ;; *) echo "gpu-lammps: SEZM_GPU_LAMMPS_DEVICE must be cuda or cpu" >&2; exit 2 ;; esac
bundle_tar="${SEZM_LAMMPS_BUNDLE:-$here/.devdeps/lammps-gpu.tar.xz}"
work="${SEZM_GPU_LAMMPS_WORK:-/tmp/sezm-gpu-lammps}"
budget="${SEZM_GPU_LAMMPS_BUDGET:-480}"
out="${OUT:-}"
ncores="$(nproc 2>/dev/null || echo 1)"
gpu_var=(); [ -n "${SEZM_GPU_ID:-}" ] && gpu_var=(-var gpu "$SEZM_GPU_ID")

rm -rf "$work"; mkdir -p "$work/runs"
summary="$work/summary.txt" envlog="$work/env.txt"
: > "$summary"; : > "$envlog"
results=()
say() { echo "$*" | tee -a "$summary"; }
result() {  # STATUS name detail...
  local s="$1"; shift
  results+=("$s $*")
  say "$s $*"
}
section() { say ""; say "==== $* ($(date -u +%H:%M:%S), ${SECONDS}s elapsed)"; }

finish() {
  local nf=0 np=0 ns=0 r
  say ""
  say "==== summary (device $dev, ${SECONDS}s)"
  for r in "${results[@]}"; do
    say "  $r"
    case "$r" in PASS*) np=$((np+1)) ;; FAIL*) nf=$((nf+1)) ;; *) ns=$((ns+1)) ;; esac
  done
  say "  => $np PASS, $nf FAIL, $ns SKIP"
  if [ -n "$out" ]; then
    mkdir -p "$out"
    cp "$summary" "$out/gpu-lammps-summary.txt"
    cp "$envlog" "$out/gpu-lammps-env.txt"
    for part in check drift bench4096 committee scaling; do
      [ -s "$work/$part.log" ] && cp "$work/$part.log" "$out/gpu-lammps-$part.log"
    done
    [ -s "$work/scaling.tsv" ] && cp "$work/scaling.tsv" "$out/gpu-lammps-scaling.tsv"
  fi
  [ "$nf" -eq 0 ]
  exit $?
}

# ------------------------------------------------------------------ preflight
section "preflight"
{
  echo "date: $(date -u)"; echo "host: $(uname -a)"
  [ -r /etc/os-release ] && (. /etc/os-release; echo "os: $PRETTY_NAME")
  echo "glibc: $(ldd --version 2>&1 | head -1)"; echo "cores: $ncores"; echo "python3: $(python3 --version 2>&1)"
  echo "repo: $(git -C "$here" describe --always --dirty 2>/dev/null || echo '?')"
} >> "$envlog"
if [ ! -f "$bundle_tar" ]; then
  result FAIL bundle "no $bundle_tar: run tools/gpu-machine/make-lammps-bundle.sh on the build machine" \
    "and carry .devdeps"
  finish
fi
unpack() {  # tar -J needs the xz program; Python's lzma module is the fallback
  if command -v xz >/dev/null; then
    tar -C "$work" -xJf "$bundle_tar"
  else
    say "(no xz program: unpacking with python3's tarfile/lzma)"
    python3 - "$bundle_tar" "$work" <<'PY'
import sys, tarfile
with tarfile.open(sys.argv[1], "r:xz") as t:
    if hasattr(tarfile, "tar_filter"):
        t.extractall(sys.argv[2], filter="tar")
    else:
        t.extractall(sys.argv[2])
PY
  fi
}
unpack || { result FAIL bundle "cannot unpack $bundle_tar"; finish; }
B="$work/sezm-lammps"
# Bundle programs run with env.sh sourced in a subshell of their own: its LD_LIBRARY_PATH must
# not reach host programs (python3, nvidia-smi, ...), which would pick up the bundle's older
# Debian libraries or its abort-on-call stubs (libpython, libcrypto, ...).
bundle() { ( source "$B/env.sh" && exec "$@" ); }
{ echo "bundle: $bundle_tar ($(stat -c %s "$bundle_tar") bytes)"; sed -n '1,12p' "$B/MANIFEST.txt"; } >> "$envlog"
say "bundle: $(head -1 "$B/MANIFEST.txt")"
say "$(grep -E '^source|^configure' "$B/MANIFEST.txt" | tr '\n' ';')"

# glibc / libstdc++ of the host against what the bundle needs
need_glibc="$(sed -n 's/^GLIBC_//p' "$B/REQUIRES")"
have_glibc="$(ldd --version 2>&1 | head -1 | grep -oE '[0-9]+\.[0-9]+$' || true)"
if [ -n "$have_glibc" ] && [ -n "$need_glibc" ] && \
   [ "$(printf '%s\n%s\n' "$need_glibc" "$have_glibc" | sort -V | head -1)" != "$need_glibc" ]; then
  result FAIL glibc "host glibc $have_glibc < $need_glibc needed by the bundle (built on Debian 12)"
fi
if ! bundle lmp_sezm -h > "$work/lmp-h.txt" 2>&1; then
  result FAIL load "lmp_sezm does not start from the bundle:"
  head -20 "$work/lmp-h.txt" | tee -a "$summary"
  { echo "--- ldd lmp_sezm (bundle environment)"; bundle ldd "$B/bin/lmp_sezm"; } >> "$envlog" 2>&1
  finish
fi
say "lmp_sezm loads: $(grep -m1 -E '^Large-scale|LAMMPS \(' "$work/lmp-h.txt" | head -1)"

if [ "$dev" = cuda ]; then
  if ! command -v nvidia-smi >/dev/null; then
    result FAIL gpu "no nvidia-smi on this machine (SEZM_GPU_LAMMPS_DEVICE=cpu runs the flow without a GPU)"
    finish
  fi
  if ! nvidia-smi --query-gpu=index,name,driver_version,memory.total,compute_cap --format=csv,noheader > "$work/gpu.txt" 2>&1; then
    result FAIL gpu "nvidia-smi failed: $(head -3 "$work/gpu.txt")"
    finish
  fi
  say "GPUs: $(tr '\n' ';' < "$work/gpu.txt")"
  { echo "--- nvidia-smi"; nvidia-smi 2>&1; } >> "$envlog"
else
  say "SEZM_GPU_LAMMPS_DEVICE=cpu: every 'cuda' run uses device cpu (plumbing check; cuda-vs-cpu comparisons are trivially equal)"
fi

# A trivial input for launch checks.
cat > "$work/in.launch" <<'EOF'
units metal
lattice fcc 3.615
region box block 0 2 0 2 0 2
create_box 1 box
create_atoms 1 box
mass 1 1.0
pair_style zero 5.0
pair_coeff * *
run 0
EOF
launch_ok() {  # log: ran to the end with the expected processor grid
  grep -q "$2 MPI processor grid" "$1" && grep -q "Total wall time" "$1"
}
# 1 rank: directly (Open MPI singleton, no daemon) or, failing that, mpirun -np 1
launch1=direct
(cd "$work" && bundle timeout -k 5 40 lmp_sezm -nocite -in in.launch -log none > "$work/launch1.out" 2>&1)
if launch_ok "$work/launch1.out" "1 by 1 by 1"; then
  say "1 rank: lmp_sezm runs directly (singleton)"
else
  { echo "--- direct 1-rank launch failed:"; cat "$work/launch1.out"; } >> "$envlog"
  (cd "$work" && bundle timeout -k 5 40 mpirun -np 1 lmp_sezm -nocite -in in.launch -log none > "$work/launch1.out" 2>&1)
  if launch_ok "$work/launch1.out" "1 by 1 by 1"; then
    launch1=mpirun; say "1 rank: direct start failed (see env log); using mpirun -np 1"
  else
    result FAIL launch1 "lmp_sezm cannot run on 1 rank:"; tail -25 "$work/launch1.out" | tee -a "$summary"
    finish
  fi
fi
# 2 ranks: the bundle's settings, then fallbacks for container trouble
mpi2=0
fallbacks=("" "OMPI_MCA_btl=self,tcp OMPI_MCA_btl_tcp_if_include=lo OMPI_MCA_oob_tcp_if_include=lo"
           "OMPI_MCA_btl=self,tcp OMPI_MCA_btl_tcp_if_include=lo OMPI_MCA_oob_tcp_if_include=lo OMPI_MCA_rmaps_base_mapping_policy=slot OMPI_MCA_hwloc_base_use_hwthreads_as_cpus=1 PMIX_MCA_gds=hash OMPI_MCA_shmem=mmap")
[ "${SEZM_MPI_FALLBACK:-1}" = 0 ] && fallbacks=("")
mpi_env=() hung=0
for fb in "${fallbacks[@]}"; do
  read -r -a fbv <<< "$fb"
  (cd "$work" && bundle env ${fbv[@]+"${fbv[@]}"} timeout -k 5 40 mpirun -np 2 lmp_sezm -nocite -in in.launch -log none > "$work/launch2.out" 2>&1)
  rc=$?
  if launch_ok "$work/launch2.out" "1 by 1 by 2"; then
    mpi2=1; mpi_env=(${fbv[@]+"${fbv[@]}"}); break
  fi
  [ "$rc" = 124 ] && hung=$((hung + 1))
  { echo "--- mpirun -np 2 failed (exit $rc) with settings: ${fb:-(bundle defaults)}"; cat "$work/launch2.out"; } >> "$envlog"
  say "mpirun -np 2 failed (exit $rc$([ "$rc" = 124 ] && echo ': hung, killed after 40 s')) with ${fb:-the bundle settings}: $(grep -m2 -iE 'error|abort|fail|not |unable' "$work/launch2.out" | tr -s ' ' | tr '\n' ' ' | cut -c1-240)"
done
if [ "$mpi2" = 1 ]; then
  say "2 ranks: mpirun -np 2 works${mpi_env[*]:+ with ${mpi_env[*]}}"
else
  result FAIL launch2 "mpirun -np 2 does not work (details in the env log); 2-rank runs are skipped"
  # one verbose attempt for the diagnosis (short if the attempts hung)
  (cd "$work" && bundle timeout -k 5 $([ "$hung" -gt 0 ] && echo 20 || echo 40) mpirun -np 2 --mca plm_base_verbose 10 --mca btl_base_verbose 30 \
      --mca pmix_base_verbose 10 --mca oob_base_verbose 10 lmp_sezm -nocite -in in.launch -log none \
      > "$work/launch2-verbose.out" 2>&1)
  { echo "--- verbose mpirun -np 2:"; tail -150 "$work/launch2-verbose.out"; } >> "$envlog"
fi
{ echo "--- launch settings: 1 rank $launch1; 2 ranks ${mpi2}; extra env: ${mpi_env[*]:-none}"
  echo "--- bundle env:"; bundle env | grep -E '^(OMPI_|OPAL_|PMIX_|HWLOC_|LD_LIBRARY_PATH=|PATH=)' | sort; } >> "$envlog"

# ------------------------------------------------------------------ run helper
# lmp NAME NP DIR TIMEOUT ARGS... : runs lmp_sezm in DIR on NP ranks; the screen output (and
# stderr) goes to runs/NAME.out, the LAMMPS log to runs/NAME.log; appended to the part's log.
part_log=/dev/null
lmp() {
  local name="$1" np="$2" dir="$3" tmo="$4"; shift 4
  local threads=$(( ncores / np )); [ "$threads" -ge 1 ] || threads=1
  [ -n "${SEZM_OMP_THREADS:-}" ] && threads="$SEZM_OMP_THREADS"
  local cmd=()
  if [ "$np" = 1 ] && [ "$launch1" = direct ]; then cmd=(lmp_sezm); else cmd=(mpirun -np "$np" lmp_sezm); fi
  local t0=$SECONDS rc
  (cd "$dir" && bundle env ${mpi_env[@]+"${mpi_env[@]}"} OMP_NUM_THREADS="$threads" timeout -k 10 "$tmo" \
     "${cmd[@]}" -nocite -log "$work/runs/$name.log" "$@" > "$work/runs/$name.out" 2>&1)
  rc=$?
  {
    echo; echo "######## $name: (cd $dir; OMP_NUM_THREADS=$threads ${cmd[*]} -nocite -log ... $*)"
    echo "######## exit status $rc, $((SECONDS - t0)) s"
    cat "$work/runs/$name.out"
  } >> "$part_log"
  [ "$rc" = 124 ] && echo "  ($name: killed after ${tmo}s)"
  grep -h "uses CUDA device" "$work/runs/$name.out" 2>/dev/null | sed 's/^/  /' | head -4
  if [ "$rc" != 0 ] || ! grep -q "Total wall time" "$work/runs/$name.out"; then
    echo "  $name failed (exit $rc); last lines:"; grep -v '^ *$' "$work/runs/$name.out" | tail -12 | sed 's/^/    /'
    return 1
  fi
  return 0
}
# analyze LABEL ARGS...: one PASS/FAIL line from examples/gpu/analyze.py, recorded as a result
analyze() {
  local label="$1" line; shift
  line="$(python3 "$here/examples/gpu/analyze.py" "$@" --label "$label" 2>&1)"
  case "$line" in PASS*|FAIL*) ;; *) line="FAIL $label: analyze.py: $(tail -3 <<<"$line" | tr '\n' ' ')" ;; esac
  results+=("$(head -1 <<<"$line")"); say "$line"
}

# ------------------------------------------------------------------ check
if want check; then
  section "check: $dev vs cpu, 1 vs ${SEZM_CHECK_RANKS:-2} ranks (run 0, rattled crystals)"
  part_log="$work/check.log"; : > "$part_log"
  cells_var=(); [ -n "${SEZM_CHECK_CELLS:-}" ] && cells_var=(-var cells "$SEZM_CHECK_CELLS")
  for sys in ${SEZM_CHECK_SYSTEMS:-diamond cu}; do
    d="$work/runs"
    common=(-in in.check -var system "$sys" ${cells_var[@]+"${cells_var[@]}"})
    ok_cpu=0 ok_g1=0
    t0=$SECONDS
    lmp "check-$sys-cpu1" 1 "$here/examples/gpu" 600 "${common[@]}" -var device cpu -var dump "$d/check-$sys-cpu1.dump" \
      | tee -a "$summary" && ok_cpu=1
    say "  $sys cpu-reference x1 (1 rank): $((SECONDS - t0)) s"; t0=$SECONDS
    lmp "check-$sys-dev1" 1 "$here/examples/gpu" 300 "${common[@]}" -var device "$dev" ${gpu_var[@]+"${gpu_var[@]}"} \
      -var dump "$d/check-$sys-dev1.dump" | tee -a "$summary" && ok_g1=1
    say "  $sys $dev x1 (1 rank): $((SECONDS - t0)) s"
    [ "$ok_cpu" = 1 ] || result FAIL "check $sys cpu 1 rank" "did not run (see check log)"
    [ "$ok_g1" = 1 ] || result FAIL "check $sys $dev 1 rank" "did not run (see check log)"
    cmp_pair() {  # a b label
      analyze "$3" compare "$d/check-$sys-$1.log" "$d/check-$sys-$1.dump" "$d/check-$sys-$2.log" "$d/check-$sys-$2.dump"
    }
    [ "$ok_g1" = 1 ] && [ "$ok_cpu" = 1 ] && cmp_pair dev1 cpu1 "check $sys: $dev x1 vs cpu-reference x1"
    # Several ranks (SEZM_CHECK_RANKS, default 2): the ranks share the GPUs, node-local rank mod
    # their number (one GPU per rank where there are as many).
    for np in ${SEZM_CHECK_RANKS:-2}; do
      if [ "$mpi2" != 1 ]; then result SKIP "check $sys $dev $np ranks" "mpirun -np 2 unavailable"; continue; fi
      t0=$SECONDS
      if lmp "check-$sys-dev$np" "$np" "$here/examples/gpu" 300 "${common[@]}" -var device "$dev" ${gpu_var[@]+"${gpu_var[@]}"} \
           -var dump "$d/check-$sys-dev$np.dump" | tee -a "$summary"; then
        say "  $sys $dev x$np ($np ranks): $((SECONDS - t0)) s"
        [ "$ok_cpu" = 1 ] && cmp_pair "dev$np" cpu1 "check $sys: $dev x$np vs cpu-reference x1"
        [ "$ok_g1" = 1 ] && cmp_pair "dev$np" dev1 "check $sys: $dev x$np vs $dev x1"
      else
        result FAIL "check $sys $dev $np ranks" "did not run (see check log)"
      fi
    done
  done
fi

# ------------------------------------------------------------------ bench4096
if want bench4096; then
  bdef=8; [ "$dev" = cpu ] && bdef=1   # 4096 atoms on CPU would take hours
  bcells="${SEZM_BENCH_CELLS:-$bdef}" bnp="${SEZM_BENCH_NP:-1}" bsteps="${SEZM_BENCH_STEPS:-20}"
  natoms=$(( 8 * bcells * bcells * bcells ))
  section "bench4096: examples/diamond, ${bcells}^3 cells ($natoms atoms), device $dev, $bnp rank(s), 5 + $bsteps steps"
  part_log="$work/bench4096.log"; : > "$part_log"
  if [ "$bnp" -gt 1 ] && [ "$mpi2" != 1 ]; then
    result SKIP bench4096 "mpirun unavailable"
  elif lmp bench4096 "$bnp" "$here/examples/diamond" 420 -in in.diamond -var cells "$bcells" -var device "$dev" \
         -var nvt 5 -var nve "$bsteps" -var every 5 | tee -a "$summary"; then
    o="$work/runs/bench4096.out"
    # the second (NVE) run's breakdown
    awk '/^Loop time/{n++} n==2' "$o" | grep -E "^Loop time|^Performance|^Section|^-----|^(Pair|Neigh|Comm|Output|Modify|Other) " | tee -a "$summary"
    awk '/pair sezm timing \(end of run\)/{buf=""; grab=1} grab{buf=buf $0 "\n"} grab && /^ *total/{grab=0} END{printf "%s", buf}' "$o" | tee -a "$summary"
    per_step="$(awk '/^Loop time/{n++; if (n==2) print $4/$9}' "$o")"
    result PASS bench4096 "$natoms atoms, device $dev, $bnp rank(s): ${per_step:-?} s per MD step (NVE, $bsteps steps; see the breakdown above)"
  else
    result FAIL bench4096 "the run failed (see bench4096 log)"
  fi
fi

# ------------------------------------------------------------------ committee
if want committee; then
  section "committee: pair_style sezm M1..M4 on $dev (deviation file against deepmd-kit; timing)"
  part_log="$work/committee.log"; : > "$part_log"
  d="$work/runs"
  for np in 1 2; do
    if [ "$np" = 2 ] && [ "$mpi2" != 1 ]; then result SKIP "committee file $dev x2" "mpirun -np 2 unavailable"; continue; fi
    if lmp "committee-devi-$np" "$np" "$work" 300 -in "$here/tests/lammps/inputs/devi_rerun.in" \
         -var dir "$here/tests/data/model_devi" -var out "$d/committee-devi-$np.model_devi" \
         -var opts "out_freq 5 atomic device $dev" | tee -a "$summary"; then
      line="$(python3 "$here/tests/lammps/check_model_devi.py" ref "$d/committee-devi-$np.model_devi" \
              "$here/tests/data/model_devi/ref_model_devi.json" --atomic --steps 0,5,10,15 \
              --rtol "${SEZM_COMMITTEE_RTOL:-1e-3}" 2>&1 | tail -1)"
      case "$line" in OK*) result PASS "committee file $dev x$np" "$line" ;; *) result FAIL "committee file $dev x$np" "$line" ;; esac
    else
      result FAIL "committee file $dev x$np" "the run failed (see committee log)"
    fi
  done
  csteps="${SEZM_COMMITTEE_STEPS:-20}"
  C="$here/potentials/C.pt"
  for cells in ${SEZM_COMMITTEE_CELLS:-4 8}; do
    natoms=$(( 8 * cells * cells * cells ))
    declare -A per=()
    for freq in 1 0; do
      if lmp "committee-bench-$cells-f$freq" 1 "$here/examples/committee" 420 -in in.committee -var cells "$cells" \
           -var steps "$csteps" -var freq "$freq" -var device "$dev" -var out "$d/committee-bench-$cells.model_devi" \
           -var m1 "$C" -var m2 "$C" -var m3 "$C" -var m4 "$C" ${gpu_var[@]+"${gpu_var[@]}"} | tee -a "$summary"; then
        o="$work/runs/committee-bench-$cells-f$freq.out"
        per[$freq]="$(awk '/^Loop time/{print $4/$9}' "$o" | tail -1)"
        grep -A2 "pair sezm committee (end of run)" "$o" | tee -a "$summary"
      fi
    done
    if [ -n "${per[1]:-}" ] && [ -n "${per[0]:-}" ]; then
      result PASS "committee bench $natoms" "4 x C.pt, device $dev, 1 rank: ${per[1]} s per output step (all models," \
        "out_freq 1), ${per[0]} s per ordinary step (model 1, out_freq 0); $csteps steps each"
    else
      result FAIL "committee bench $natoms" "a run failed (see committee log)"
    fi
    unset per
  done
fi

# ------------------------------------------------------------------ scaling
if want scaling; then
  section "scaling: examples/gpu/in.scaling, one GPU per rank, device $dev"
  part_log="$work/scaling.log"; : > "$part_log"
  ngpu=1; [ "$dev" = cuda ] && ngpu="$(grep -c . "$work/gpu.txt")"
  if [ "$dev" = cuda ]; then
    ranks_def=""; for p in 1 2 4 8; do [ "$p" -le "$ngpu" ] && ranks_def="$ranks_def $p"; done
    weak_def="4096 32768" strong_def="32768 262144" modes_def="lean fast" steps_def=20 nvt=5
  else
    ranks_def="1 2" weak_def=8 strong_def=8 modes_def=cpu steps_def=2 nvt=1
  fi
  sranks="${SEZM_SCALING_RANKS:-$ranks_def}" ssteps="${SEZM_SCALING_STEPS:-$steps_def}"
  stmo="${SEZM_SCALING_TIMEOUT:-420}"
  tsv="$work/scaling.tsv"
  printf 'kind\tatoms_ref\tmode\tranks\tatoms\ts_per_step\tefficiency\tengine_fwd\tengine_bwd\tcomm_fwd\tcomm_rev\tstaging\tMB_per_call\n' > "$tsv"
  # cells NATOMS: the side of a cube of diamond cells holding NATOMS atoms (8 per cell), or nothing
  cells() { awk -v n="$1" 'BEGIN{c=int((n/8)^(1/3)+0.5); if (8*c*c*c==n) print c}'; }
  declare -A base_t=() base_p=()
  run_scaling() {  # KIND NREF MODE P CX CY CZ
    local kind="$1" nref="$2" mode="$3" np="$4" cx="$5" cy="$6" cz="$7"
    local atoms=$(( 8 * cx * cy * cz )) name="scaling-$1-$2-$3-p$4" key="$1-$2-$3"
    local o="$work/runs/$name.out"
    # One GPU per rank: the style's default device is the node-local rank modulo the visible GPUs,
    # so at most as many ranks as GPUs (the style's log lists each rank's device: checked below).
    if [ "$dev" = cuda ] && [ "$np" -gt "$ngpu" ]; then
      result SKIP "$name" "$np ranks, $ngpu GPU(s): one GPU per rank needs more GPUs"; return
    fi
    if [ "$np" -gt 1 ] && [ "$mpi2" != 1 ]; then result SKIP "$name" "mpirun unavailable"; return; fi
    if ! lmp "$name" "$np" "$here/examples/gpu" "$stmo" -in in.scaling -var cx "$cx" -var cy "$cy" -var cz "$cz" \
         -var device "$dev" -var mode "$mode" -var nvt "$nvt" -var nve "$ssteps" -var every "$ssteps" | tee -a "$summary"; then
      if grep -q "out of GPU memory" "$o" 2>/dev/null; then
        result SKIP "$name" "$atoms atoms on $np GPU(s), mode $mode: out of GPU memory"
      else
        result FAIL "$name" "the run failed (see scaling log)"
      fi
      return
    fi
    if [ "$dev" = cuda ] && [ "$np" -gt 1 ]; then  # the style's "CUDA device of each rank" line
      local devs ndev; devs="$(grep -m1 'CUDA device of each rank:' "$o" | sed 's/.*rank://')"
      ndev="$(tr ' ' '\n' <<< "$devs" | grep -c . )"
      [ "$(tr ' ' '\n' <<< "$devs" | grep . | sort -u | wc -l)" = "$np" ] || [ "$ndev" = 0 ] ||
        { result FAIL "$name" "$np ranks did not get a GPU each (devices:$devs)"; return; }
    fi
    local t; t="$(awk '/^Loop time/{n++; if (n==2) printf "%.6g", $4/$9}' "$o")"
    # the NVE run's end-of-run breakdown (the last one in the output), seconds per call
    local brk; brk="$(awk '/pair sezm timing \(end of run\)/{f=b=cf=cr=g=mb="-"}
      /^ *engine forward/{f=$3} /^ *engine backward/{b=$3} /^ *comm forward/{cf=$3} /^ *comm reverse/{cr=$3}
      /^ *ghost staging/{g=$3; for (i=1;i<=NF;i++) if ($(i+1)=="MB") mb=$i}
      END{printf "%s\t%s\t%s\t%s\t%s\t%s", f, b, cf, cr, g, mb}' "$o")"
    [ -n "$t" ] || { result FAIL "$name" "no NVE loop time in the output"; return; }
    # efficiency against the fewest ranks of this series that ran (weak: t0 / t; strong: p0 t0 / (p t))
    [ -n "${base_t[$key]:-}" ] || { base_t[$key]="$t"; base_p[$key]="$np"; }
    local eff; eff="$(awk -v k="$kind" -v t0="${base_t[$key]}" -v p0="${base_p[$key]}" -v t="$t" -v p="$np" \
      'BEGIN{e = (k == "weak") ? t0 / t : p0 * t0 / (p * t); printf "%.3f", e}')"
    printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$kind" "$nref" "$mode" "$np" "$atoms" "$t" "$eff" "$brk" >> "$tsv"
    result PASS "$name" "$atoms atoms on $np rank(s), mode $mode: $t s per step, efficiency $eff (against ${base_p[$key]} rank(s));" \
      "engine fwd/bwd, comm fwd/rev, staging s per call: $(tr '\t' ' ' <<< "$brk")"
  }
  for mode in ${SEZM_SCALING_MODES:-$modes_def}; do
    for n in ${SEZM_SCALING_WEAK-$weak_def}; do
      c0="$(cells "$n")"; [ -n "$c0" ] || { result FAIL "scaling weak $n" "$n is not 8 c^3 atoms"; continue; }
      for np in $sranks; do
        k=0; q="$np"; while [ "$q" -gt 1 ]; do q=$(( q / 2 )); k=$(( k + 1 )); done
        [ $(( 1 << k )) = "$np" ] || { result FAIL "scaling weak $n p$np" "ranks must be a power of two"; continue; }
        run_scaling weak "$n" "$mode" "$np" $(( c0 << ((k + 2) / 3) )) $(( c0 << ((k + 1) / 3) )) $(( c0 << (k / 3) ))
      done
    done
    for n in ${SEZM_SCALING_STRONG-$strong_def}; do
      c="$(cells "$n")"; [ -n "$c" ] || { result FAIL "scaling strong $n" "$n is not 8 c^3 atoms"; continue; }
      for np in $sranks; do run_scaling strong "$n" "$mode" "$np" "$c" "$c" "$c"; done
    done
  done
  say ""; say "scaling table (seconds per NVE step; engine, comm and staging: seconds per force call, max over ranks):"
  column -t -s $'\t' "$tsv" 2>/dev/null | tee -a "$summary" || tee -a "$summary" < "$tsv"
fi

# ------------------------------------------------------------------ drift
if want drift; then
  section "drift: NVE on $dev, 1 rank"
  part_log="$work/drift.log"; : > "$part_log"
  every="${SEZM_DRIFT_EVERY:-100}"
  max_slope="${SEZM_DRIFT_MAX_SLOPE:-1e-5}"
  systems=() precs=()
  for sp in ${SEZM_DRIFT_SYSTEMS:-diamond cu}; do
    for pr in ${SEZM_DRIFT_PRECISIONS:-default}; do systems+=("$sp"); precs+=("$pr"); done
  done
  for i in "${!systems[@]}"; do
    sys="${systems[$i]}" prec="${precs[$i]}"
    tag="$sys"; [ "$prec" != default ] && tag="$sys-$prec"
    case "$sys" in
      diamond) cells="${SEZM_DRIFT_CELLS_DIAMOND:-2}" steps="${SEZM_DRIFT_STEPS_DIAMOND:-20000}" dt=0.0005 tmax="${SEZM_DRIFT_TIMEOUT_DIAMOND:-210}" ;;
      cu)      cells="${SEZM_DRIFT_CELLS_CU:-3}" steps="${SEZM_DRIFT_STEPS_CU:-10000}" dt=0.001 tmax="${SEZM_DRIFT_TIMEOUT_CU:-150}" ;;
      *) result FAIL "drift $sys" "unknown system"; continue ;;
    esac
    # fit into the budget: this run gets its share of what is left (last run: all of it)
    left=$(( budget - SECONDS - 30 ))
    nleft=$(( ${#systems[@]} - i ))
    share=$(( nleft > 1 ? left * 58 / 100 : left ))
    tlim=$(( tmax < share ? tmax : share ))
    if [ "$share" -lt 20 ]; then
      result SKIP "drift $tag" "no time left in the ${budget}s budget (SEZM_GPU_LAMMPS_BUDGET)"; continue
    fi
    say "  $tag: $cells^3 cells, dt $dt ps, $steps steps ($(awk -v s="$steps" -v d="$dt" 'BEGIN{print s*d}') ps), precision $prec, thermo every $every, LAMMPS timer timeout ${tlim}s"
    t0=$SECONDS
    if lmp "drift-$tag" 1 "$here/examples/gpu" $(( tlim + 120 )) -in in.drift -var system "$sys" -var cells "$cells" \
         -var steps "$steps" -var every "$every" -var device "$dev" -var timeout "$tlim" -var precision "$prec" \
         ${gpu_var[@]+"${gpu_var[@]}"} | tee -a "$summary"; then
      perf="$(grep -m1 '^Performance' "$work/runs/drift-$tag.out" | sed 's/^Performance: //')"
      say "  $tag: $((SECONDS - t0)) s wall; $perf"
      analyze "drift $tag ($dev)" drift "$work/runs/drift-$tag.log" --max-slope "$max_slope" --expect-steps "$steps"
    else
      result FAIL "drift $tag" "the run failed (see drift log)"
    fi
  done
fi

finish
