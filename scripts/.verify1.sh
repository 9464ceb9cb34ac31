set -u
rm -rf build-gpu
BUDGET=290 OUT=$OUT scripts/gpu-lazy build test blas >/dev/null 2>&1
grep -E "=====.*exit|PASSED|FAILED" $OUT/gpu-lazy.log | head -20
cat $OUT/blas.txt 2>/dev/null | head -40
export LD_LIBRARY_PATH=$PWD/.deps/lib/x86_64-linux-gnu:$PWD/.deps/lib/x86_64-linux-gnu/openblas-pthread
source scripts/gpu-compilers
cmake --build build-gpu -j16 --target sluice_tests sluice_bench_graph > $OUT/b2.log 2>&1; echo "build2 rc=$?"; tail -3 $OUT/b2.log
SLUICE_TEST_BACKENDS=cuda timeout 100 build-gpu/tests/sluice_tests --gtest_filter='*ReplayBatches*:*BatchTable*:*GraphBatches*:*Replay*:*GraphTest*' --gtest_brief=1 > $OUT/graphtests.log 2>&1; echo "graph tests rc=$?"; grep -E "FAILED|PASSED|SKIPPED" $OUT/graphtests.log | head -20
SLUICE_TEST_BACKENDS=cuda SLUICE_UNDER_SANITIZER=memcheck timeout 60 /usr/local/cuda/bin/compute-sanitizer --tool memcheck --error-exitcode 1 build-gpu/tests/sluice_tests --gtest_filter='*ReplayBatches*/cuda:*GraphBatches*/cuda' --gtest_brief=1 > $OUT/memcheck.log 2>&1; echo "memcheck rc=$?"; grep -E "ERROR SUMMARY|PASSED|FAILED" $OUT/memcheck.log | tail -3
timeout 80 build-gpu/bench/graph/sluice_bench_graph --benchmark_filter='(EagerBody|ReplayBody.*|LaunchBody.*)/1' --benchmark_repetitions=3 --benchmark_report_aggregates_only=true 2>&1 | grep median
