// The host backend's FFT: FFTW (double and float), plans cached per context.
//
// FFTW's planner is not thread-safe, so plans are made and destroyed under one process-wide
// mutex; executing a plan on new arrays (fftw_execute_dft and friends) is thread-safe. Plans are
// made with FFTW_ESTIMATE (which never touches the arrays, so planning may happen when the
// operation is issued, before its data exists) and FFTW_UNALIGNED (any buffer may be passed).

#include <fftw3.h>

#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <tuple>

#include "kernel/host/canned.hpp"
#include "sluice/error.hpp"

namespace sluice::detail::host {
namespace {

std::mutex& planner_mutex() {
  static std::mutex m;
  return m;
}

struct Plan {
  Precision precision;
  void* handle;  // fftw_plan or fftwf_plan
  Plan(Precision p, void* h) : precision(p), handle(h) {}
  Plan(const Plan&) = delete;
  Plan& operator=(const Plan&) = delete;
  ~Plan() {
    std::lock_guard lock(planner_mutex());
    if (precision == Precision::f32) {
      fftwf_destroy_plan(static_cast<fftwf_plan>(handle));
    } else {
      fftw_destroy_plan(static_cast<fftw_plan>(handle));
    }
  }
};

using Key = std::tuple<Precision, FftKind, int, std::int64_t, std::int64_t, std::int64_t, bool>;

struct Plans {
  std::map<Key, std::shared_ptr<Plan>> by_key;
};

template <class R, class C, class P>
struct Fftw;
template <>
struct Fftw<double, fftw_complex, fftw_plan> {
  static fftw_plan c2c(int rank, const int* n, int howmany, void* in, int dist, void* out,
                       int sign) {
    return fftw_plan_many_dft(rank, n, howmany, static_cast<fftw_complex*>(in), nullptr, 1, dist,
                              static_cast<fftw_complex*>(out), nullptr, 1, dist, sign,
                              FFTW_ESTIMATE | FFTW_UNALIGNED);
  }
  static fftw_plan r2c(int rank, const int* n, int howmany, void* in, int idist, void* out,
                       int odist) {
    return fftw_plan_many_dft_r2c(rank, n, howmany, static_cast<double*>(in), nullptr, 1, idist,
                                  static_cast<fftw_complex*>(out), nullptr, 1, odist,
                                  FFTW_ESTIMATE | FFTW_UNALIGNED);
  }
  static fftw_plan c2r(int rank, const int* n, int howmany, void* in, int idist, void* out,
                       int odist) {
    return fftw_plan_many_dft_c2r(rank, n, howmany, static_cast<fftw_complex*>(in), nullptr, 1,
                                  idist, static_cast<double*>(out), nullptr, 1, odist,
                                  FFTW_ESTIMATE | FFTW_UNALIGNED);
  }
};
template <>
struct Fftw<float, fftwf_complex, fftwf_plan> {
  static fftwf_plan c2c(int rank, const int* n, int howmany, void* in, int dist, void* out,
                        int sign) {
    return fftwf_plan_many_dft(rank, n, howmany, static_cast<fftwf_complex*>(in), nullptr, 1, dist,
                               static_cast<fftwf_complex*>(out), nullptr, 1, dist, sign,
                               FFTW_ESTIMATE | FFTW_UNALIGNED);
  }
  static fftwf_plan r2c(int rank, const int* n, int howmany, void* in, int idist, void* out,
                        int odist) {
    return fftwf_plan_many_dft_r2c(rank, n, howmany, static_cast<float*>(in), nullptr, 1, idist,
                                   static_cast<fftwf_complex*>(out), nullptr, 1, odist,
                                   FFTW_ESTIMATE | FFTW_UNALIGNED);
  }
  static fftwf_plan c2r(int rank, const int* n, int howmany, void* in, int idist, void* out,
                        int odist) {
    return fftwf_plan_many_dft_c2r(rank, n, howmany, static_cast<fftwf_complex*>(in), nullptr, 1,
                                   idist, static_cast<float*>(out), nullptr, 1, odist,
                                   FFTW_ESTIMATE | FFTW_UNALIGNED);
  }
};

template <class R, class C, class P>
void* make_plan(const FftArgs& a) {
  using F = Fftw<R, C, P>;
  const int n[2] = {static_cast<int>(a.dims[0]), static_cast<int>(a.dims[1])};
  const int last = n[a.rank - 1];
  const int outer = a.rank == 2 ? n[0] : 1;
  const int real = outer * last, half = outer * (last / 2 + 1);
  const int howmany = static_cast<int>(a.batch);
  void* in = const_cast<void*>(a.in);
  switch (a.kind) {
    case FftKind::c2c_forward:
      return F::c2c(a.rank, n, howmany, in, real, a.out, FFTW_FORWARD);
    case FftKind::c2c_inverse:
      return F::c2c(a.rank, n, howmany, in, real, a.out, FFTW_BACKWARD);
    case FftKind::r2c:
      return F::r2c(a.rank, n, howmany, in, real, a.out, half);
    case FftKind::c2r:
      return F::c2r(a.rank, n, howmany, in, half, a.out, real);
  }
  return nullptr;
}

std::shared_ptr<Plan> plan_for(std::shared_ptr<void>& slot, const FftArgs& a, const OpInfo& op) {
  if (!slot) slot = std::make_shared<Plans>();
  auto& plans = *static_cast<Plans*>(slot.get());
  const Key key{a.precision, a.kind, a.rank, a.dims[0], a.dims[1], a.batch, a.in == a.out};
  if (auto it = plans.by_key.find(key); it != plans.by_key.end()) return it->second;
  void* handle = nullptr;
  {
    std::lock_guard lock(planner_mutex());
    handle = a.precision == Precision::f32 ? make_plan<float, fftwf_complex, fftwf_plan>(a)
                                           : make_plan<double, fftw_complex, fftw_plan>(a);
  }
  if (handle == nullptr) {
    throw Error(Errc::backend_failure,
                "host: FFTW could not plan " + std::string(op.what) +
                    " for this shape and batch; try another size",
                op.where);
  }
  auto plan = std::make_shared<Plan>(a.precision, handle);
  plans.by_key.emplace(key, plan);
  return plan;
}

class HostFft final : public Fft {
 public:
  void execute(Stream& stream, std::shared_ptr<void>& slot, const FftArgs& args,
               const OpInfo& op) override {
    auto plan = plan_for(slot, args, op);
    stream.host_task(
        [a = args, plan] {
          void* in = const_cast<void*>(a.in);
          if (a.precision == Precision::f32) {
            auto p = static_cast<fftwf_plan>(plan->handle);
            switch (a.kind) {
              case FftKind::c2c_forward:
              case FftKind::c2c_inverse:
                fftwf_execute_dft(p, static_cast<fftwf_complex*>(in),
                                  static_cast<fftwf_complex*>(a.out));
                break;
              case FftKind::r2c:
                fftwf_execute_dft_r2c(p, static_cast<float*>(in),
                                      static_cast<fftwf_complex*>(a.out));
                break;
              case FftKind::c2r:
                fftwf_execute_dft_c2r(p, static_cast<fftwf_complex*>(in),
                                      static_cast<float*>(a.out));
                break;
            }
          } else {
            auto p = static_cast<fftw_plan>(plan->handle);
            switch (a.kind) {
              case FftKind::c2c_forward:
              case FftKind::c2c_inverse:
                fftw_execute_dft(p, static_cast<fftw_complex*>(in),
                                 static_cast<fftw_complex*>(a.out));
                break;
              case FftKind::r2c:
                fftw_execute_dft_r2c(p, static_cast<double*>(in),
                                     static_cast<fftw_complex*>(a.out));
                break;
              case FftKind::c2r:
                fftw_execute_dft_c2r(p, static_cast<fftw_complex*>(in),
                                     static_cast<double*>(a.out));
                break;
            }
          }
        },
        op);
  }
};

}  // namespace

Fft& canned_fft() {
  static HostFft f;
  return f;
}

}  // namespace sluice::detail::host
