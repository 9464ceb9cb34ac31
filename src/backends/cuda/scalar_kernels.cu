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
#include <type_traits>

#include "backends/cuda/cuda_stream.hpp"
#include "backends/cuda/scalar_kernels.hpp"

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

template <class T>
struct tag {
  using type = T;
};

using c32 = ::cuda::std::complex<float>;
using c64 = ::cuda::std::complex<double>;

template <class T>
struct is_complex {
  static constexpr bool value = false;
};
template <class R>
struct is_complex<::cuda::std::complex<R>> {
  static constexpr bool value = true;
};
template <class T>
struct is_integer {
  static constexpr bool value = false;
};
template <>
struct is_integer<std::int32_t> {
  static constexpr bool value = true;
};
template <>
struct is_integer<std::int64_t> {
  static constexpr bool value = true;
};
template <class T>
struct unsigned_of;
template <>
struct unsigned_of<std::int32_t> {
  using type = std::uint32_t;
};
template <>
struct unsigned_of<std::int64_t> {
  using type = std::uint64_t;
};
template <class T>
struct real_of {
  using type = T;
};
template <class R>
struct real_of<::cuda::std::complex<R>> {
  using type = R;
};

template <class T>
__device__ T get(const ScalarValue& v) {
  T x;
  memcpy(&x, v.bytes, sizeof(T));
  return x;
}

template <class T>
__device__ ScalarValue put(const T& x) {
  ScalarValue v;
  memset(v.bytes, 0, sizeof v.bytes);
  memcpy(v.bytes, &x, sizeof(T));
  return v;
}

__device__ ScalarValue boolean(bool b) {
  return put(static_cast<std::int32_t>(b));
}

template <class F>
__device__ ScalarValue visit_kind(ScalarKind k, F&& f) {
  switch (k) {
    case ScalarKind::i32:
      return f(tag<std::int32_t>{});
    case ScalarKind::i64:
      return f(tag<std::int64_t>{});
    case ScalarKind::f32:
      return f(tag<float>{});
    case ScalarKind::f64:
      return f(tag<double>{});
    case ScalarKind::c32:
      return f(tag<c32>{});
    case ScalarKind::c64:
      return f(tag<c64>{});
  }
  return ScalarValue{};
}

// Correctly rounded real arithmetic, never contracted.
__device__ float add(float a, float b) {
  return __fadd_rn(a, b);
}
__device__ double add(double a, double b) {
  return __dadd_rn(a, b);
}
__device__ float sub(float a, float b) {
  return __fsub_rn(a, b);
}
__device__ double sub(double a, double b) {
  return __dsub_rn(a, b);
}
__device__ float mul(float a, float b) {
  return __fmul_rn(a, b);
}
__device__ double mul(double a, double b) {
  return __dmul_rn(a, b);
}
__device__ float quo(float a, float b) {
  return __fdiv_rn(a, b);
}
__device__ double quo(double a, double b) {
  return __ddiv_rn(a, b);
}
__device__ float root(float a) {
  return __fsqrt_rn(a);
}
__device__ double root(double a) {
  return __dsqrt_rn(a);
}

__device__ float m_exp(float a) {
  return expf(a);
}
__device__ double m_exp(double a) {
  return ::exp(a);
}
__device__ float m_log(float a) {
  return logf(a);
}
__device__ double m_log(double a) {
  return ::log(a);
}
__device__ float m_sin(float a) {
  return sinf(a);
}
__device__ double m_sin(double a) {
  return ::sin(a);
}
__device__ float m_cos(float a) {
  return cosf(a);
}
__device__ double m_cos(double a) {
  return ::cos(a);
}
__device__ float m_tan(float a) {
  return tanf(a);
}
__device__ double m_tan(double a) {
  return ::tan(a);
}
__device__ float m_pow(float a, float b) {
  return powf(a, b);
}
__device__ double m_pow(double a, double b) {
  return ::pow(a, b);
}
__device__ float m_abs(float a) {
  return fabsf(a);
}
__device__ double m_abs(double a) {
  return ::fabs(a);
}

template <class From, class To>
struct convertible {
  static constexpr bool value =
      !(is_complex<From>::value && !is_complex<To>::value) &&
      !(!is_integer<From>::value && !is_complex<From>::value && is_integer<To>::value);
};

template <class From>
__device__ ScalarValue convert(ScalarKind to, const From& x) {
  return visit_kind(to, [&](auto t) {
    using To = typename decltype(t)::type;
    if constexpr (!convertible<From, To>::value) {
      return ScalarValue{};
    } else if constexpr (is_complex<To>::value) {
      using R = typename real_of<To>::type;
      if constexpr (is_complex<From>::value) {
        return put(To(static_cast<R>(x.real()), static_cast<R>(x.imag())));
      } else {
        return put(To(static_cast<R>(x), R(0)));
      }
    } else {
      return put(static_cast<To>(x));
    }
  });
}

