// The cuda backend's BLAS: cuBLAS through the context's own handle (bound to its stream).

#include <cublas_v2.h>

#include "kernel/cuda/canned.hpp"

namespace sluice::detail::cuda {
namespace {

void ok(cublasStatus_t st, const char* call, const OpInfo& op) {
  if (st != CUBLAS_STATUS_SUCCESS) [[unlikely]]
    vendor_failed(op, call, cublasGetStatusName(st));
}

cublasOperation_t trans(bool t) {
  return t ? CUBLAS_OP_T : CUBLAS_OP_N;
}

int i32(std::int64_t v) {
  return static_cast<int>(v);  // checked to fit by the caller
}

/// Sets the handle's pointer mode for one call and restores the user's afterwards (the handle is
/// shared with sluice::cuda::blas_handle users).
class PointerMode {
 public:
  PointerMode(cublasHandle_t h, cublasPointerMode_t mode, const OpInfo& op) : h_(h) {
    ok(cublasGetPointerMode(h, &old_), "cublasGetPointerMode", op);
    if (old_ != mode) ok(cublasSetPointerMode(h, mode), "cublasSetPointerMode", op);
  }
  ~PointerMode() { (void)cublasSetPointerMode(h_, old_); }
  PointerMode(const PointerMode&) = delete;
  PointerMode& operator=(const PointerMode&) = delete;

 private:
  cublasHandle_t h_;
  cublasPointerMode_t old_ = CUBLAS_POINTER_MODE_HOST;
};

cublasHandle_t handle(Stream& s) {
  return as_cuda_stream(s, "blas").blas();
}

class CudaBlas final : public Blas {
 public:
  void gemm(Stream& stream, const BlasGemmArgs& a, const OpInfo& op) override {
    cublasHandle_t h = handle(stream);
    auto f = [&](cudaStream_t) {
      PointerMode mode(h, CUBLAS_POINTER_MODE_HOST, op);
      const auto ta = trans(a.trans_a), tb = trans(a.trans_b);
      if (a.precision == Precision::f32) {
        const float alpha = static_cast<float>(a.alpha), beta = static_cast<float>(a.beta);
        const auto* A = static_cast<const float*>(a.a);
        const auto* B = static_cast<const float*>(a.b);
        auto* C = static_cast<float*>(a.c);
        if (a.batch == 1) {
          ok(cublasSgemm(h, ta, tb, i32(a.m), i32(a.n), i32(a.k), &alpha, A, i32(a.lda), B,
                         i32(a.ldb), &beta, C, i32(a.ldc)),
             "cublasSgemm", op);
        } else {
          ok(cublasSgemmStridedBatched(h, ta, tb, i32(a.m), i32(a.n), i32(a.k), &alpha, A,
                                       i32(a.lda), a.stride_a, B, i32(a.ldb), a.stride_b, &beta, C,
                                       i32(a.ldc), a.stride_c, i32(a.batch)),
             "cublasSgemmStridedBatched", op);
        }
      } else {
        const auto* A = static_cast<const double*>(a.a);
        const auto* B = static_cast<const double*>(a.b);
        auto* C = static_cast<double*>(a.c);
        if (a.batch == 1) {
          ok(cublasDgemm(h, ta, tb, i32(a.m), i32(a.n), i32(a.k), &a.alpha, A, i32(a.lda), B,
                         i32(a.ldb), &a.beta, C, i32(a.ldc)),
             "cublasDgemm", op);
        } else {
          ok(cublasDgemmStridedBatched(h, ta, tb, i32(a.m), i32(a.n), i32(a.k), &a.alpha, A,
                                       i32(a.lda), a.stride_a, B, i32(a.ldb), a.stride_b, &a.beta,
                                       C, i32(a.ldc), a.stride_c, i32(a.batch)),
             "cublasDgemmStridedBatched", op);
        }
      }
    };
    run_on(stream, op, f);
  }

