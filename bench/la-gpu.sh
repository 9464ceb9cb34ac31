#!/usr/bin/env bash
# The la layer on the GPU machine (../shared/GPU.md): tests, sanitizers, `sluice bench`, the JAX
# and CuPy peers, and the plots, logged under $OUT in at most 5 files:
#   la.log  bench_la.json  peers.json  plots.tgz  (and gpu-check.log from the build step)
#
#   bench/la-gpu.sh build test       # build (scripts/gpu-check), la tests on cuda and host
#   bench/la-gpu.sh memcheck         # compute-sanitizer memcheck + racecheck on the la tests
#   bench/la-gpu.sh bench peers plot # the benchmark, its peers, the plots
#
# Needs .deps/ (scripts/gpu-deps) and the test matrices in .deps/matrices (copy
# ../shared/data/matrices there before the device call; .deps travels with `carry`).
# Knobs: BENCH_ARGS (extra arguments of `sluice bench`), PEER_ARGS (of the peers script).
# shellcheck disable=SC2317  # the step functions are reached through `step`
set -uo pipefail

if [[ -n ${OUT:-} ]]; then mkdir -p "$OUT" && OUT=$(cd "$OUT" && pwd); fi
cd "$(dirname "${BASH_SOURCE[0]}")/.." || exit 2
root=$PWD
OUT=${OUT:-$root/out}
mkdir -p "$OUT"
log=$OUT/la.log
build=$root/build-gpu
cli=$build/tools/sluice/sluice
export SLUICE_MATRIX_DIR=${SLUICE_MATRIX_DIR:-$root/.deps/matrices}
failed=0

step() {
  local name=$1
  shift
  echo "===== $name: $*" | tee -a "$log"
  local start=$SECONDS
  if "$@" 2>&1 | tee -a "$log"; then
    echo "===== $name: ok in $((SECONDS - start)) s" | tee -a "$log"
  else
    echo "===== $name: FAILED in $((SECONDS - start)) s" | tee -a "$log"
    failed=1
  fi
}

la_filter='*VecTest*:*MatTest*:*KspTest*:*MixedTest*'

do_build() { OUT=$OUT scripts/gpu-check info configure build >/dev/null && tail -n 30 "$OUT/gpu-check.log"; }
do_test() {
  ls "$SLUICE_MATRIX_DIR"/*.mtx >/dev/null 2>&1 || echo "NOTE: no matrices in $SLUICE_MATRIX_DIR: real-matrix tests skip"
  SLUICE_TEST_BACKENDS=cuda,host "$build/tests/sluice_tests" --gtest_filter="$la_filter" --gtest_brief=1 &&
    "$build/examples/example_04_mixed_cg" &&
    "$cli" solve --backend cuda --stencil 2d5 --n 1024 --ksp cg --pc jacobi --mode async --repeat 5 &&
    "$cli" solve --backend cuda --stencil 2d5 --n 1024 --ksp cg --pc jacobi --mode sync --repeat 5 &&
    "$cli" solve --backend cuda --stencil 3d7 --n 128 --ksp tfqmr --mode async --repeat 5 &&
    "$cli" solve --backend cuda --matrix "$SLUICE_MATRIX_DIR/bcsstk15.mtx" --ksp cg --rtol 1e-8 --monitor --json | tail -n 25
}
do_sanitizer() {
  local cs
  cs=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
  # The long real-matrix solves are left out: under the sanitizer every kernel is slow.
  SLUICE_TEST_BACKENDS=cuda SLUICE_UNDER_SANITIZER=$1 "$cs" --tool "$1" --error-exitcode 1 \
    --report-api-errors no "$build/tests/sluice_tests" \
    --gtest_filter="$la_filter-*RealMatricesMatchPetsc*" --gtest_brief=1
}
do_bench() {
  # shellcheck disable=SC2086
  "$cli" bench --backend cuda --repeat 10 --check-sweep --json "$OUT/bench_la.json" ${BENCH_ARGS:-}
}
do_peers() {
  # shellcheck disable=SC2086
  python3 bench/peers/jax_cupy_cg.py --from "$OUT/bench_la.json" --json "$OUT/peers.json" ${PEER_ARGS:-}
}
do_plot() {
  python3 bench/plot.py "$OUT/bench_la.json" "$OUT/peers.json" --out "$OUT/plots" &&
    tar czf "$OUT/plots.tgz" -C "$OUT" plots && rm -rf "$OUT/plots"
}

steps=("$@")
[[ ${#steps[@]} -eq 0 ]] && steps=(build test memcheck bench peers plot)
for s in "${steps[@]}"; do
  case $s in
    build) step build do_build ;;
    test) step test do_test ;;
    memcheck) step memcheck do_sanitizer memcheck; step racecheck do_sanitizer racecheck ;;
    bench) step bench do_bench ;;
    peers) step peers do_peers ;;
    plot) step plot do_plot ;;
    *) echo "unknown step $s" | tee -a "$log"; failed=1 ;;
  esac
done
exit $failed
