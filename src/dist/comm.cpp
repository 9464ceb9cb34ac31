// Environment, Comm and Rank (sluice/dist.hpp): making a communicator (its ranks, their devices,
// the backend's engine) and issuing its communication as tracked operations.

#include <cstdlib>
#include <cstring>
#include <exception>
#include <mutex>
#include <thread>

#include "core/context_impl.hpp"
#include "dist/comm_state.hpp"
#include "dist/placement.hpp"
#include "sluice/error.hpp"
#include "sluice/extension.hpp"

namespace sluice::dist {

namespace p = sluice::detail::dist;
using detail::CommState;

// ---- Environment --------------------------------------------------------------------------------

bool mpi_built() noexcept {
  return p::mpi_built();
}

Environment::Environment() {
  p::mpi_init(nullptr, nullptr, true);
}

Environment::Environment(int& argc, char**& argv) {
  p::mpi_init(&argc, &argv, true);
}

Environment::~Environment() {
  if (std::uncaught_exceptions() > 0) {
    p::fail_process("process " + std::to_string(p::world_rank()) +
                        " left its dist::Environment with an exception in flight",
                    true);
  }
  p::mpi_finalize();
}

int Environment::process_rank() {
  return p::world_rank();
}

int Environment::process_count() {
  return p::world_size();
}

int Environment::node_process_rank() {
  return p::ProcComm::world_node_rank();
}

int Environment::node_process_count() {
  return p::ProcComm::world_node_size();
}

void Environment::fail(std::string_view message) noexcept {
  try {
    p::fail_process(
        "process " + std::to_string(p::world_rank()) + " failed: " + std::string(message), true);
  } catch (...) {
  }
}

// ---- devices ------------------------------------------------------------------------------------

bool launched_by_mpirun() noexcept {
  for (const char* var :
       {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_RANK", "MPI_LOCALNRANKS", "SLURM_PROCID"}) {
    if (std::getenv(var) != nullptr) return true;
  }
  return false;
}

Device pick_device(int local_rank, int local_ranks, std::string_view backend) {
  const Device preferred = backend.empty() ? default_device() : Device{std::string(backend), 0};
  if (preferred.backend == "host") return preferred;
  std::size_t count = 0;
  for (const auto& b : backends()) {
    if (b.name == preferred.backend) count = b.device_count;
  }
  if (count == 0) return preferred;
  const int place = p::ProcComm::world_node_rank();
  const auto index = static_cast<std::size_t>(place * local_ranks + local_rank) % count;
  return Device{preferred.backend, static_cast<int>(index)};
}

// ---- CommState ----------------------------------------------------------------------------------

namespace detail {

CommState::~CommState() {
  for (ObjectId id : order) {
    try {
      unregister_memory(id);
    } catch (...) {
    }
  }
}

void CommState::check_context(int local, const Context& ctx, std::string_view what,
                              std::source_location loc) const {
  const Device& d = contexts[static_cast<std::size_t>(local)].device();
  if (ctx.device() != d) {
    throw Error(
        Errc::invalid_argument,
        std::string(what) + ": rank " + std::to_string(ranks[static_cast<std::size_t>(local)]) +
            " lives on " + d.to_string() + " but the operation was issued on " + ctx.name() + " (" +
            ctx.device().to_string() + "); issue a rank's communication on a context of its device",
        loc);
  }
}

void CommState::check_rank(int rank, std::string_view what, std::source_location loc) const {
  if (rank < 0 || rank >= size()) {
    throw Error(Errc::invalid_argument,
                std::string(what) + ": rank " + std::to_string(rank) + " is not in " + name +
                    " (ranks 0 to " + std::to_string(size() - 1) + ")",
                loc);
  }
}

void CommState::allreduce_value(int local, Managed<double>& v, DistOp op, const Context& ctx,
                                std::source_location loc) const {
  (void)v.read_ptr(ctx, loc);
  double* p = v.write_ptr(ctx, loc);
  AccessList acc;
  acc.read_write(v.object_id());
  issue(local, ctx, acc, "dist allreduce", loc, [&](Stream& s, const OpInfo& info) {
    engine->allreduce(s, local, p, p, 1, DistType::f64, op, false, info);
  });
}

void CommState::each(const std::function<void(int)>& fn, bool on_threads) const {
  const int n = locals();
  if (n == 1 || !(threads || on_threads)) {
    for (int l = 0; l < n; ++l) fn(l);
    return;
  }
  std::vector<std::exception_ptr> errors(static_cast<std::size_t>(n));
  std::vector<std::thread> workers;
  workers.reserve(static_cast<std::size_t>(n) - 1);
  auto run = [&](int l) {
    try {
      fn(l);
    } catch (...) {
      errors[static_cast<std::size_t>(l)] = std::current_exception();
    }
  };
  for (int l = 1; l < n; ++l) workers.emplace_back(run, l);
  run(0);
  for (auto& w : workers) w.join();
  for (auto& e : errors) {
    if (e) std::rethrow_exception(e);
  }
}

namespace {

/// What each process tells the others when a communicator is made.
struct Announcement {
  std::int32_t ranks = 0;
  std::int32_t reduce = 0;    // ReducePath
  std::int32_t exchange = 0;  // ExchangePath
  char backend[24] = {};
};

const char* reduce_name(ReducePath r) {
  switch (r) {
    case ReducePath::automatic:
      return "auto";
    case ReducePath::peer:
      return "peer";
    case ReducePath::engine:
      return "nccl";
  }
  return "auto";
}

/// CommOptions::reductions, or where it is automatic SLUICE_DIST_REDUCE (peer, nccl or engine,
/// auto).
ReducePath reduce_path(ReducePath asked, std::source_location loc) {
  if (asked != ReducePath::automatic) return asked;
  const char* v = std::getenv("SLUICE_DIST_REDUCE");
  if (v == nullptr || *v == '\0') return asked;
  const std::string_view s(v);
  if (s == "auto") return ReducePath::automatic;
  if (s == "peer") return ReducePath::peer;
  if (s == "nccl" || s == "engine") return ReducePath::engine;
  throw Error(Errc::invalid_argument,
              "dist::Comm: SLUICE_DIST_REDUCE is '" + std::string(s) +
                  "'; it is peer, nccl (the engine's collectives; also 'engine') or auto",
              loc);
}

const char* exchange_name(ExchangePath x) {
  switch (x) {
    case ExchangePath::automatic:
      return "auto";
    case ExchangePath::peer:
      return "peer";
    case ExchangePath::engine:
      return "nccl";
  }
  return "auto";
}

/// CommOptions::exchanges, or where it is automatic SLUICE_DIST_EXCHANGE_PATH (peer, nccl or
/// engine, auto).
ExchangePath exchange_path(ExchangePath asked, std::source_location loc) {
  if (asked != ExchangePath::automatic) return asked;
  const char* v = std::getenv("SLUICE_DIST_EXCHANGE_PATH");
  if (v == nullptr || *v == '\0') return asked;
  const std::string_view s(v);
  if (s == "auto") return ExchangePath::automatic;
  if (s == "peer") return ExchangePath::peer;
  if (s == "nccl" || s == "engine") return ExchangePath::engine;
  throw Error(Errc::invalid_argument,
              "dist::Comm: SLUICE_DIST_EXCHANGE_PATH is '" + std::string(s) +
                  "'; it is peer, nccl (the engine's point-to-point calls; also 'engine') or auto",
              loc);
}

std::shared_ptr<CommState> make_state(std::shared_ptr<p::ProcComm> procs, CommOptions o,
                                      std::source_location loc) {
  auto st = std::make_shared<CommState>();
  st->name = o.name.empty() ? "comm" : o.name;
  st->procs = std::move(procs);
  if (o.contexts.empty()) {
    if (o.local_ranks < 1) {
      throw Error(
          Errc::invalid_argument,
          "dist::Comm: local_ranks must be at least 1, got " + std::to_string(o.local_ranks), loc);
    }
    for (int i = 0; i < o.local_ranks; ++i) {
      o.contexts.emplace_back(
          ContextOptions{.device = pick_device(i, o.local_ranks, o.backend),
                         .name = st->name + " rank context " + std::to_string(i)});
    }
  }
  const std::string backend = o.contexts.front().device().backend;
  for (std::size_t i = 0; i < o.contexts.size(); ++i) {
    const Device& d = o.contexts[i].device();
    if (d.backend != backend) {
      throw Error(Errc::invalid_argument,
                  "dist::Comm: the ranks of one communicator use one backend; context 0 is on " +
                      o.contexts.front().device().to_string() + ", context " + std::to_string(i) +
                      " on " + d.to_string(),
                  loc);
    }
  }
  // Every process announces its rank count and backend; ranks are numbered process by process.
  Announcement mine;
  mine.ranks = static_cast<std::int32_t>(o.contexts.size());
  const ReducePath reduce = reduce_path(o.reductions, loc);
  mine.reduce = static_cast<std::int32_t>(reduce);
  const ExchangePath exchange = exchange_path(o.exchanges, loc);
  mine.exchange = static_cast<std::int32_t>(exchange);
  std::strncpy(mine.backend, backend.c_str(), sizeof mine.backend - 1);
  const int nprocs = st->procs->size();
  std::vector<Announcement> all(static_cast<std::size_t>(nprocs));
  st->procs->allgather(&mine, sizeof mine, all.data());
  int total = 0;
  for (int q = 0; q < nprocs; ++q) {
    const auto& a = all[static_cast<std::size_t>(q)];
    if (std::strncmp(a.backend, mine.backend, sizeof mine.backend) != 0) {
      throw Error(Errc::invalid_argument,
                  "dist::Comm: process " + std::to_string(q) + " uses backend '" +
                      std::string(a.backend) + "' and process " +
                      std::to_string(st->procs->rank()) + " '" + backend +
                      "'; all ranks of a communicator use one backend",
                  loc);
    }
    if (a.reduce != mine.reduce) {
      throw Error(Errc::invalid_argument,
                  "dist::Comm: process " + std::to_string(q) + " asks for " +
                      reduce_name(static_cast<ReducePath>(a.reduce)) + " reductions and process " +
                      std::to_string(st->procs->rank()) + " for " + reduce_name(reduce) +
                      " (CommOptions::reductions, SLUICE_DIST_REDUCE); every process must ask "
                      "for the same",
                  loc);
    }
    if (a.exchange != mine.exchange) {
      throw Error(Errc::invalid_argument,
                  "dist::Comm: process " + std::to_string(q) + " asks for " +
                      exchange_name(static_cast<ExchangePath>(a.exchange)) +
                      " exchanges and process " + std::to_string(st->procs->rank()) + " for " +
                      exchange_name(exchange) +
                      " (CommOptions::exchanges, SLUICE_DIST_EXCHANGE_PATH); every process must "
                      "ask for the same",
                  loc);
    }
    st->map.offset.push_back(total);
    st->map.count.push_back(a.ranks);
    st->map.max_local = std::max(st->map.max_local, static_cast<int>(a.ranks));
    total += a.ranks;
  }
  const int first = st->map.offset[static_cast<std::size_t>(st->procs->rank())];
  for (std::size_t i = 0; i < o.contexts.size(); ++i) {
    st->ranks.push_back(first + static_cast<int>(i));
    st->order.push_back(new_object_id());
  }
  // Every rank's device, on every process: two ranks on one GPU are refused here, alike on
  // every process, before NCCL fails obscurely (placement.hpp).
  std::vector<RankPlacement> mine_placed;
  const std::string node = node_name();
  for (std::size_t i = 0; i < o.contexts.size(); ++i) {
    const Device& d = o.contexts[i].device();
    mine_placed.push_back({st->ranks[i], st->procs->rank(), node, d.to_string(), device_key(d)});
  }
  const auto placed = unpack(st->procs->allgatherv(pack(mine_placed)));
  if (auto why = shared_device_error(placed, backend, st->name); !why.empty()) {
    throw Error(Errc::invalid_argument, why, loc);
  }
  st->contexts = std::move(o.contexts);
  st->kernels = &extension<DistKernels>(backend, loc);

  DistEngineConfig config;
  config.size = total;
  config.ranks = st->ranks;
  config.contexts = st->contexts;
  config.name = st->name;
  config.max_local = st->map.max_local;
  config.reduce = reduce;
  config.exchange = exchange;
  // An engine id (NCCL's) is made on process 0 and sent to all.
  std::uint64_t id_bytes = 0;
  if (st->procs->rank() == 0) {
    config.unique_id = st->kernels->unique_id();
    id_bytes = config.unique_id.size();
  }
  st->procs->broadcast(&id_bytes, sizeof id_bytes, 0);
  if (id_bytes > 0) {
    config.unique_id.resize(id_bytes);
    st->procs->broadcast(config.unique_id.data(), id_bytes, 0);
  }
  config.transport = std::make_shared<p::HostTransport>(p::HostTransport{st->procs, st->map});
  st->engine = st->kernels->create_engine(config);
  st->threads = st->engine->name() == "nccl";
  return st;
}

}  // namespace
}  // namespace detail

// ---- Comm ---------------------------------------------------------------------------------------

Comm::Comm() : Comm(CommOptions{}) {}

Comm::Comm(CommOptions options, std::source_location loc)
    : state_(detail::make_state(p::ProcComm::world(), std::move(options), loc)) {}

Comm::Comm(const void* mpi_comm, std::size_t handle_bytes, CommOptions options,
           std::source_location loc)
    : state_(detail::make_state(p::ProcComm::from_handle(mpi_comm, handle_bytes),
                                std::move(options), loc)) {}

int Comm::size() const {
  return state_->size();
}
int Comm::local_size() const {
  return state_->locals();
}
int Comm::processes() const {
  return state_->procs->size();
}
int Comm::rank(int i) const {
  return state_->ranks.at(static_cast<std::size_t>(i));
}
const Context& Comm::context(int i) const {
  return state_->contexts.at(static_cast<std::size_t>(i));
}
Rank Comm::local(int i) const {
  if (i < 0 || i >= local_size()) {
    throw Error(Errc::invalid_argument, "dist::Comm::local(" + std::to_string(i) +
                                            "): this process holds " +
                                            std::to_string(local_size()) + " rank(s)");
  }
  return Rank(state_, i);
}
std::string_view Comm::engine() const {
  return state_->engine->name();
}
std::string_view Comm::reductions() const {
  return state_->engine->reduce_path();
}
std::string_view Comm::exchanges() const {
  return state_->engine->exchange_path();
}
const std::string& Comm::name() const {
  return state_->name;
}

Rank Comm::single(std::source_location loc) const {
  if (local_size() != 1) {
    throw Error(Errc::invalid_argument,
                "dist::Comm: this process holds " + std::to_string(local_size()) +
                    " ranks; issue each one's part through comm.local(i) or for_each_local",
                loc);
  }
  return Rank(state_, 0);
}

void Comm::for_each_local(const std::function<void(const Rank&)>& fn) const {
  state_->each([&](int l) { fn(Rank(state_, l)); });
}

// ---- Rank ---------------------------------------------------------------------------------------

int Rank::rank() const {
  return state_->ranks.at(static_cast<std::size_t>(local_));
}
int Rank::size() const {
  return state_->size();
}
const Context& Rank::context() const {
  return state_->contexts.at(static_cast<std::size_t>(local_));
}

namespace {

DistOp to_op(ReduceOp op) {
  switch (op) {
    case ReduceOp::sum:
      return DistOp::sum;
    case ReduceOp::max:
      return DistOp::max;
    case ReduceOp::min:
      return DistOp::min;
  }
  return DistOp::sum;
}

ByteRange range_of(const detail::BufferRef& b, DistType t) {
  return {b.offset, b.count * dist_type_size(t)};
}

/// Throws unless a buffer given to a communication call on ctx is memory of ctx's device:
/// memory of one device is used on another only through a copy.
void check_buffer(const detail::BufferRef& b, const Context& ctx, std::string_view what,
                  std::source_location loc) {
  if (b.data == nullptr) return;
  if (b.id == 0) {
    throw Error(Errc::invalid_argument,
                std::string(what) + ": the buffer is not tracked; pass a DeviceBuffer or Managed",
                loc);
  }
  const auto found = find_memory(b.data);
  if (found && found->attributes.device && *found->attributes.device != ctx.device()) {
    throw Error(Errc::invalid_argument,
                std::string(what) + ": the buffer lives on " +
                    found->attributes.device->to_string() + " but the operation runs on " +
                    ctx.name() + " (" + ctx.device().to_string() +
                    "); memory of one device reaches another only through a copy "
                    "(sluice::copy)",
                loc);
  }
}

void check_counts(std::size_t a, std::size_t b, std::string_view what, std::source_location loc) {
  if (a != b) {
    throw Error(Errc::invalid_argument,
                std::string(what) + ": the send and receive buffers hold " + std::to_string(a) +
                    " and " + std::to_string(b) + " elements; they must be equal",
                loc);
  }
}

}  // namespace

void Rank::issue_allreduce(detail::BufferRef send, detail::BufferRef recv, DistType type,
                           ReduceOp op, const Context& ctx, bool checked,
                           std::source_location loc) const {
  const auto& st = *state_;
  st.check_context(local_, ctx, "dist allreduce", loc);
  check_buffer(send, ctx, "dist allreduce", loc);
  check_buffer(recv, ctx, "dist allreduce", loc);
  check_counts(send.count, recv.count, "dist allreduce", loc);
  detail::AccessList acc;
  acc.read(send.id, range_of(send, type));
  acc.write(recv.id, range_of(recv, type));
  st.issue(local_, ctx, acc, "dist allreduce", loc, [&](Stream& s, const OpInfo& info) {
    st.engine->allreduce(s, local_, send.data, recv.data, send.count, type, to_op(op), checked,
                         info);
  });
}

void Rank::issue_reduce(detail::BufferRef send, detail::BufferRef recv, DistType type, ReduceOp op,
                        int root, const Context& ctx, std::source_location loc) const {
  const auto& st = *state_;
  st.check_context(local_, ctx, "dist reduce", loc);
  st.check_rank(root, "dist reduce (root)", loc);
  check_buffer(send, ctx, "dist reduce", loc);
  const bool is_root = rank() == root;
  if (is_root) {
    check_buffer(recv, ctx, "dist reduce", loc);
    check_counts(send.count, recv.count, "dist reduce", loc);
  }
  detail::AccessList acc;
  acc.read(send.id, range_of(send, type));
  if (is_root) acc.write(recv.id, range_of(recv, type));
  st.issue(local_, ctx, acc, "dist reduce", loc, [&](Stream& s, const OpInfo& info) {
    st.engine->reduce(s, local_, send.data, is_root ? recv.data : nullptr, send.count, type,
                      to_op(op), root, true, info);
  });
}

void Rank::issue_broadcast(detail::BufferRef data, DistType type, int root, const Context& ctx,
                           std::source_location loc) const {
  const auto& st = *state_;
  st.check_context(local_, ctx, "dist broadcast", loc);
  st.check_rank(root, "dist broadcast (root)", loc);
  check_buffer(data, ctx, "dist broadcast", loc);
  detail::AccessList acc;
  if (rank() == root) {
    acc.read(data.id, range_of(data, type));
  } else {
    acc.write(data.id, range_of(data, type));
  }
  st.issue(local_, ctx, acc, "dist broadcast", loc, [&](Stream& s, const OpInfo& info) {
    st.engine->broadcast(s, local_, data.data, data.count, type, root, true, info);
  });
}

void Rank::issue_allgather(detail::BufferRef send, detail::BufferRef recv, DistType type,
                           const Context& ctx, bool checked, std::source_location loc) const {
  const auto& st = *state_;
  st.check_context(local_, ctx, "dist allgather", loc);
  check_buffer(send, ctx, "dist allgather", loc);
  check_buffer(recv, ctx, "dist allgather", loc);
  if (recv.count != send.count * static_cast<std::size_t>(st.size())) {
    throw Error(Errc::invalid_argument,
                "dist allgather: the receive buffer holds " + std::to_string(recv.count) +
                    " elements; it must hold the send buffer's " + std::to_string(send.count) +
                    " from each of the " + std::to_string(st.size()) + " ranks",
                loc);
  }
  detail::AccessList acc;
  acc.read(send.id, range_of(send, type));
  acc.write(recv.id, range_of(recv, type));
  st.issue(local_, ctx, acc, "dist allgather", loc, [&](Stream& s, const OpInfo& info) {
    st.engine->allgather(s, local_, send.data, recv.data, send.count, type, checked, info);
  });
}

void Rank::issue_exchange(detail::BufferRef send, std::span<const DistSegment> sends,
                          detail::BufferRef recv, std::span<const DistSegment> recvs, DistType type,
                          const Context& ctx, std::source_location loc) const {
  const auto& st = *state_;
  const std::string_view what =
      recvs.empty() ? "dist send" : (sends.empty() ? "dist recv" : "dist exchange");
  st.check_context(local_, ctx, what, loc);
  const std::size_t elem = dist_type_size(type);
  detail::AccessList acc;
  auto add = [&](const detail::BufferRef& b, std::span<const DistSegment> segs, Access mode) {
    if (segs.empty()) return;
    check_buffer(b, ctx, what, loc);
    for (const auto& s : segs) {
      st.check_rank(s.peer, what, loc);
      if (s.offset + s.count > b.count) {
        throw Error(Errc::invalid_argument,
                    std::string(what) + ": the segment of " + std::to_string(s.count) +
                        " elements at " + std::to_string(s.offset) + " for rank " +
                        std::to_string(s.peer) + " runs past the buffer's " +
                        std::to_string(b.count) + " elements",
                    loc);
      }
      if (s.count > 0) acc.add(b.id, {b.offset + s.offset * elem, s.count * elem}, mode);
    }
  };
  add(send, sends, Access::read);
  add(recv, recvs, Access::write);
  st.issue(local_, ctx, acc, what, loc, [&](Stream& s, const OpInfo& info) {
    st.engine->exchange(s, local_, send.data, sends, recv.data, recvs, type, info);
  });
}

}  // namespace sluice::dist
