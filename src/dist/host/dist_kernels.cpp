// The host backend's DistKernels (sluice/ext/dist.hpp): the finalize step and the packing loop
// as host tasks of the context's queue, and the host engine.

#include "dist/host/dist_kernels.hpp"

#include "dist/combine.hpp"
#include "dist/host/host_engine.hpp"
#include "la/ksp_logic.hpp"

using namespace sluice::detail;  // la's kernel argument types (sluice/ext/la_kernels.hpp)

namespace sluice::detail::dist {
namespace {

class HostDistKernels final : public DistKernels {
 public:
  void finalize(Stream& stream, const DistFinalizeArgs& args, const OpInfo& op) override {
    stream.host_task(
        [a = args] {
          if (!ksp_logic::guard_runs(a.state, a.tf_dx)) return;
          double sums[la_math::kMaxSums];
          dist_math::combine(a.gathered, a.ranks, a.parts, sums, a.split);
          ksp_logic::finalize(a.finalize, *a.state, sums);
        },
        op);
  }

  void gather(Stream& stream, double* dst, const double* src, const std::int32_t* index,
              std::size_t n, const OpInfo& op) override {
    stream.host_task(
        [=] {
          for (std::size_t i = 0; i < n; ++i) dst[i] = src[index[i]];
        },
        op);
  }

  std::shared_ptr<DistEngine> create_engine(const DistEngineConfig& config) override {
    return make_host_engine(config);
  }
};

}  // namespace

DistKernels& host_dist_kernels() {
  static HostDistKernels kernels;
  return kernels;
}

}  // namespace sluice::detail::dist
