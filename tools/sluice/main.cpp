// `sluice`: the command-line program. Subcommands live in their own files (see commands.hpp);
// `solve` and `bench` join them as the solver and benchmark layers land.

#include <fmt/core.h>
#include <CLI/CLI.hpp>

#include <cstdio>
#include <exception>
#include <vector>

#include "commands.hpp"
#include "sluice/error.hpp"

int main(int argc, char** argv) {
  CLI::App app{"sluice: device contexts that order GPU and host work", "sluice"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "sluice 0.1.0");

  const std::vector<sluice::cli::Command> commands{
      sluice::cli::add_devices_command(app),
      sluice::cli::add_demo_command(app),
      sluice::cli::add_solve_command(app),
      sluice::cli::add_bench_command(app),
  };

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 2;  // --help and --version exit 0; usage errors 2
  }

  try {
    for (const auto& command : commands) {
      if (command.app->parsed()) return command.run();
    }
  } catch (const sluice::Error& e) {
    fmt::print(stderr, "{}\n", e.what());  // the message already starts with "sluice: "
    return 1;
  } catch (const std::exception& e) {
    fmt::print(stderr, "sluice: unexpected error: {}\n", e.what());
    return 1;
  }
  return 1;
}
