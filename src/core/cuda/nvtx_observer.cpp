// NVTX ranges for Nsight Systems (sluice/observe.hpp): each operation's enqueue is a range named
// by what it does in the "sluice" domain, so the profiler shows it above the CUDA calls it made
// and the kernels they launched. On with SLUICE_NVTX=1, or by itself when a tool injects NVTX;
// part of the cuda module, installed when it loads (before the first cuda context exists).

#include <nvtx3/nvToolsExt.h>

#include <cstdlib>
#include <memory>
#include <string>

#include "backends/cuda/cuda_module.hpp"
#include "sluice/observe.hpp"

namespace sluice::detail::cuda {
namespace {

class NvtxObserver final : public Observer {
 public:
  NvtxObserver() : domain_(nvtxDomainCreateA("sluice")) {}

  void issue_begin(const OpEvent& op) override {
    // The name must be NUL-terminated: OpEvent's views are not.
    name_.assign(op.what);
    name_ += " #";
    name_ += std::to_string(op.seq);
    name_ += " (";
    name_ += op.context;
    name_ += ")";
    nvtxEventAttributes_t a{};
    a.version = NVTX_VERSION;
    a.size = NVTX_EVENT_ATTRIB_STRUCT_SIZE;
    a.messageType = NVTX_MESSAGE_TYPE_ASCII;
    a.message.ascii = name_.c_str();
    nvtxDomainRangePushEx(domain_, &a);
  }
  void issue_end(const OpEvent&, const OpSpan*) override { nvtxDomainRangePop(domain_); }

 private:
  nvtxDomainHandle_t domain_;
  // Calls come with the issuing context's lock held; contexts on other threads each have their
  // own buffer.
  static thread_local std::string name_;
};

thread_local std::string NvtxObserver::name_;

const ModuleRegistration registration{[] {
  const char* on = std::getenv("SLUICE_NVTX");
  const char* injected = std::getenv("NVTX_INJECTION64_PATH");
  const bool requested = on != nullptr ? std::string(on) == "1" : injected != nullptr;
  if (requested) sluice::add_observer(std::make_shared<NvtxObserver>());
}};

}  // namespace
}  // namespace sluice::detail::cuda
