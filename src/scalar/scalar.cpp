// Running scalar programs: misuse checks, storage, tracking, the blocking and read-back contexts.

#include <array>
#include <atomic>
#include <cstring>
#include <mutex>
#include <string>
#include <unordered_map>

#include "core/context_impl.hpp"
#include "deps/issue.hpp"
#include "deps/tracker.hpp"
#include "scalar/interpreter_math.hpp"
#include "scalar/program.hpp"
#include "sluice/error.hpp"

namespace sluice {
namespace detail {

extern std::atomic<std::uint64_t> scalar_compiled;

namespace {

std::atomic<std::uint64_t> launches{0};
std::atomic<std::uint64_t> host_reads{0};

std::string managed_name(ScalarKind kind) {
  return std::string("Managed<") + scalar_type_name(kind) + ">";
}

const Device& device_of(const ManagedCell& cell) {
  return cell.buffer.context()->device();
}

/// The blocking context of a device (reference 000, Listing 10: plain assignment). Never
/// destroyed: a context destroyed during static destruction could outlive its runtime.
Context blocking_context(const Device& device) {
  static auto* mutex = new std::mutex;
  static auto* contexts = new std::unordered_map<std::string, Context>;
  std::lock_guard lock(*mutex);
  const std::string key = device.to_string();
  auto it = contexts->find(key);
  if (it == contexts->end()) {
    it = contexts
             ->emplace(key, Context(ContextOptions{.device = device,
                                                   .kind = StreamKind::blocking,
                                                   .name = "sluice.scalar.blocking(" + key + ")"}))
             .first;
  }
  return it->second;
}

/// A context per thread and device for copying values back to the host: a thread waits only for
/// its own read, never for another thread's.
Context readback_context(const Device& device) {
  thread_local std::unordered_map<std::string, Context> contexts;
  const std::string key = device.to_string();
  auto it = contexts.find(key);
  if (it == contexts.end()) {
    it = contexts
             .emplace(key, Context(ContextOptions{.device = device,
                                                  .name = "sluice.scalar.readback(" + key + ")"}))
             .first;
  }
  return it->second;
}

void check_input(const ManagedCell& cell, ScalarKind kind, const Context& ctx, const char* what,
                 std::source_location loc) {
  if (!cell.assigned || cell.buffer.data() == nullptr) {
    throw Error(Errc::invalid_state,
                std::string(what) + " on " + ctx.name() + " reads a " + managed_name(kind) +
                    " that was never assigned (default-constructed, moved-from, or given storage "
                    "only); assign it a value first",
                loc);
  }
  if (device_of(cell) != ctx.device()) {
    throw Error(Errc::invalid_argument,
                std::string(what) + " on " + ctx.name() + " (" + ctx.device().to_string() +
                    ") reads a " + managed_name(kind) + " that lives on " +
                    device_of(cell).to_string() +
                    "; a Managed stays on the device where it was first written: evaluate on a "
                    "context of that device, or move the value over with value() and assign it "
                    "on this one",
                loc);
  }
}

void check_target(const ManagedCell& cell, ScalarKind kind, const Context& ctx, const char* what,
                  std::source_location loc) {
  if (cell.buffer.data() != nullptr && device_of(cell) != ctx.device()) {
    throw Error(Errc::invalid_argument,
                std::string(what) + " on " + ctx.name() + " (" + ctx.device().to_string() +
                    ") writes a " + managed_name(kind) + " that lives on " +
                    device_of(cell).to_string() +
                    "; a Managed stays on the device where it was first written: use a context "
                    "of that device, or assign a new Managed (eval(expr, ctx) returns one)",
                loc);
  }
}

}  // namespace

const char* scalar_type_name(ScalarKind kind) noexcept {
  switch (kind) {
    case ScalarKind::i32:
      return "std::int32_t";
    case ScalarKind::i64:
      return "std::int64_t";
    case ScalarKind::f32:
      return "float";
    case ScalarKind::f64:
      return "double";
    case ScalarKind::c32:
      return "std::complex<float>";
    case ScalarKind::c64:
      return "std::complex<double>";
  }
  return "?";
}

void scalar_run(const ProgramPtr& program, ManagedCell& target, ScalarKind kind, const Context& ctx,
                std::source_location loc) {
  static constexpr const char* what = "scalar eval";
  if (!program) {
    throw Error(Errc::invalid_state,
                "running an empty ExecutableExpression (default-constructed or moved-from); get "
                "one from sluice::compile(expr)",
                loc);
  }
  auto& c = ctx.impl();
  ScalarKernels* kernels = &c.extension<ScalarKernels>(loc);
  const auto n = static_cast<std::uint32_t>(program->inputs.size());
  std::array<void*, kScalarMaxInputs> pointers{};
  for (std::uint32_t i = 0; i < n; ++i) {
    check_input(*program->inputs[i], program->input_kinds[i], ctx, what, loc);
  }
  check_target(target, kind, ctx, what, loc);
  if (target.buffer.data() == nullptr) {
    target.buffer = RawDeviceBuffer(ctx, scalar_kind_size(kind), loc);
  }
  AccessList access;  // an input that is also the target merges into one read_write
  for (std::uint32_t i = 0; i < n; ++i) {
    pointers[i] = const_cast<void*>(access.read(program->inputs[i]->buffer));
  }
  void* output = access.write(target.buffer);

  ScalarProgramView view;
  view.code = program->code.data();
  view.size = static_cast<std::uint32_t>(program->code.size());
  view.constants = program->constants.data();
  view.constant_count = static_cast<std::uint32_t>(program->constants.size());
  view.inputs = pointers.data();
  view.input_count = n;
  view.output = output;
  view.keep_alive = program;
  issue_tracked(c, access, what, loc,
                [&](Stream& s, const OpInfo& op) { kernels->run(s, view, op); });
  target.assigned = true;
  launches.fetch_add(1, std::memory_order_relaxed);
}

void scalar_run_blocking(const ProgramPtr& program, ManagedCell& target, ScalarKind kind,
                         std::source_location loc) {
  // The device the values live on: the target's, else the first input's, else the default.
  std::optional<Device> device;
  if (target.buffer.data() != nullptr) {
    device = device_of(target);
  } else if (program) {
    for (const auto& in : program->inputs) {
      if (in->buffer.data() != nullptr) {
        device = device_of(*in);
        break;
      }
    }
  }
  scalar_run(program, target, kind, blocking_context(device ? *device : default_device()), loc);
}

void scalar_read(const ManagedCell* cell, void* out, ScalarKind kind, std::source_location loc) {
  if (cell == nullptr || !cell->assigned || cell->buffer.data() == nullptr) {
    throw Error(Errc::invalid_state,
                managed_name(kind) +
                    "::value() on a value that was never assigned (default-constructed, "
                    "moved-from, or given storage only); assign it first",
                loc);
  }
  const std::size_t bytes = scalar_kind_size(kind);
  auto& home = *cell->buffer.context();
  ScalarKernels* kernels = sluice::find_extension<ScalarKernels>(home.device().backend);
  if (kernels != nullptr && kernels->host_readable()) {
    Tracker::instance().wait_host(cell->buffer.id(), Access::read, {}, loc);
    std::memcpy(out, cell->buffer.data(), bytes);
  } else {
    // The read-back context would join a capture that is recording the value's producer.
    Tracker::instance().refuse_host_wait_if_captured(cell->buffer.id(), Access::read,
                                                     "a host wait (Managed::value())", loc);
    Context rb = readback_context(home.device());
    copy_bytes(rb, out, cell->buffer.data(), bytes, loc);
    rb.synchronize(loc);
  }
  host_reads.fetch_add(1, std::memory_order_relaxed);
}

void scalar_prepare(ManagedCell& cell, ScalarKind kind, const Context& ctx,
                    std::source_location loc) {
  check_target(cell, kind, ctx, "write_ptr", loc);
  if (cell.buffer.data() == nullptr)
    cell.buffer = RawDeviceBuffer(ctx, scalar_kind_size(kind), loc);
}

void scalar_check_read(const ManagedCell* cell, ScalarKind kind, const Context& ctx,
                       std::source_location loc) {
  if (cell == nullptr) {
    throw Error(Errc::invalid_state,
                "read_ptr on " + ctx.name() + " of a moved-from " + managed_name(kind), loc);
  }
  check_input(*cell, kind, ctx, "read_ptr", loc);
}

std::optional<Device> scalar_device(const ManagedCell* cell) {
  if (cell == nullptr || cell->buffer.data() == nullptr) return std::nullopt;
  return device_of(*cell);
}

const ExpressionInfo& scalar_info(const ProgramPtr& program) {
  static const ExpressionInfo empty{};
  return program ? program->info : empty;
}

namespace {

// Switches that name every enumerator: a new one fails to compile (-Wswitch) until it has a name.
const char* op_name(ScalarOp op) noexcept {
  switch (op) {
    case ScalarOp::load:
      return "load";
    case ScalarOp::constant:
      return "const";
    case ScalarOp::convert:
      return "convert";
    case ScalarOp::neg:
      return "neg";
    case ScalarOp::abs:
      return "abs";
    case ScalarOp::sqrt:
      return "sqrt";
    case ScalarOp::exp:
      return "exp";
    case ScalarOp::log:
      return "log";
    case ScalarOp::sin:
      return "sin";
    case ScalarOp::cos:
      return "cos";
    case ScalarOp::tan:
      return "tan";
    case ScalarOp::conj:
      return "conj";
    case ScalarOp::real:
      return "real";
    case ScalarOp::imag:
      return "imag";
    case ScalarOp::add:
      return "add";
    case ScalarOp::sub:
      return "sub";
    case ScalarOp::mul:
      return "mul";
    case ScalarOp::div:
      return "div";
    case ScalarOp::pow:
      return "pow";
    case ScalarOp::min:
      return "min";
    case ScalarOp::max:
      return "max";
    case ScalarOp::eq:
      return "eq";
    case ScalarOp::ne:
      return "ne";
    case ScalarOp::lt:
      return "lt";
    case ScalarOp::le:
      return "le";
    case ScalarOp::gt:
      return "gt";
    case ScalarOp::ge:
      return "ge";
  }
  return "?";
}

const char* kind_name(ScalarKind kind) noexcept {
  switch (kind) {
    case ScalarKind::i32:
      return "i32";
    case ScalarKind::i64:
      return "i64";
    case ScalarKind::f32:
      return "f32";
    case ScalarKind::f64:
      return "f64";
    case ScalarKind::c32:
      return "c32";
    case ScalarKind::c64:
      return "c64";
  }
  return "?";
}

}  // namespace

std::string scalar_disassemble(const ProgramPtr& program) {
  if (!program) return "(empty)\n";
  std::string out;
  for (std::size_t i = 0; i < program->code.size(); ++i) {
    const ScalarInstr& in = program->code[i];
    out += "%" + std::to_string(i) + " = " + op_name(in.op) + " " + kind_name(in.kind) + " ";
    if (in.op == ScalarOp::load) {
      out += "in" + std::to_string(in.a);
    } else if (in.op == ScalarOp::constant) {
      out += "#" + std::to_string(in.a);
    } else if (scalar_math::is_unary(in.op)) {
      out += std::string(kind_name(in.ka)) + " %" + std::to_string(in.a);
    } else {
      out += "%" + std::to_string(in.a) + ", %" + std::to_string(in.b);
      if (in.ka != in.kb) {
        out += " (" + std::string(kind_name(in.ka)) + ", " + kind_name(in.kb) + ")";
      }
    }
    out += "\n";
  }
  return out;
}

}  // namespace detail

namespace scalar {
Stats stats() {
  return {detail::launches.load(std::memory_order_relaxed),
          detail::scalar_compiled.load(std::memory_order_relaxed),
          detail::host_reads.load(std::memory_order_relaxed)};
}
}  // namespace scalar

}  // namespace sluice
