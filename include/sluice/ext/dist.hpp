#pragma once
/// @file
/// The dist layer's backend contract (sluice/dist.hpp): how a backend's contexts communicate
/// (`DistEngine`) and the few kernels the distributed solvers add to the la layer's
/// (`DistKernels`, an extension: sluice/extension.hpp). For backend authors; users never need it.
///
/// The host backend's engine speaks MPI between processes and hands data over in memory between
/// the ranks of one process; the cuda backend's speaks NCCL. Ordering is not the engine's
/// business: the dist layer issues every call as one tracked operation of a context, after the
/// waits the tracker found, and an engine only enqueues the communication on that context's
/// stream, in stream order, without blocking the calling thread.

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "sluice/backend.hpp"
#include "sluice/context.hpp"
#include "sluice/ext/la_kernels.hpp"

namespace sluice {

/// Element types the engines move and reduce.
enum class DistType : std::uint8_t { u8, i32, i64, f32, f64 };
/// Bytes of one element of `t`.
[[nodiscard]] constexpr std::size_t dist_type_size(DistType t) noexcept {
  switch (t) {
    case DistType::u8:
      return 1;
    case DistType::i32:
    case DistType::f32:
      return 4;
    case DistType::i64:
    case DistType::f64:
      return 8;
  }
  return 1;
}

/// Reductions of a collective.
enum class DistOp : std::uint8_t { sum, max, min };

/// One message of an exchange: `count` elements at element `offset` of the send (or receive)
/// buffer, to (or from) rank `peer`. The k-th message a rank sends to a peer is the k-th that the
/// peer receives from it.
struct DistSegment {
  int peer = 0;
  std::size_t offset = 0;
  std::size_t count = 0;
};

/// One buffer's messages in an exchange of several buffers (DistEngine::exchange_parts).
struct DistExchangePart {
  const void* send = nullptr;
  std::span<const DistSegment> sends;
  void* recv = nullptr;
  std::span<const DistSegment> recvs;
};

/// The operations of a collective call, for an engine that checks that every rank made the same
/// call (a rank given another count or root fails every rank instead of hanging).
enum class DistCall : std::uint8_t { allreduce, reduce, broadcast, allgather, exchange };

/// The call's name in messages ("allreduce", ...).
[[nodiscard]] constexpr const char* dist_call_name(DistCall c) noexcept {
  switch (c) {
    case DistCall::allreduce:
      return "allreduce";
    case DistCall::reduce:
      return "reduce";
    case DistCall::broadcast:
      return "broadcast";
    case DistCall::allgather:
      return "allgather";
    case DistCall::exchange:
      return "exchange";
  }
  return "collective";
}

/// What every rank of a collective passes: compared across ranks where `checked`.
struct DistSignature {
  DistCall call = DistCall::allreduce;
  DistType type = DistType::f64;
  DistOp op = DistOp::sum;
  std::int32_t root = 0;
  std::uint64_t count = 0;
};

/// How a communicator runs the distributed solvers' small reductions (an allgather of a few
/// dozen partial sums, then a finalize that adds them in rank order): `peer` as one kernel per
/// rank that stores its sums straight into every other rank's device memory (cuda, where every
/// rank's GPU reaches every other's: one process driving them with peer access, or processes of
/// one node through CUDA IPC), `engine` through the engine's allgather (NCCL, MPI) and a
/// finalize kernel, `automatic` the peer path where it is possible and the engine's elsewhere.
/// `CommOptions::reductions`; where it is `automatic`, SLUICE_DIST_REDUCE=peer|nccl|auto decides.
enum class ReducePath : std::uint8_t { automatic, peer, engine };

/// How a communicator moves the ghost exchanges of the distributed products and the point-to-point
/// exchanges (cuda): `peer` by the copy engines into an inbox on the receiver's device, with
/// stream memory operations on flags in host memory shared by the node's processes (no
/// multiprocessor taken, where every rank's GPU reaches every other's), `engine` through the
/// engine's point-to-point calls (NCCL's kernels), `automatic` the peer path where it is possible.
/// Messages larger than the inbox's slot (SLUICE_DIST_PEER_INBOX), to the rank itself, or issued
/// while a graph is captured take the engine's path. `CommOptions::exchanges`; where it is
/// `automatic`, SLUICE_DIST_EXCHANGE_PATH=peer|nccl|auto decides.
enum class ExchangePath : std::uint8_t { automatic, peer, engine };

struct DistFinalizeArgs;

/// A communicator's ranks of one process, as a backend drives them. Every call enqueues rank
/// `local`'s part of one operation on `stream` (a stream of that rank's device) and returns at
/// once; it runs in that stream's order. `checked`: the engine verifies that every rank made
/// the same call first (DistSignature), at the cost of a small exchange.
class DistEngine {
 public:
  virtual ~DistEngine() = default;
  /// "mpi", "local" (one process, no MPI) or "nccl".
  [[nodiscard]] virtual std::string_view name() const noexcept = 0;