template <class T>
__device__ ScalarValue unary(const ScalarInstr& in, const T& x) {
  if (in.op == ScalarOp::convert) return convert(in.kind, x);
  if constexpr (is_integer<T>::value) {
    using U = typename unsigned_of<T>::type;
    switch (in.op) {
      case ScalarOp::neg:
        return put(static_cast<T>(U(0) - static_cast<U>(x)));
      case ScalarOp::abs:
        return put(x < 0 ? static_cast<T>(U(0) - static_cast<U>(x)) : x);
      case ScalarOp::conj:
      case ScalarOp::real:
        return put(x);
      case ScalarOp::imag:
        return put(T(0));
      default:
        return ScalarValue{};
    }
  } else if constexpr (is_complex<T>::value) {
    using R = typename real_of<T>::type;
    switch (in.op) {
      case ScalarOp::neg:
        return put(T(-x.real(), -x.imag()));
      case ScalarOp::abs:
        return put(::cuda::std::abs(x));
      case ScalarOp::sqrt:
        return put(::cuda::std::sqrt(x));
      case ScalarOp::exp:
        return put(::cuda::std::exp(x));
      case ScalarOp::log:
        return put(::cuda::std::log(x));
      case ScalarOp::sin:
        return put(::cuda::std::sin(x));
      case ScalarOp::cos:
        return put(::cuda::std::cos(x));
      case ScalarOp::tan:
        return put(::cuda::std::tan(x));
      case ScalarOp::conj:
        return put(T(x.real(), -x.imag()));
      case ScalarOp::real:
        return put(R(x.real()));
      case ScalarOp::imag:
        return put(R(x.imag()));
      default:
        return ScalarValue{};
    }
  } else {
    switch (in.op) {
      case ScalarOp::neg:
        return put(-x);
      case ScalarOp::abs:
        return put(m_abs(x));
      case ScalarOp::sqrt:
        return put(root(x));
      case ScalarOp::exp:
        return put(m_exp(x));
      case ScalarOp::log:
        return put(m_log(x));
      case ScalarOp::sin:
        return put(m_sin(x));
      case ScalarOp::cos:
        return put(m_cos(x));
      case ScalarOp::tan:
        return put(m_tan(x));
      case ScalarOp::conj:
      case ScalarOp::real:
        return put(x);
      case ScalarOp::imag:
        return put(T(0));
      default:
        return ScalarValue{};
    }
  }
}

template <class T>
__device__ ScalarValue integer_binary(ScalarOp op, T a, T b) {
  using U = typename unsigned_of<T>::type;
  const U ua = static_cast<U>(a), ub = static_cast<U>(b);
  switch (op) {
    case ScalarOp::add:
      return put(static_cast<T>(ua + ub));
    case ScalarOp::sub:
      return put(static_cast<T>(ua - ub));
    case ScalarOp::mul:
      return put(static_cast<T>(ua * ub));
    case ScalarOp::div:
      if (b == 0) return put(T(0));
      if (b == T(-1)) return put(static_cast<T>(U(0) - ua));  // wraps for MIN / -1
      return put(static_cast<T>(a / b));
    case ScalarOp::min:
      return put(b < a ? b : a);
    case ScalarOp::max:
      return put(a < b ? b : a);
    default:
      return ScalarValue{};
  }
}

