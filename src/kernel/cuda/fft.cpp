// The cuda backend's FFT: cuFFT, plans made on first use and cached per context (in the
// context's extension state, destroyed with the context after its work completed).

#include <cufft.h>

#include <map>
#include <memory>
#include <string>
#include <tuple>

#include "backends/cuda/cuda_device.hpp"
#include "kernel/cuda/canned.hpp"

namespace sluice::detail::cuda {
namespace {

void ok(cufftResult r, const char* call, const OpInfo& op) {
  if (r != CUFFT_SUCCESS) [[unlikely]]
    vendor_failed(op, call, "cufftResult " + std::to_string(static_cast<int>(r)));
}

using Key = std::tuple<Precision, FftKind, int, std::int64_t, std::int64_t, std::int64_t>;

struct Plans {
  int device = -1;
  std::map<Key, cufftHandle> by_key;
  Plans() = default;
  Plans(const Plans&) = delete;
  Plans& operator=(const Plans&) = delete;
  ~Plans() {
    DeviceGuard guard(device, std::nothrow);
    for (auto& [key, h] : by_key) (void)cufftDestroy(h);
  }
};

cufftType type_of(Precision p, FftKind k) {
  const bool f = p == Precision::f32;
  switch (k) {
    case FftKind::r2c:
      return f ? CUFFT_R2C : CUFFT_D2Z;
    case FftKind::c2r:
      return f ? CUFFT_C2R : CUFFT_Z2D;
    case FftKind::c2c_forward:
    case FftKind::c2c_inverse:
      return f ? CUFFT_C2C : CUFFT_Z2Z;
  }
  return f ? CUFFT_C2C : CUFFT_Z2Z;
}

cufftHandle plan_for(std::shared_ptr<void>& slot, int device, const FftArgs& a, const OpInfo& op) {
  if (!slot) {
    auto p = std::make_shared<Plans>();
    p->device = device;
    slot = std::move(p);
  }
  auto& plans = *static_cast<Plans*>(slot.get());
  // cuFFT plans do not depend on placement (in place or not), unlike FFTW's.
  const Key key{a.precision, a.kind, a.rank, a.dims[0], a.dims[1], a.batch};
  if (auto it = plans.by_key.find(key); it != plans.by_key.end()) return it->second;
  int n[2] = {static_cast<int>(a.dims[0]), static_cast<int>(a.dims[1])};
  const int last = n[a.rank - 1];
  const int outer = a.rank == 2 ? n[0] : 1;
  const int real = outer * last, half = outer * (last / 2 + 1);
  int idist = real, odist = real;
  if (a.kind == FftKind::r2c) odist = half;
  if (a.kind == FftKind::c2r) idist = half;
  cufftHandle h = 0;
  ok(cufftPlanMany(&h, a.rank, n, nullptr, 1, idist, nullptr, 1, odist,
                   type_of(a.precision, a.kind), static_cast<int>(a.batch)),
     "cufftPlanMany", op);
  plans.by_key.emplace(key, h);
  return h;
}

class CudaFft final : public Fft {
 public:
  void execute(Stream& stream, std::shared_ptr<void>& slot, const FftArgs& a,
               const OpInfo& op) override {
    const int device = as_cuda_stream(stream, "fft").device();
    auto f = [&](cudaStream_t s) {
      const cufftHandle h = plan_for(slot, device, a, op);
      ok(cufftSetStream(h, s), "cufftSetStream", op);
      void* in = const_cast<void*>(a.in);
      const int dir = a.kind == FftKind::c2c_inverse ? CUFFT_INVERSE : CUFFT_FORWARD;
      if (a.precision == Precision::f32) {
        switch (a.kind) {
          case FftKind::c2c_forward:
          case FftKind::c2c_inverse:
            ok(cufftExecC2C(h, static_cast<cufftComplex*>(in), static_cast<cufftComplex*>(a.out),
                            dir),
               "cufftExecC2C", op);
            break;
          case FftKind::r2c:
            ok(cufftExecR2C(h, static_cast<cufftReal*>(in), static_cast<cufftComplex*>(a.out)),
               "cufftExecR2C", op);
            break;
          case FftKind::c2r:
            ok(cufftExecC2R(h, static_cast<cufftComplex*>(in), static_cast<cufftReal*>(a.out)),
               "cufftExecC2R", op);
            break;
        }
      } else {
        switch (a.kind) {
          case FftKind::c2c_forward:
          case FftKind::c2c_inverse:
            ok(cufftExecZ2Z(h, static_cast<cufftDoubleComplex*>(in),
                            static_cast<cufftDoubleComplex*>(a.out), dir),
               "cufftExecZ2Z", op);
            break;
          case FftKind::r2c:
            ok(cufftExecD2Z(h, static_cast<cufftDoubleReal*>(in),
                            static_cast<cufftDoubleComplex*>(a.out)),
               "cufftExecD2Z", op);
            break;
          case FftKind::c2r:
            ok(cufftExecZ2D(h, static_cast<cufftDoubleComplex*>(in),
                            static_cast<cufftDoubleReal*>(a.out)),
               "cufftExecZ2D", op);
            break;
        }
      }
    };
    run_on(stream, op, f);
  }
};

}  // namespace

Fft& canned_fft() {
  static CudaFft f;
  return f;
}

}  // namespace sluice::detail::cuda