  virtual void allreduce(Stream& stream, int local, const void* send, void* recv, std::size_t count,
                         DistType type, DistOp op, bool checked, const OpInfo& info) = 0;
  /// `recv` is written on the root only (it may be null elsewhere).
  virtual void reduce(Stream& stream, int local, const void* send, void* recv, std::size_t count,
                      DistType type, DistOp op, int root, bool checked, const OpInfo& info) = 0;
  virtual void broadcast(Stream& stream, int local, void* data, std::size_t count, DistType type,
                         int root, bool checked, const OpInfo& info) = 0;
  /// `recv` holds `count` elements of every rank, in rank order.
  virtual void allgather(Stream& stream, int local, const void* send, void* recv, std::size_t count,
                         DistType type, bool checked, const OpInfo& info) = 0;
  /// Sends and receives the given segments (point-to-point; send and recv are exchanges of one
  /// segment). A mismatch of counts between a send and its receive fails both ranks.
  virtual void exchange(Stream& stream, int local, const void* send,
                        std::span<const DistSegment> sends, void* recv,
                        std::span<const DistSegment> recvs, DistType type, const OpInfo& info) = 0;
  /// The exchanges of several buffers as one operation where the engine can (NCCL: one group,
  /// one launch); every rank passes its parts in the same order, and the k-th message a rank
  /// sends a peer over all parts is the peer's k-th receive from it. By default the parts'
  /// exchanges one after the other.
  virtual void exchange_parts(Stream& stream, int local, std::span<const DistExchangePart> parts,
                              DistType type, const OpInfo& info) {
    for (const auto& p : parts)
      exchange(stream, local, p.send, p.sends, p.recv, p.recvs, type, info);
  }

  /// Whether the dist layer should run its ghost exchanges in two halves on the product's own
  /// stream (exchange_start before the work that reads no ghost, exchange_finish after it)
  /// rather than as one operation on a stream of their own. The host engine does: there a second
  /// stream is a second thread, which must win a core before its messages move, while the ranks'
  /// products keep every core busy (docs/dist.md, "Results (host)").
  [[nodiscard]] virtual bool splits_exchanges() const noexcept { return false; }
  /// The first half of exchange_parts: sends on their way and receives posted; returns at once
  /// where the engine can. The receive buffers are written, and the send buffers read, until the
  /// exchange_finish of the same `key` on the same stream, which comes before the next start of
  /// that key. By default the whole exchange (and exchange_finish does nothing).
  virtual void exchange_start(Stream& stream, int local, std::span<const DistExchangePart> parts,
                              DistType type, const void* key, const OpInfo& info) {
    (void)key;
    exchange_parts(stream, local, parts, type, info);
  }
  /// Waits for the exchange exchange_start(key) began (see there).
  virtual void exchange_finish(Stream& stream, int local, const void* key, const OpInfo& info) {
    (void)stream, (void)local, (void)key, (void)info;
  }

