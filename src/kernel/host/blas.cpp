// The host backend's BLAS: OpenBLAS through its CBLAS interface, each call one host task.

#include <cblas.h>

#include "kernel/host/canned.hpp"

namespace sluice::detail::host {
namespace {

CBLAS_TRANSPOSE trans(bool t) {
  return t ? CblasTrans : CblasNoTrans;
}

int i32(std::int64_t v) {
  return static_cast<int>(v);  // checked to fit by the caller
}

class HostBlas final : public Blas {
 public:
  void gemm(Stream& stream, const BlasGemmArgs& args, const OpInfo& op) override {
    stream.host_task(
        [a = args] {
          for (std::int64_t i = 0; i < a.batch; ++i) {
            if (a.precision == Precision::f32) {
              cblas_sgemm(CblasColMajor, trans(a.trans_a), trans(a.trans_b), i32(a.m), i32(a.n),
                          i32(a.k), static_cast<float>(a.alpha),
                          static_cast<const float*>(a.a) + i * a.stride_a, i32(a.lda),
                          static_cast<const float*>(a.b) + i * a.stride_b, i32(a.ldb),
                          static_cast<float>(a.beta), static_cast<float*>(a.c) + i * a.stride_c,
                          i32(a.ldc));
            } else {
              cblas_dgemm(CblasColMajor, trans(a.trans_a), trans(a.trans_b), i32(a.m), i32(a.n),
                          i32(a.k), a.alpha, static_cast<const double*>(a.a) + i * a.stride_a,
                          i32(a.lda), static_cast<const double*>(a.b) + i * a.stride_b, i32(a.ldb),
                          a.beta, static_cast<double*>(a.c) + i * a.stride_c, i32(a.ldc));
            }
          }
        },
        op);
  }

  void gemv(Stream& stream, const BlasGemvArgs& args, const OpInfo& op) override {
    stream.host_task(
        [a = args] {
          if (a.precision == Precision::f32) {
            cblas_sgemv(CblasColMajor, trans(a.trans), i32(a.m), i32(a.n),
                        static_cast<float>(a.alpha), static_cast<const float*>(a.a), i32(a.lda),
                        static_cast<const float*>(a.x), 1, static_cast<float>(a.beta),
                        static_cast<float*>(a.y), 1);
          } else {
            cblas_dgemv(CblasColMajor, trans(a.trans), i32(a.m), i32(a.n), a.alpha,
                        static_cast<const double*>(a.a), i32(a.lda),
                        static_cast<const double*>(a.x), 1, a.beta, static_cast<double*>(a.y), 1);
          }
        },
        op);
  }

  void axpy(Stream& stream, const BlasVecArgs& args, const OpInfo& op) override {
    stream.host_task(
        [a = args] {
          if (a.precision == Precision::f32) {
            cblas_saxpy(i32(a.n), static_cast<float>(a.alpha), static_cast<const float*>(a.x), 1,
                        static_cast<float*>(a.y), 1);
          } else {
            cblas_daxpy(i32(a.n), a.alpha, static_cast<const double*>(a.x), 1,
                        static_cast<double*>(a.y), 1);
          }
        },
        op);
  }

  void dot(Stream& stream, const BlasVecArgs& args, const OpInfo& op) override {
    stream.host_task(
        [a = args] {
          if (a.precision == Precision::f32) {
            *static_cast<float*>(a.result) = cblas_sdot(i32(a.n), static_cast<const float*>(a.x), 1,
                                                        static_cast<const float*>(a.y), 1);
          } else {
            *static_cast<double*>(a.result) = cblas_ddot(i32(a.n), static_cast<const double*>(a.x),
                                                         1, static_cast<const double*>(a.y), 1);
          }
        },
        op);
  }

  void nrm2(Stream& stream, const BlasVecArgs& args, const OpInfo& op) override {
    stream.host_task(
        [a = args] {
          if (a.precision == Precision::f32) {
            *static_cast<float*>(a.result) =
                cblas_snrm2(i32(a.n), static_cast<const float*>(a.x), 1);
          } else {
            *static_cast<double*>(a.result) =
                cblas_dnrm2(i32(a.n), static_cast<const double*>(a.x), 1);
          }
        },
        op);
  }

  void scal(Stream& stream, const BlasVecArgs& args, const OpInfo& op) override {
    stream.host_task(
        [a = args] {
          if (a.precision == Precision::f32) {
            cblas_sscal(i32(a.n), static_cast<float>(a.alpha), static_cast<float*>(a.y), 1);
          } else {
            cblas_dscal(i32(a.n), a.alpha, static_cast<double*>(a.y), 1);
          }
        },
        op);
  }
};

}  // namespace

Blas& canned_blas() {
  static HostBlas b;
  return b;
}

}  // namespace sluice::detail::host