  void gemv(Stream& stream, const BlasGemvArgs& a, const OpInfo& op) override {
    cublasHandle_t h = handle(stream);
    auto f = [&](cudaStream_t) {
      PointerMode mode(h, CUBLAS_POINTER_MODE_HOST, op);
      if (a.precision == Precision::f32) {
        const float alpha = static_cast<float>(a.alpha), beta = static_cast<float>(a.beta);
        ok(cublasSgemv(h, trans(a.trans), i32(a.m), i32(a.n), &alpha,
                       static_cast<const float*>(a.a), i32(a.lda), static_cast<const float*>(a.x),
                       1, &beta, static_cast<float*>(a.y), 1),
           "cublasSgemv", op);
      } else {
        ok(cublasDgemv(h, trans(a.trans), i32(a.m), i32(a.n), &a.alpha,
                       static_cast<const double*>(a.a), i32(a.lda), static_cast<const double*>(a.x),
                       1, &a.beta, static_cast<double*>(a.y), 1),
           "cublasDgemv", op);
      }
    };
    run_on(stream, op, f);
  }

  void axpy(Stream& stream, const BlasVecArgs& a, const OpInfo& op) override {
    cublasHandle_t h = handle(stream);
    auto f = [&](cudaStream_t) {
      PointerMode mode(h, CUBLAS_POINTER_MODE_HOST, op);
      if (a.precision == Precision::f32) {
        const float alpha = static_cast<float>(a.alpha);
        ok(cublasSaxpy(h, i32(a.n), &alpha, static_cast<const float*>(a.x), 1,
                       static_cast<float*>(a.y), 1),
           "cublasSaxpy", op);
      } else {
        ok(cublasDaxpy(h, i32(a.n), &a.alpha, static_cast<const double*>(a.x), 1,
                       static_cast<double*>(a.y), 1),
           "cublasDaxpy", op);
      }
    };
    run_on(stream, op, f);
  }

  void dot(Stream& stream, const BlasVecArgs& a, const OpInfo& op) override {
    cublasHandle_t h = handle(stream);
    auto f = [&](cudaStream_t) {
      PointerMode mode(h, CUBLAS_POINTER_MODE_DEVICE, op);  // the result stays on the device
      if (a.precision == Precision::f32) {
        ok(cublasSdot(h, i32(a.n), static_cast<const float*>(a.x), 1,
                      static_cast<const float*>(a.y), 1, static_cast<float*>(a.result)),
           "cublasSdot", op);
      } else {
        ok(cublasDdot(h, i32(a.n), static_cast<const double*>(a.x), 1,
                      static_cast<const double*>(a.y), 1, static_cast<double*>(a.result)),
           "cublasDdot", op);
      }
    };
    run_on(stream, op, f);
  }

  void nrm2(Stream& stream, const BlasVecArgs& a, const OpInfo& op) override {
    cublasHandle_t h = handle(stream);
    auto f = [&](cudaStream_t) {
      PointerMode mode(h, CUBLAS_POINTER_MODE_DEVICE, op);
      if (a.precision == Precision::f32) {
        ok(cublasSnrm2(h, i32(a.n), static_cast<const float*>(a.x), 1,
                       static_cast<float*>(a.result)),
           "cublasSnrm2", op);
      } else {
        ok(cublasDnrm2(h, i32(a.n), static_cast<const double*>(a.x), 1,
                       static_cast<double*>(a.result)),
           "cublasDnrm2", op);
      }
    };
    run_on(stream, op, f);
  }

  void scal(Stream& stream, const BlasVecArgs& a, const OpInfo& op) override {
    cublasHandle_t h = handle(stream);
    auto f = [&](cudaStream_t) {
      PointerMode mode(h, CUBLAS_POINTER_MODE_HOST, op);
      if (a.precision == Precision::f32) {
        const float alpha = static_cast<float>(a.alpha);
        ok(cublasSscal(h, i32(a.n), &alpha, static_cast<float*>(a.y), 1), "cublasSscal", op);
      } else {
        ok(cublasDscal(h, i32(a.n), &a.alpha, static_cast<double*>(a.y), 1), "cublasDscal", op);
      }
    };
    run_on(stream, op, f);
  }
};

}  // namespace

Blas& canned_blas() {
  static CudaBlas b;
  return b;
}

}  // namespace sluice::detail::cuda
