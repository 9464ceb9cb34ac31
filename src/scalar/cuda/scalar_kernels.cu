// The device interpreter of scalar programs (see scalar_kernels.hpp and sluice/detail/
// scalar_format.hpp for the semantics).
//
// Real +, -, *, / and sqrt use the _rn intrinsics: correctly rounded like the host's IEEE
// operations and never contracted into FMAs, so these results equal the host backend's bit for
// bit. Libm functions (exp, log, sin, cos, tan, pow) and complex products, quotients and
// functions come from CUDA's math library and cuda::std::complex: accurate to a few ulp, but
// not the host's bits.

#include <cuda_runtime.h>
#include <cuda/std/complex>

#include <cstdint>
#include <cstring>

#include "backends/cuda/cuda_stream.hpp"
#include "backends/cuda/kernel_preload.hpp"
#include "scalar/cuda/scalar_kernels.hpp"
#include "scalar/interpreter_math.hpp"

namespace sluice::detail::cuda {
namespace {

struct Params {
  ScalarInstr code[kScalarMaxInstructions];
  ScalarValue constants[kScalarMaxConstants];
  void* inputs[kScalarMaxInputs];
  void* output;
  std::uint32_t size;
};
static_assert(sizeof(Params) <= 4096, "a scalar program must fit the 4 KB of kernel parameters");

template <class R>
using complex = ::cuda::std::complex<R>;

// The device's rounding (see scalar/interpreter_math.hpp).
struct DeviceMath {
  using c32 = complex<float>;
  using c64 = complex<double>;

  // Correctly rounded real arithmetic, never contracted.
  static __device__ float add(float a, float b) { return __fadd_rn(a, b); }
  static __device__ double add(double a, double b) { return __dadd_rn(a, b); }
  static __device__ float sub(float a, float b) { return __fsub_rn(a, b); }
  static __device__ double sub(double a, double b) { return __dsub_rn(a, b); }
  static __device__ float mul(float a, float b) { return __fmul_rn(a, b); }
  static __device__ double mul(double a, double b) { return __dmul_rn(a, b); }
  static __device__ float div(float a, float b) { return __fdiv_rn(a, b); }
  static __device__ double div(double a, double b) { return __ddiv_rn(a, b); }
  static __device__ float sqrt(float a) { return __fsqrt_rn(a); }
  static __device__ double sqrt(double a) { return __dsqrt_rn(a); }

  // Complex with complex or real operands as C++ defines it: component-wise where one side is
  // real (z * 2.0 is (x * 2, y * 2)), full complex operations otherwise.
  template <class R>
  static __device__ complex<R> add(complex<R> a, complex<R> b) {
    return {add(a.real(), b.real()), add(a.imag(), b.imag())};
  }
  template <class R>
  static __device__ complex<R> add(complex<R> a, R b) {
    return {add(a.real(), b), a.imag()};
  }
  template <class R>
  static __device__ complex<R> add(R a, complex<R> b) {
    return {add(b.real(), a), b.imag()};
  }
  template <class R>
  static __device__ complex<R> sub(complex<R> a, complex<R> b) {
    return {sub(a.real(), b.real()), sub(a.imag(), b.imag())};
  }
  template <class R>
  static __device__ complex<R> sub(complex<R> a, R b) {
    return {sub(a.real(), b), a.imag()};
  }
  template <class R>
  static __device__ complex<R> sub(R a, complex<R> b) {
    return {add(-b.real(), a), -b.imag()};  // libstdc++: r = -b; r += a
  }
  template <class R>
  static __device__ complex<R> mul(complex<R> a, complex<R> b) {
    return a * b;
  }
  template <class R>
  static __device__ complex<R> mul(complex<R> a, R b) {
    return {mul(a.real(), b), mul(a.imag(), b)};
  }
  template <class R>
  static __device__ complex<R> mul(R a, complex<R> b) {
    return {mul(b.real(), a), mul(b.imag(), a)};
  }
  template <class R>
  static __device__ complex<R> div(complex<R> a, complex<R> b) {
    return a / b;
  }
  template <class R>
  static __device__ complex<R> div(complex<R> a, R b) {
    return {div(a.real(), b), div(a.imag(), b)};
  }
  template <class R>
  static __device__ complex<R> div(R a, complex<R> b) {
    return complex<R>(a, R(0)) / b;
  }
  template <class R>
  static __device__ complex<R> sqrt(complex<R> a) {
    return ::cuda::std::sqrt(a);
  }