  /// The most doubles per rank `gather_finalize` takes; 0 where the engine has no such path
  /// (the caller then issues `allgather` and `DistKernels::finalize`). The same on every rank.
  [[nodiscard]] virtual std::size_t fused_gather_capacity() const noexcept { return 0; }
  /// How the small reductions run: "peer", or the engine's name where they are its allgather.
  [[nodiscard]] virtual std::string_view reduce_path() const noexcept { return name(); }
  /// How the exchanges run: "peer" (copy engines, ExchangePath::peer), or the engine's name.
  [[nodiscard]] virtual std::string_view exchange_path() const noexcept { return name(); }
  /// Multiprocessors of the device an exchange's kernels need while a product runs beside it:
  /// the product that overlaps an exchange leaves them free (LaMatvecArgs::spare_sms). 0 where
  /// the exchange takes none (host engines, the peer path). `captured`: for an exchange issued
  /// while a graph is captured (which may take another path).
  [[nodiscard]] virtual int exchange_sms(bool captured) const noexcept {
    (void)captured;
    return 0;
  }
  /// An allgather of `count` doubles per rank into `recv` (in rank order) and, if `fin` is set,
  /// the finalize on what it gathered (`fin->gathered` is ignored: `recv` is read), as one
  /// operation on `stream`: the same bits as `allgather` then `DistKernels::finalize`. Only
  /// where `count` <= fused_gather_capacity() (unchecked: the dist layer's own reductions).
  virtual void gather_finalize(Stream& stream, int local, const double* send, double* recv,
                               std::size_t count, const DistFinalizeArgs* fin, const OpInfo& info);
};

/// What an engine is made from: one communicator's ranks of this process.
struct DistEngineConfig {
  int size = 1;                   ///< ranks in all
  std::vector<int> ranks;         ///< the rank of each local rank
  std::vector<Context> contexts;  ///< each local rank's context (its device)
  /// NCCL: the communicator's id, made by rank 0 (DistKernels::unique_id) and sent to all.
  std::vector<std::byte> unique_id;
  std::string name;
  /// The most ranks any process of the communicator holds (every process gets the same).
  int max_local = 1;
  /// The dist layer's own description of the processes (used by the host engine, and by the
  /// cuda engine to exchange its peer memory's handles).
  std::shared_ptr<const void> transport;
  /// Where the solvers' small reductions run (every process passes the same).
  ReducePath reduce = ReducePath::automatic;
  /// How the exchanges run (every process passes the same).
  ExchangePath exchange = ExchangePath::automatic;
};

/// Where a distributed solver step's sums are combined: the partial sums of every rank, in rank
/// order, `parts` slots of la_math::kMaxSums each (src/dist/combine.hpp adds them up the same
/// way on every rank and backend), and what the la solver logic does with the totals.
struct DistFinalizeArgs {
  sluice::detail::LaKspState* state = nullptr;
  const double* gathered = nullptr;
  std::int32_t ranks = 1;
  std::int32_t parts = 1;
  /// Parts from `split` on hold one sum each, the last total (0: none; single-reduction CG).
  std::int32_t split = 0;
  detail::LaFinalize finalize = detail::LaFinalize::none;
  /// The step is TFQMR's x update, which still runs in the iteration that stopped
  /// (ksp_logic::guard_runs).
  bool tf_dx = false;
};

/// A backend's part of the dist layer (an extension).
class DistKernels {
 public:
  static constexpr std::string_view extension_name = "DistKernels";
  /// Registers the built-in implementations (host, and cuda where built with NCCL).
  static void register_builtins();

  virtual ~DistKernels() = default;
  /// Combines the gathered partial sums and applies the solver logic to the device state, if
  /// the state still iterates: one operation on `stream`.
  virtual void finalize(Stream& stream, const DistFinalizeArgs& args, const OpInfo& op) = 0;
  /// dst[i] = src[index[i]] for i < n (packing values for an exchange): one operation.
  virtual void gather(Stream& stream, double* dst, const double* src, const std::int32_t* index,
                      std::size_t n, const OpInfo& op) = 0;
  /// An engine's communicator id (NCCL's unique id), made on one rank and sent to the others;
  /// empty if the engine needs none.
  [[nodiscard]] virtual std::vector<std::byte> unique_id() { return {}; }
  /// The engine for one communicator's ranks of this process. Collective across processes:
  /// every process calls it for the same communicator at the same point.
  [[nodiscard]] virtual std::shared_ptr<DistEngine> create_engine(
      const DistEngineConfig& config) = 0;
};

}  // namespace sluice
