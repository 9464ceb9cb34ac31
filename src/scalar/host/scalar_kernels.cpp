#include "scalar/host/scalar_kernels.hpp"

#include <algorithm>
#include <array>

#include "scalar/host_interpreter.hpp"

namespace sluice::detail::host {
namespace {

class HostScalarKernels final : public ScalarKernels {
 public:
  void run(Stream& stream, const ScalarProgramView& p, const OpInfo& op) override {
    std::array<void*, kScalarMaxInputs> inputs{};
    std::copy_n(p.inputs, std::min(p.input_count, kScalarMaxInputs), inputs.begin());
    stream.host_task(
        [keep = p.keep_alive, code = p.code, size = p.size, constants = p.constants, inputs,
         output = p.output] { scalar_interpret(code, size, constants, inputs.data(), output); },
        op);
  }
  bool host_readable() const noexcept override { return true; }
};

}  // namespace

ScalarKernels& scalar_interpreter() {
  static HostScalarKernels kernels;
  return kernels;
}

}  // namespace sluice::detail::host
