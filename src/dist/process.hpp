#pragma once
// The processes of a communicator, over MPI where the build has it (SLUICE_HAVE_MPI), else the
// one process. Everything MPI in sluice goes through here: initialization, the process-wide
// failure state and its notices to the other processes, and the calls the host engine and the
// dist layer's set-up make. No other file includes mpi.h.
//
// A process communicator duplicates the user's MPI communicator three times: set-up collectives
// (`ctl`, called by the user's thread in program order), the engine's collectives (`coll`, one
// at a time in each process: see host/host_engine.cpp) and its point-to-point messages (`p2p`),
// so that traffic of one kind never matches another's.
//
// Waiting never blocks in MPI: a wait tests its requests, the failure notices of the other
// processes and an optional deadline (SLUICE_DIST_TIMEOUT seconds) in a loop that spins, yields
// and then sleeps. A process that fails its communication (a mismatched call, an MPI error, the
// deadline) or whose program fails (Environment::fail) sends every other process a notice; they
// fail their pending and later communication with its text instead of hanging.

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "sluice/ext/dist.hpp"

namespace sluice::detail::dist {

/// True if the build has MPI.
[[nodiscard]] bool mpi_built() noexcept;
/// Initializes MPI (MPI_THREAD_MULTIPLE asked) unless it is already initialized; without MPI a
/// no-op. `owned`: sluice finalizes it (Environment's destructor, or at exit if it initialized
/// MPI implicitly).
void mpi_init(int* argc, char*** argv, bool owned);
/// Finalizes MPI if sluice initialized it and it is still running: after a failure of this or
/// another process, aborts the job instead (MPI_Finalize would wait for processes that will
/// never come).
void mpi_finalize() noexcept;
/// This process's rank in MPI_COMM_WORLD and their number (0 and 1 without MPI).
[[nodiscard]] int world_rank();
[[nodiscard]] int world_size();

/// The process-wide failure of communication, if any: the first local failure or notice.
[[nodiscard]] std::optional<std::string> process_failure();
/// Records a failure of this process (the first one wins) and, if `notify`, sends its text to
/// every other process. Never throws.
void fail_process(const std::string& message, bool notify) noexcept;
/// Tests for a notice of another process's failure (recording it): for threads that wait on
/// something else than MPI (the NCCL engine's watchdog). Never throws.
void poll_failure_notices() noexcept;
/// Throws Error(work_failed) if this process's communication has failed.
void throw_if_failed(std::string_view what);
/// Seconds a wait for other ranks may take before it fails the process (SLUICE_DIST_TIMEOUT;
/// 0, the default: no limit).
[[nodiscard]] double timeout_seconds();
/// One round of a polling wait: spins, then yields, then sleeps (a waiter on an oversubscribed
/// machine leaves the cores to the ranks it waits for).
void back_off(unsigned round);

/// Which process holds which rank: a communicator's ranks are numbered process by process
/// (process p holds ranks offset[p], ..., offset[p] + count[p] - 1, its local ranks in order).
struct RankMap {
  std::vector<int> offset;
  std::vector<int> count;
  int max_local = 1;
  [[nodiscard]] int size() const noexcept {
    return offset.empty() ? 0 : offset.back() + count.back();
  }
  [[nodiscard]] int process_of(int rank) const;
  [[nodiscard]] int local_of(int rank) const {
    return rank - offset[static_cast<std::size_t>(process_of(rank))];
  }
};

/// A communicator between processes.
class ProcComm {
 public:
  struct Impl;
  /// A communicator of its own over MPI_COMM_WORLD (initializing MPI if needed), or the one
  /// process. Collective: every communicator (dist::Comm) makes its own, so that the traffic of
  /// two never matches across them.
  [[nodiscard]] static std::shared_ptr<ProcComm> world();
  /// This process's index among the processes of its node in MPI_COMM_WORLD (0 alone): from
  /// the launcher's environment, else (collective, on the first call) MPI's shared-memory split.
  [[nodiscard]] static int world_node_rank();
  /// The number of processes on this node in MPI_COMM_WORLD (1 alone), found the same way.
  [[nodiscard]] static int world_node_size();
  /// The user's MPI communicator, given as the bytes of its handle (sluice/dist_mpi.hpp).
  [[nodiscard]] static std::shared_ptr<ProcComm> from_handle(const void* handle, std::size_t bytes);
  ~ProcComm();

  [[nodiscard]] int rank() const noexcept { return rank_; }
  [[nodiscard]] int size() const noexcept { return size_; }
  /// This process's index among the processes of the communicator on its node.
  [[nodiscard]] int node_rank() const noexcept { return node_rank_; }

  // ---- set-up: called by the user's thread, in the same order on every process ----
  /// recv[p * bytes, (p + 1) * bytes) = process p's `send` (the same size on every process).
  void allgather(const void* send, std::size_t bytes, void* recv) const;
  /// Process p's `send` (any size), concatenated in process order into the result.
  [[nodiscard]] std::vector<std::byte> allgatherv(std::span<const std::byte> send) const;
  /// `data` of process `root` on every process (the same size everywhere).
  void broadcast(void* data, std::size_t bytes, int root) const;
  /// Sends `data[p]` to process p; returns what every process sent here, by process.
  [[nodiscard]] std::vector<std::vector<std::byte>> alltoallv(
      const std::vector<std::vector<std::byte>>& data) const;

  // ---- the host engine: its caller waits (polling) until the operation completed ----
  void allreduce(const void* send, void* recv, std::size_t count, DistType type, DistOp op,
                 std::string_view what) const;
  void reduce(const void* send, void* recv, std::size_t count, DistType type, DistOp op, int root,
              std::string_view what) const;
  void broadcast(void* data, std::size_t count, DistType type, int root,
                 std::string_view what) const;
  /// Process p contributes counts[p] elements at `send`; `recv` gets them in process order.
  void allgatherv(const void* send, void* recv, std::span<const int> counts, DistType type,
                  std::string_view what) const;
  /// Every process contributes its signature; throws (after failing the process) naming the
  /// first process whose call differs from process 0's.
  void check_signature(const DistSignature& sig, std::string_view what) const;
  /// One message to or from another process (`tag` tells the pairs of local ranks apart).
  struct Message {
    int process = 0;
    int tag = 0;
    void* data = nullptr;  // a receive's destination, or a send's source
    std::size_t count = 0;
  };
  /// Posts every receive and send and waits for all; a receive of another count than was sent
  /// fails (naming both).
  void exchange(std::span<const Message> sends, std::span<const Message> recvs, DistType type,
                std::string_view what) const;
  /// An exchange in two halves: `exchange_start` posts every receive and send and returns at
  /// once; `exchange_finish` waits for them (and checks the counts). The buffers stay the
  /// exchange's until it finished. A started exchange dropped unfinished is cancelled.
  struct Pending;
  [[nodiscard]] std::shared_ptr<Pending> exchange_start(std::span<const Message> sends,
                                                        std::span<const Message> recvs,
                                                        DistType type, std::string_view what) const;
  void exchange_finish(Pending& pending, std::string_view what) const;

  [[nodiscard]] Impl& impl() const noexcept { return *impl_; }
  /// Made by world() and from_handle() (Impl is process.cpp's).
  explicit ProcComm(std::unique_ptr<Impl> impl);

 private:
  std::unique_ptr<Impl> impl_;
  int rank_ = 0;
  int size_ = 1;
  int node_rank_ = 0;
};

/// What the host engine is made from besides DistEngineConfig (its `transport`).
struct HostTransport {
  std::shared_ptr<ProcComm> procs;
  RankMap map;
};

}  // namespace sluice::detail::dist
