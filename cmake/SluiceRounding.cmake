# The bit-equality contract: the host and cuda backends give the same bits for the la kernels,
# the solvers' scalar logic, the scalar interpreter and the RNG's transforms, because the same
# source rounds alike on both. That holds only if no compiler fuses a*b+c into one rounding where
# the other does not, so every target that compiles such code (the library, and the tests that
# compare against it) is built without contraction: -ffp-contract=off on the host compiler,
# --fmad=false for nvcc. Explicit fma() calls still fuse, on both sides. -fno-math-errno lets
# sqrt be the bare IEEE instruction (the same correctly rounded result, without the errno call).
function(sluice_exact_rounding target)
  target_compile_options(${target} PRIVATE
    $<$<COMPILE_LANG_AND_ID:CXX,GNU,Clang>:-ffp-contract=off -fno-math-errno>
    $<$<COMPILE_LANGUAGE:CUDA>:--fmad=false -Xcompiler=-ffp-contract=off,-fno-math-errno>)
endfunction()