  // CUDA's math library, real and complex.
  template <class A, class B>
  static __device__ auto pow(A a, B b) {
    return ::cuda::std::pow(a, b);
  }
  template <class T>
  static __device__ auto abs(T a) {
    return ::cuda::std::abs(a);
  }
  template <class T>
  static __device__ T exp(T a) {
    return ::cuda::std::exp(a);
  }
  template <class T>
  static __device__ T log(T a) {
    return ::cuda::std::log(a);
  }
  template <class T>
  static __device__ T sin(T a) {
    return ::cuda::std::sin(a);
  }
  template <class T>
  static __device__ T cos(T a) {
    return ::cuda::std::cos(a);
  }
  template <class T>
  static __device__ T tan(T a) {
    return ::cuda::std::tan(a);
  }
};

__device__ std::size_t size_of(ScalarKind k) {
  switch (k) {
    case ScalarKind::i32:
    case ScalarKind::f32:
      return 4;
    case ScalarKind::i64:
    case ScalarKind::f64:
    case ScalarKind::c32:
      return 8;
    case ScalarKind::c64:
      return 16;
  }
  return 8;
}

__device__ void copy_value(void* dst, const void* src, std::size_t bytes) {
  switch (bytes) {
    case 4:
      *static_cast<std::uint32_t*>(dst) = *static_cast<const std::uint32_t*>(src);
      break;
    case 8:
      *static_cast<std::uint64_t*>(dst) = *static_cast<const std::uint64_t*>(src);
      break;
    default:
      *static_cast<uint4*>(dst) = *static_cast<const uint4*>(src);
      break;
  }
}

__global__ void __launch_bounds__(1) interpret(const __grid_constant__ Params p) {
  ScalarValue regs[kScalarMaxInstructions];
  for (std::uint32_t i = 0; i < p.size; ++i) {
    const ScalarInstr in = p.code[i];
    switch (in.op) {
      case ScalarOp::load:
        copy_value(regs[i].bytes, p.inputs[in.a], size_of(in.kind));
        break;
      case ScalarOp::constant:
        regs[i] = p.constants[in.a];
        break;
      default:
        regs[i] = scalar_math::apply<DeviceMath>(in, regs[in.a], regs[in.b]);
        break;
    }
  }
  if (p.size > 0) {
    copy_value(p.output, regs[p.size - 1].bytes, size_of(p.code[p.size - 1].kind));
  }
}

class CudaScalarKernels final : public ScalarKernels {
 public:
  void run(Stream& stream, const ScalarProgramView& v, const OpInfo& op) override {
    CudaStream& s = as_cuda_stream(stream, "scalar eval");
    Params p;  // only the used prefix of each array is read
    std::memcpy(p.code, v.code, v.size * sizeof(ScalarInstr));
    std::memcpy(p.constants, v.constants, v.constant_count * sizeof(ScalarValue));
    std::memcpy(p.inputs, v.inputs, v.input_count * sizeof(void*));
    p.output = v.output;
    p.size = v.size;
    void* args[] = {&p};
    s.launch(reinterpret_cast<const void*>(&interpret), dim3(1), dim3(1), 0, args, op);
  }
};

// Every kernel of this file, loaded ahead where one process drives several GPUs
// (backends/cuda/kernel_preload.hpp).
SLUICE_CUDA_KERNEL_FILE(interpret);

}  // namespace

ScalarKernels& scalar_interpreter() {
  static CudaScalarKernels kernels;
  return kernels;
}

}  // namespace sluice::detail::cuda