// Real arithmetic, and complex with complex or real operands as C++ defines it: component-wise
// where one side is real (z * 2.0 is (x * 2, y * 2)), full complex operations otherwise.
template <class T>
__device__ T d_add(T a, T b) {
  if constexpr (is_complex<T>::value) {
    return T(add(a.real(), b.real()), add(a.imag(), b.imag()));
  } else {
    return add(a, b);
  }
}
template <class R>
__device__ ::cuda::std::complex<R> d_add(::cuda::std::complex<R> a, R b) {
  return {add(a.real(), b), a.imag()};
}
template <class R>
__device__ ::cuda::std::complex<R> d_add(R a, ::cuda::std::complex<R> b) {
  return {add(b.real(), a), b.imag()};
}
template <class T>
__device__ T d_sub(T a, T b) {
  if constexpr (is_complex<T>::value) {
    return T(sub(a.real(), b.real()), sub(a.imag(), b.imag()));
  } else {
    return sub(a, b);
  }
}
template <class R>
__device__ ::cuda::std::complex<R> d_sub(::cuda::std::complex<R> a, R b) {
  return {sub(a.real(), b), a.imag()};
}
template <class R>
__device__ ::cuda::std::complex<R> d_sub(R a, ::cuda::std::complex<R> b) {
  return {add(-b.real(), a), -b.imag()};  // libstdc++: r = -b; r += a
}
template <class T>
__device__ T d_mul(T a, T b) {
  if constexpr (is_complex<T>::value) {
    return a * b;
  } else {
    return mul(a, b);
  }
}
template <class R>
__device__ ::cuda::std::complex<R> d_mul(::cuda::std::complex<R> a, R b) {
  return {mul(a.real(), b), mul(a.imag(), b)};
}
template <class R>
__device__ ::cuda::std::complex<R> d_mul(R a, ::cuda::std::complex<R> b) {
  return {mul(b.real(), a), mul(b.imag(), a)};
}
template <class T>
__device__ T d_div(T a, T b) {
  if constexpr (is_complex<T>::value) {
    return a / b;
  } else {
    return quo(a, b);
  }
}
template <class R>
__device__ ::cuda::std::complex<R> d_div(::cuda::std::complex<R> a, R b) {
  return {quo(a.real(), b), quo(a.imag(), b)};
}
template <class R>
__device__ ::cuda::std::complex<R> d_div(R a, ::cuda::std::complex<R> b) {
  return ::cuda::std::complex<R>(a, R(0)) / b;
}
template <class A, class B>
__device__ auto d_pow(A a, B b) {
  if constexpr (is_complex<A>::value || is_complex<B>::value) {
    return ::cuda::std::pow(a, b);
  } else {
    return m_pow(a, b);
  }
}
template <class A, class B>
__device__ bool d_eq(A a, B b) {
  if constexpr (is_complex<A>::value && is_complex<B>::value) {
    return a.real() == b.real() && a.imag() == b.imag();
  } else if constexpr (is_complex<A>::value) {
    return a.real() == b && a.imag() == decltype(b)(0);
  } else if constexpr (is_complex<B>::value) {
    return a == b.real() && b.imag() == decltype(a)(0);
  } else {
    return a == b;
  }
}

template <class A, class B>
__device__ ScalarValue binary(ScalarOp op, const A& a, const B& b) {
  switch (op) {
    case ScalarOp::eq:
      return boolean(d_eq(a, b));
    case ScalarOp::ne:
      return boolean(!d_eq(a, b));
    default:
      break;
  }
  if constexpr (!is_complex<A>::value && !is_complex<B>::value) {
    switch (op) {
      case ScalarOp::lt:
        return boolean(a < b);
      case ScalarOp::le:
        return boolean(a <= b);
      case ScalarOp::gt:
        return boolean(a > b);
      case ScalarOp::ge:
        return boolean(a >= b);
      default:
        break;
    }
  }
  if constexpr (is_integer<A>::value) {
    return integer_binary(op, a, b);
  } else {
    switch (op) {
      case ScalarOp::add:
        return put(d_add(a, b));
      case ScalarOp::sub:
        return put(d_sub(a, b));
      case ScalarOp::mul:
        return put(d_mul(a, b));
      case ScalarOp::div:
        return put(d_div(a, b));
      case ScalarOp::pow:
        return put(d_pow(a, b));
      default:
        break;
    }
    if constexpr (!is_complex<A>::value && !is_complex<B>::value) {
      switch (op) {
        case ScalarOp::min:
          return put(b < a ? b : a);
        case ScalarOp::max:
          return put(a < b ? b : a);
        default:
          break;
      }
    }
    return ScalarValue{};
  }
}

template <class A, class B>
struct valid_pair {
  static constexpr bool value =
      std::is_same_v<A, B> ||
      (is_complex<A>::value && std::is_same_v<typename real_of<A>::type, B>) ||
      (is_complex<B>::value && std::is_same_v<typename real_of<B>::type, A>);
};

__device__ ScalarValue apply(const ScalarInstr& in, const ScalarValue& a, const ScalarValue& b) {
  if (in.op >= ScalarOp::convert && in.op <= ScalarOp::imag) {
    return visit_kind(in.ka, [&](auto ta) {
      using A = typename decltype(ta)::type;
      return unary(in, get<A>(a));
    });
  }
  return visit_kind(in.ka, [&](auto ta) {
    using A = typename decltype(ta)::type;
    return visit_kind(in.kb, [&](auto tb) {
      using B = typename decltype(tb)::type;
      if constexpr (valid_pair<A, B>::value) {
        return binary(in.op, get<A>(a), get<B>(b));
      } else {
        return ScalarValue{};
      }
    });
  });
}

__device__ std::size_t size_of(ScalarKind k) {
  switch (k) {
    case ScalarKind::i32:
    case ScalarKind::f32:
      return 4;
    case ScalarKind::c64:
      return 16;
    default:
      return 8;
  }
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
        regs[i] = apply(in, regs[in.a], regs[in.b]);
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

}  // namespace

ScalarKernels& scalar_interpreter() {
  static CudaScalarKernels kernels;
  return kernels;
}

}  // namespace sluice::detail::cuda
