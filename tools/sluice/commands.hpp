#pragma once
// The subcommands of the `sluice` program. Each lives in its own file and adds itself to the
// parser; main.cpp runs the one that was parsed.

#include <functional>

namespace CLI {
class App;
}

namespace sluice::cli {

/// A subcommand: its parser node and what to run when it was given. `run` returns the exit code.
struct Command {
  CLI::App* app = nullptr;
  std::function<int()> run;
};

/// `sluice devices [--json]`: backends and their devices.
Command add_devices_command(CLI::App& parent);
/// `sluice demo [--device D] [--contexts N]`: contexts working concurrently, and a failure.
Command add_demo_command(CLI::App& parent);
/// `sluice solve`: one CG or TFQMR solve (tools/sluice/solve.cpp).
Command add_solve_command(CLI::App& parent);
/// `sluice bench`: the solver benchmark over stencils and sizes (tools/sluice/bench.cpp).
Command add_bench_command(CLI::App& parent);

}  // namespace sluice::cli
