// Must NOT compile: each SLUICE_CASE is one way of launching a TypedKernel with arguments of other
// types. tests/CMakeLists.txt compiles it once per case and expects the readable message.

#include "sluice/kernel.hpp"

void misuse(const sluice::Context& ctx, const sluice::TypedKernel<float, float*>& kernel,
            const sluice::DeviceBuffer<float>& y, const sluice::DeviceBuffer<int>& yi) {
#if SLUICE_CASE == 1
  kernel.launch(ctx, 1, 1, 42.5, y.data());  // a double for a float parameter
#elif SLUICE_CASE == 2
  kernel.launch(ctx, 1, 1, 42.5f);  // too few arguments
#elif SLUICE_CASE == 3
  kernel.launch(ctx, 1, 1, 42.5f, y);  // a buffer without read/write
#elif SLUICE_CASE == 4
  kernel.launch(ctx, 1, 1, 42.5f, sluice::write(yi));  // a buffer of int for float*
#else
  kernel.launch(ctx, 1, 1, 42.5f, sluice::write(y));  // the control: this one compiles
  (void)yi;
#endif
}
