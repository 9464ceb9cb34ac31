#pragma once
/// @file
/// Work across devices and processes: communicators whose collectives and messages are tracked
/// operations of a context, and distributed vectors, matrices and Krylov solvers built on `la`
/// (reference 000, §2.1 and its conclusion: GPU-aware MPI cannot order itself after a user's
/// stream, so every collective used to need a synchronize first).
///
/// A communicator's *ranks* are contexts: one per process by default (`mpirun -np N`, each
/// process on the device it picks), or several per process (`CommOptions::contexts`: several
/// GPUs driven by one process, or several contexts of the host). Between processes the host
/// backend speaks MPI and the cuda backend NCCL; between the ranks of one process data moves in
/// memory (host) or through NCCL (cuda). A build without MPI (SLUICE_MPI=OFF) runs one process,
/// with as many ranks as it gives contexts.
///
/// Every collective and message is one operation of a context: it marks what it reads and
/// writes, the tracker orders it after the work that produced its data and before the work that
/// uses the result, and the call returns at once. A rank's communication on one communicator
/// runs in the order it was issued, whichever of its contexts issued it (one tracked object per
/// rank orders it), so the ranks' calls meet as MPI and NCCL require; issue them in the same
/// order on every rank.
///
/// @code
/// sluice::dist::Environment env(argc, argv);  // MPI, if this build has it
/// sluice::dist::Comm world;                   // one rank per process
/// sluice::Context ctx = world.context();
/// sluice::Managed<double> s(1.0 + world.rank(), ctx);
/// world.allreduce(s, sluice::dist::ReduceOp::sum);  // on the device, ordered after the write
/// double total = s.value();                        // waits for the allreduce only
///
/// namespace dist = sluice::dist;
/// auto A = dist::Mat::stencil(world, sluice::la::Stencil::d3p7, 128, 128, 128);
/// dist::Vec b = A.create_vec(), x = A.create_vec();
/// dist::set(x, 1.0);
/// dist::mult(A, x, b);
/// dist::Ksp ksp(A, {.type = sluice::la::KspType::cg, .rtol = 1e-8});
/// auto r = ksp.solve(b, x);  // async: every dot product is a device-resident allreduce
/// @endcode
///
/// Thread safety: as `la`. With several ranks in one process, the dist layer issues each rank's
/// part of an operation itself (on one thread per rank where the engine needs it, NCCL).

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <source_location>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include "sluice/context.hpp"
#include "sluice/ext/dist.hpp"
#include "sluice/la.hpp"
#include "sluice/memory.hpp"
#include "sluice/scalar.hpp"

namespace sluice::dist {

class Comm;

namespace detail {
struct CommState;
struct MatImpl;
struct KspWork;
/// An untyped view of a tracked buffer for the communication calls.
struct BufferRef {
  ObjectId id = 0;
  void* data = nullptr;
  std::size_t count = 0;   // elements
  std::size_t offset = 0;  // bytes from the start of the tracked object to `data`
};
template <class T>
constexpr DistType dist_type_of() {
  using U = std::remove_cv_t<T>;
  if constexpr (std::is_same_v<U, double>) {
    return DistType::f64;
  } else if constexpr (std::is_same_v<U, float>) {
    return DistType::f32;
  } else if constexpr (std::is_same_v<U, std::int32_t>) {
    return DistType::i32;
  } else if constexpr (std::is_same_v<U, std::int64_t>) {
    return DistType::i64;
  } else {
    static_assert(std::is_same_v<U, std::uint8_t> || std::is_same_v<U, std::byte>,
                  "dist communicates double, float, int32_t, int64_t, uint8_t or std::byte");
    return DistType::u8;
  }
}
template <class B>
BufferRef ref(const B& b) {
  return {b.object_id(), const_cast<void*>(static_cast<const void*>(b.data())), b.size()};
}
}  // namespace detail

// ---- processes ----------------------------------------------------------------------------------

/// True if this build of sluice has MPI (SLUICE_MPI); without it a program is one process.
[[nodiscard]] bool mpi_built() noexcept;

/// The process's MPI set-up. Construct one at the top of main: it initializes MPI (asking for
/// MPI_THREAD_MULTIPLE) unless the program did, and finalizes what it initialized. Without it,
/// the first communicator initializes MPI and finalizes it at exit. Without MPI, nothing.
///
/// After a failure of communication anywhere (a rank that failed, see `fail`), the destructor
/// ends the job (MPI_Abort) instead of finalizing, since processes blocked in a collective with
/// a failed one would wait for ever.
class Environment {
 public:
  Environment();
  Environment(int& argc, char**& argv);
  /// Destroyed while an exception unwinds: tells every other process that this one failed.
  ~Environment();
  Environment(const Environment&) = delete;
  Environment& operator=(const Environment&) = delete;

  /// This process's rank in MPI_COMM_WORLD and their number (0 and 1 without MPI).
  [[nodiscard]] static int process_rank();
  [[nodiscard]] static int process_count();
  /// This process's place among the processes of its node and their number (0 and 1 alone):
  /// from the launcher's environment, else MPI's shared-memory split. A process per GPU uses
  /// cuda:node_process_rank(); a node runs at most as many ranks as it has GPUs.
  [[nodiscard]] static int node_process_rank();
  [[nodiscard]] static int node_process_count();
  /// Tells every other process that this one failed with `message`: their pending and later
  /// communication fails with it (reported as WorkFailed where they wait) instead of hanging.
  static void fail(std::string_view message) noexcept;
};

// ---- communicators ------------------------------------------------------------------------------

/// Reductions of the collectives.
enum class ReduceOp : std::uint8_t { sum, max, min };

/// The device this process uses when it holds one rank: the default device's backend (the
/// largest GPU's, else the host), the device numbered by the process's place among those of
/// its node (MPI's shared-memory split) modulo the backend's device count. With `local_ranks`
/// ranks per process, rank i of the process uses device (place * local_ranks + i) modulo the
/// count (on the host, host:0 for every rank).
/// `backend` picks another backend than the default device's ("host", "cuda").
[[nodiscard]] Device pick_device(int local_rank = 0, int local_ranks = 1,
                                 std::string_view backend = {});

/// True if this process was started by an MPI launcher (mpirun, mpiexec, srun): its environment
/// names its rank. Lets a program that also runs alone initialize MPI only when launched so.
[[nodiscard]] bool launched_by_mpirun() noexcept;

struct CommOptions {
  /// This process's ranks, one per context, in order. Empty: `local_ranks` new contexts on the
  /// devices pick_device gives.
  std::vector<Context> contexts{};
  int local_ranks = 1;
  /// The backend of the contexts made for `local_ranks` (empty: the default device's).
  std::string backend{};
  std::string name = "comm";
  /// Where the distributed solvers' small reductions run (sluice/ext/dist.hpp's ReducePath):
  /// `automatic` (SLUICE_DIST_REDUCE=peer|nccl|auto, by default the peer path where every
  /// rank's GPU reaches every other's memory), `peer` (refused with the reason where the GPUs
  /// cannot), `engine` (NCCL's or MPI's allgather). Every process asks for the same.
  ReducePath reductions = ReducePath::automatic;
  /// How the exchanges run (sluice/ext/dist.hpp's ExchangePath): `automatic`
  /// (SLUICE_DIST_EXCHANGE_PATH=peer|nccl|auto, by default the peer path where every rank's GPU
  /// reaches every other's memory), `peer` (refused with the reason where the GPUs cannot),
  /// `engine` (NCCL's or MPI's point-to-point calls). Every process asks for the same.
  ExchangePath exchanges = ExchangePath::automatic;
};

/// One rank of this process: where its communication is issued.
///
/// Every call issues one operation on `ctx` (default: the rank's context; any context of the
/// rank's device), marking what it reads and writes, and returns at once. Buffers live on the
/// rank's device. A collective's `checked` form (the default) first verifies that every rank
/// made the same call (operation, type, count, root) and fails every rank with a clear message
/// if not, at the cost of a small exchange; the dist layer's own objects check their sizes when
/// they are made and call the unchecked forms.
class Rank {
 public:
  Rank() = default;
  [[nodiscard]] int rank() const;
  [[nodiscard]] int size() const;
  [[nodiscard]] const Context& context() const;

  /// Elementwise reduction of every rank's `data` into every rank's `data`.
  template <class T>
  void allreduce(DeviceBuffer<T>& data, ReduceOp op,
                 std::source_location loc = std::source_location::current()) const {
    allreduce(data, op, context(), loc);
  }
  template <class T>
  void allreduce(DeviceBuffer<T>& data, ReduceOp op, const Context& ctx,
                 std::source_location loc = std::source_location::current()) const {
    allreduce(std::as_const(data), data, op, ctx, loc);
  }
  /// recv = the reduction of every rank's send (recv and send of equal sizes).
  template <class T>
  void allreduce(const DeviceBuffer<T>& send, DeviceBuffer<T>& recv, ReduceOp op,
                 const Context& ctx,
                 std::source_location loc = std::source_location::current()) const {
    issue_allreduce(detail::ref(send), detail::ref(recv), detail::dist_type_of<T>(), op, ctx, true,
                    loc);
  }
  /// A device value reduced across ranks where it lies: no host round trip.
  template <class T>
  void allreduce(Managed<T>& value, ReduceOp op,
                 std::source_location loc = std::source_location::current()) const {
    allreduce(value, op, context(), loc);
  }
  template <class T>
  void allreduce(Managed<T>& value, ReduceOp op, const Context& ctx,
                 std::source_location loc = std::source_location::current()) const {
    const detail::BufferRef v = managed_ref(value, ctx, loc);
    issue_allreduce(v, v, detail::dist_type_of<T>(), op, ctx, true, loc);
  }
  /// recv on rank `root` = the reduction of every rank's send (recv is not touched elsewhere).
  template <class T>
  void reduce(const DeviceBuffer<T>& send, DeviceBuffer<T>& recv, ReduceOp op, int root,
              const Context& ctx,
              std::source_location loc = std::source_location::current()) const {
    issue_reduce(detail::ref(send), detail::ref(recv), detail::dist_type_of<T>(), op, root, ctx,
                 loc);
  }
  /// Every rank's `data` = rank `root`'s.
  template <class T>
  void broadcast(DeviceBuffer<T>& data, int root, const Context& ctx,
                 std::source_location loc = std::source_location::current()) const {
    issue_broadcast(detail::ref(data), detail::dist_type_of<T>(), root, ctx, loc);
  }
  template <class T>
  void broadcast(Managed<T>& value, int root, const Context& ctx,
                 std::source_location loc = std::source_location::current()) const {
    issue_broadcast(managed_ref(value, ctx, loc, true), detail::dist_type_of<T>(), root, ctx, loc);
  }
  /// recv = every rank's send in rank order (recv.size() == send.size() * size()).
  template <class T>
  void allgather(const DeviceBuffer<T>& send, DeviceBuffer<T>& recv, const Context& ctx,
                 std::source_location loc = std::source_location::current()) const {
    issue_allgather(detail::ref(send), detail::ref(recv), detail::dist_type_of<T>(), ctx, true,
                    loc);
  }
  /// Sends `data` to rank `dest`. Completes (in stream order) once `dest` received it: pair a
  /// send with a receive issued before the peer's own send, or use `exchange`.
  template <class T>
  void send(const DeviceBuffer<T>& data, int dest, const Context& ctx,
            std::source_location loc = std::source_location::current()) const {
    const DistSegment s{dest, 0, data.size()};
    issue_exchange(detail::ref(data), {&s, 1}, {}, {}, detail::dist_type_of<T>(), ctx, loc);
  }
  /// Receives `data` (of the size sent) from rank `source`.
  template <class T>
  void recv(DeviceBuffer<T>& data, int source, const Context& ctx,
            std::source_location loc = std::source_location::current()) const {
    const DistSegment r{source, 0, data.size()};
    issue_exchange({}, {}, detail::ref(data), {&r, 1}, detail::dist_type_of<T>(), ctx, loc);
  }
  /// A neighbour exchange: sends `sends` segments of `send` and receives `recvs` segments into
  /// `recv` (which may be `send`, with disjoint ranges), all at once. Reads exactly the sent
  /// ranges and writes exactly the received ones, so work on other parts of the buffers
  /// overlaps it.
  template <class T>
  void exchange(const DeviceBuffer<T>& send, std::span<const DistSegment> sends,
                DeviceBuffer<T>& recv, std::span<const DistSegment> recvs, const Context& ctx,
                std::source_location loc = std::source_location::current()) const {
    issue_exchange(detail::ref(send), sends, detail::ref(recv), recvs, detail::dist_type_of<T>(),
                   ctx, loc);
  }

  // Untyped forms (the dist layer's own objects call these with checked = false).
  void issue_allreduce(detail::BufferRef send, detail::BufferRef recv, DistType type, ReduceOp op,
                       const Context& ctx, bool checked, std::source_location loc) const;
  void issue_reduce(detail::BufferRef send, detail::BufferRef recv, DistType type, ReduceOp op,
                    int root, const Context& ctx, std::source_location loc) const;
  void issue_broadcast(detail::BufferRef data, DistType type, int root, const Context& ctx,
                       std::source_location loc) const;
  void issue_allgather(detail::BufferRef send, detail::BufferRef recv, DistType type,
                       const Context& ctx, bool checked, std::source_location loc) const;
  void issue_exchange(detail::BufferRef send, std::span<const DistSegment> sends,
                      detail::BufferRef recv, std::span<const DistSegment> recvs, DistType type,
                      const Context& ctx, std::source_location loc) const;

  [[nodiscard]] int local_index() const noexcept { return local_; }
  [[nodiscard]] const std::shared_ptr<detail::CommState>& state() const noexcept { return state_; }

 private:
  friend class Comm;
  Rank(std::shared_ptr<detail::CommState> state, int local)
      : state_(std::move(state)), local_(local) {}
  template <class T>
  static detail::BufferRef managed_ref(Managed<T>& m, const Context& ctx, std::source_location loc,
                                       bool write_only = false) {
    if (!write_only) (void)m.read_ptr(ctx, loc);
    T* p = m.write_ptr(ctx, loc);
    return {m.object_id(), p, 1};
  }
  std::shared_ptr<detail::CommState> state_;
  int local_ = 0;
};

/// A communicator: its ranks in all processes, and this process's ranks (`local(i)`).
///
/// Made collectively: every process of the MPI communicator constructs it at the same point.
/// A handle: copies share the communicator. Its collective calls forward to `local(0)` and
/// require this process to hold one rank; with several, use `local(i)` (and issue every local
/// rank's part before waiting on any) or `for_each_local`.
class Comm {
 public:
  /// MPI_COMM_WORLD with one rank per process (`CommOptions{}`).
  Comm();
  explicit Comm(CommOptions options, std::source_location loc = std::source_location::current());
  /// Over a user's MPI communicator, passed as the bytes of its handle (sluice/dist_mpi.hpp's
  /// `from_mpi(MPI_Comm, options)` does this for you).
  Comm(const void* mpi_comm, std::size_t handle_bytes, CommOptions options,
       std::source_location loc = std::source_location::current());

  /// Ranks in all.
  [[nodiscard]] int size() const;
  /// Ranks of this process.
  [[nodiscard]] int local_size() const;
  /// Processes.
  [[nodiscard]] int processes() const;
  /// The rank of local rank `i`.
  [[nodiscard]] int rank(int i = 0) const;
  [[nodiscard]] const Context& context(int i = 0) const;
  [[nodiscard]] Rank local(int i = 0) const;
  /// "mpi", "local" (one process, host) or "nccl".
  [[nodiscard]] std::string_view engine() const;
  /// How the distributed solvers' small reductions run: "peer" (one kernel per rank, stores
  /// into the peers' memory) or the engine's name (its allgather and a finalize kernel).
  [[nodiscard]] std::string_view reductions() const;
  /// How the exchanges run: "peer" (copy engines into the peers' inboxes, no multiprocessor
  /// taken; larger messages still take the engine's path) or the engine's name.
  [[nodiscard]] std::string_view exchanges() const;
  [[nodiscard]] const std::string& name() const;

  /// Runs `fn(rank)` for every local rank, each on a thread of its own when there are several
  /// (NCCL needs one thread per device it drives), and returns once all returned; the first
  /// exception is rethrown.
  void for_each_local(const std::function<void(const Rank&)>& fn) const;

  template <class T>
  void allreduce(DeviceBuffer<T>& data, ReduceOp op,
                 std::source_location loc = std::source_location::current()) const {
    single(loc).allreduce(data, op, loc);
  }
  template <class T>
  void allreduce(Managed<T>& value, ReduceOp op,
                 std::source_location loc = std::source_location::current()) const {
    single(loc).allreduce(value, op, loc);
  }
  template <class T>
  void broadcast(DeviceBuffer<T>& data, int root,
                 std::source_location loc = std::source_location::current()) const {
    const Rank r = single(loc);
    r.broadcast(data, root, r.context(), loc);
  }
  template <class T>
  void allgather(const DeviceBuffer<T>& send, DeviceBuffer<T>& recv,
                 std::source_location loc = std::source_location::current()) const {
    const Rank r = single(loc);
    r.allgather(send, recv, r.context(), loc);
  }

  [[nodiscard]] const std::shared_ptr<detail::CommState>& state() const noexcept { return state_; }
  friend bool operator==(const Comm& a, const Comm& b) noexcept { return a.state_ == b.state_; }

 private:
  [[nodiscard]] Rank single(std::source_location loc) const;
  std::shared_ptr<detail::CommState> state_;
};

// ---- distributed vectors ------------------------------------------------------------------------

/// How a distributed vector's rows spread over the ranks: contiguous blocks in rank order
/// (PETSc's ownership ranges), and the room each rank's block keeps around it for ghost values
/// (a matrix-free stencil's ghost layers). Immutable; copies share it.
class Layout {
 public:
  Layout() = default;
  /// `global` rows over `ranks` ranks as PETSc splits them (PETSC_DECIDE): global / ranks each,
  /// the first global % ranks ranks one more.
  [[nodiscard]] static Layout split(int ranks, std::int64_t global, std::size_t halo = 0);
  /// From each rank's first row (ranks + 1 entries, the last the global size).
  [[nodiscard]] static Layout from_starts(std::vector<std::int64_t> starts, std::size_t halo = 0);

  [[nodiscard]] std::int64_t size() const noexcept { return starts_.empty() ? 0 : starts_.back(); }
  [[nodiscard]] int ranks() const noexcept {
    return starts_.empty() ? 0 : static_cast<int>(starts_.size()) - 1;
  }
  [[nodiscard]] std::int64_t start(int rank) const {
    return starts_.at(static_cast<std::size_t>(rank));
  }
  [[nodiscard]] std::int64_t end(int rank) const {
    return starts_.at(static_cast<std::size_t>(rank) + 1);
  }
  [[nodiscard]] std::int64_t local_size(int rank) const { return end(rank) - start(rank); }
  /// The rank that owns global row `row`.
  [[nodiscard]] int owner(std::int64_t row) const;
  /// Elements of room before and after every rank's block.
  [[nodiscard]] std::size_t halo() const noexcept { return halo_; }
  [[nodiscard]] const std::vector<std::int64_t>& starts() const noexcept { return starts_; }
  /// Same rows (the halo may differ).
  [[nodiscard]] bool same_rows(const Layout& other) const noexcept {
    return starts_ == other.starts_;
  }
  friend bool operator==(const Layout&, const Layout&) = default;

 private:
  std::vector<std::int64_t> starts_;
  std::size_t halo_ = 0;
};

/// A distributed vector of doubles: each rank holds its block of rows as an `la::Vec` on its
/// context (`local(i)` for this process's i-th rank). Move-only; `duplicate` makes another of
/// the same layout.
class Vec {
 public:
  Vec() = default;
  /// `global` rows split as Layout::split does. Collective: throws on every rank if the ranks
  /// were given different sizes.
  Vec(const Comm& comm, std::int64_t global,
      std::source_location loc = std::source_location::current());
  Vec(const Comm& comm, Layout layout, std::source_location loc = std::source_location::current());
  Vec(Vec&&) noexcept = default;
  Vec& operator=(Vec&&) noexcept = default;

  [[nodiscard]] const Comm& comm() const;
  [[nodiscard]] const Layout& layout() const noexcept { return layout_; }
  /// Global rows.
  [[nodiscard]] std::int64_t size() const noexcept { return layout_.size(); }
  [[nodiscard]] bool valid() const noexcept { return comm_ != nullptr; }
  /// Local rank i's block.
  [[nodiscard]] la::Vec& local(int i = 0) { return locals_.at(static_cast<std::size_t>(i)); }
  [[nodiscard]] const la::Vec& local(int i = 0) const {
    return locals_.at(static_cast<std::size_t>(i));
  }
  [[nodiscard]] int local_count() const noexcept { return static_cast<int>(locals_.size()); }

  [[nodiscard]] Vec duplicate(std::source_location loc = std::source_location::current()) const;
  /// Each local rank takes its rows of `global_values` (the whole vector, on every process).
  void assign(std::span<const double> global_values,
              std::source_location loc = std::source_location::current());
  /// The whole vector on every process (an allgather of the blocks; waits for it).
  [[nodiscard]] std::vector<double> to_vector(
      std::source_location loc = std::source_location::current()) const;

 private:
  std::shared_ptr<Comm> comm_;
  Layout layout_;
  std::vector<la::Vec> locals_;
};

// Element-wise operations, on each rank's context; no communication.
void set(Vec& x, double alpha, std::source_location loc = std::source_location::current());
void copy(const Vec& x, Vec& y, std::source_location loc = std::source_location::current());
void scale(Vec& x, double alpha, std::source_location loc = std::source_location::current());
void axpy(Vec& y, double alpha, const Vec& x,
          std::source_location loc = std::source_location::current());
void aypx(Vec& y, double beta, const Vec& x,
          std::source_location loc = std::source_location::current());
void axpby(Vec& y, double alpha, double beta, const Vec& x,
           std::source_location loc = std::source_location::current());
void waxpy(Vec& w, double alpha, const Vec& x, const Vec& y,
           std::source_location loc = std::source_location::current());
void pointwise_mult(Vec& w, const Vec& x, const Vec& y,
                    std::source_location loc = std::source_location::current());
void pointwise_divide(Vec& w, const Vec& x, const Vec& y,
                      std::source_location loc = std::source_location::current());
/// y += alpha x with one device value per local rank (`alpha[i]` on local rank i's device).
void axpy(Vec& y, std::span<const Managed<double>> alpha, const Vec& x,
          std::source_location loc = std::source_location::current());
void scale(Vec& x, std::span<const Managed<double>> alpha,
           std::source_location loc = std::source_location::current());

// Reductions across ranks. The synchronous forms wait for their result; the asynchronous ones
// leave it on every local rank's device (`out[i]` for local rank i, out.size() == local_count),
// nothing waiting on the host.
[[nodiscard]] double dot(const Vec& x, const Vec& y,
                         std::source_location loc = std::source_location::current());
[[nodiscard]] double norm(const Vec& x, la::NormType type = la::NormType::two,
                          std::source_location loc = std::source_location::current());
[[nodiscard]] double sum(const Vec& x, std::source_location loc = std::source_location::current());
[[nodiscard]] double max(const Vec& x, std::source_location loc = std::source_location::current());
[[nodiscard]] double min(const Vec& x, std::source_location loc = std::source_location::current());
void dot(const Vec& x, const Vec& y, std::span<Managed<double>> out,
         std::source_location loc = std::source_location::current());
void norm(const Vec& x, la::NormType type, std::span<Managed<double>> out,
          std::source_location loc = std::source_location::current());
void sum(const Vec& x, std::span<Managed<double>> out,
         std::source_location loc = std::source_location::current());

// ---- distributed matrices -----------------------------------------------------------------------

/// A distributed square operator: rows in blocks over the ranks (its `layout()`).
///
/// - Matrix-free stencils (`stencil`): the grid split along its slowest dimension (z in 3D, y in
///   2D) in whole planes; each rank's vectors keep one ghost plane on each side, which an
///   exchange with the neighbour ranks fills before the product reads it. The product of the
///   planes that need no ghost runs while the exchange is in flight.
/// - Assembled (`from_rows`, `from_triplets`, `read_matrix_market`, `stencil_csr`): PETSc's
///   MPIAIJ, each rank a CSR block of the columns it owns (the diagonal block) and a compressed
///   one of the columns others own (the off-diagonal block), with a ghost-exchange plan; the
///   exchange runs while the diagonal block's product does, the off-diagonal block's follows.
///
/// Immutable; copies share it (a handle).
class Mat {
 public:
  Mat() = default;
  [[nodiscard]] static Mat stencil(const Comm& comm, la::Stencil kind, std::int64_t nx,
                                   std::int64_t ny, std::int64_t nz = 1,
                                   std::source_location loc = std::source_location::current());
  /// The same operator assembled (MPIAIJ), rows split as Layout::split does.
  [[nodiscard]] static Mat stencil_csr(const Comm& comm, la::Stencil kind, std::int64_t nx,
                                       std::int64_t ny, std::int64_t nz = 1,
                                       std::source_location loc = std::source_location::current());
  /// MPIAIJ from a generator of this process's rows (`g(row, add)`, called once per owned row,
  /// in order), rows split as Layout::split does (or as `layout` says).
  [[nodiscard]] static Mat from_rows(
      const Comm& comm, std::int64_t rows,
      const std::function<void(std::int64_t row, const la::RowAdder&)>& g,
      std::source_location loc = std::source_location::current());
  [[nodiscard]] static Mat from_rows(
      const Comm& comm, Layout layout,
      const std::function<void(std::int64_t row, const la::RowAdder&)>& g,
      std::source_location loc = std::source_location::current());
  /// MPIAIJ from (row, col, value) entries that any process may give for any row (sent to the
  /// owners; duplicates summed).
  [[nodiscard]] static Mat from_triplets(
      const Comm& comm, std::int64_t rows, std::span<const la::Triplet> entries,
      std::source_location loc = std::source_location::current());
  /// A square Matrix Market file, read by process 0 and sent to the owners of its rows.
  [[nodiscard]] static Mat read_matrix_market(
      const Comm& comm, const std::string& path,
      std::source_location loc = std::source_location::current());

  [[nodiscard]] bool valid() const noexcept { return impl_ != nullptr; }
  [[nodiscard]] std::int64_t rows() const;
  [[nodiscard]] std::int64_t cols() const { return rows(); }
  /// Stored entries over all ranks (for a stencil: those its assembled form would have).
  [[nodiscard]] std::int64_t nnz() const;
  [[nodiscard]] bool is_matrix_free() const;
  [[nodiscard]] const Comm& comm() const;
  /// The row layout of the vectors it takes and gives (with the halo its products read).
  [[nodiscard]] const Layout& layout() const;
  /// A vector of this operator's layout (MatCreateVecs).
  [[nodiscard]] Vec create_vec(std::source_location loc = std::source_location::current()) const;
  /// Local rank i's diagonal block (a stencil: its planes, ghost planes as neighbours).
  [[nodiscard]] const la::Mat& diagonal_block(int i = 0) const;
  /// Local rank i's off-diagonal block (assembled only; an empty Mat where it has none).
  [[nodiscard]] const la::Mat& off_diagonal_block(int i = 0) const;

  [[nodiscard]] const std::shared_ptr<const detail::MatImpl>& impl() const noexcept {
    return impl_;
  }

 private:
  explicit Mat(std::shared_ptr<const detail::MatImpl> impl) : impl_(std::move(impl)) {}
  std::shared_ptr<const detail::MatImpl> impl_;
};

/// y = A x (collective; x and y of A's rows).
void mult(const Mat& A, const Vec& x, Vec& y,
          std::source_location loc = std::source_location::current());

// ---- Krylov solvers -----------------------------------------------------------------------------

/// `la::Ksp` across ranks: the same algorithms, options, modes and results. Each local rank runs
/// la's solver loop on its block with la's kernels; every reduction's partial sums are gathered
/// across ranks on the device (an allgather of a few doubles) and added up in rank order by a
/// step of their own before the solver logic runs, so all ranks hold the same state and stop at
/// the same iteration, and async and graph modes never wait on the host between checks.
class Ksp {
 public:
  explicit Ksp(Mat A, la::KspOptions options = {});
  ~Ksp();
  Ksp(Ksp&&) noexcept;
  Ksp& operator=(Ksp&&) noexcept;

  [[nodiscard]] const la::KspOptions& options() const noexcept { return options_; }
  void set_options(la::KspOptions options);
  [[nodiscard]] const Mat& operator_matrix() const noexcept { return A_; }
  [[nodiscard]] int check_interval() const noexcept;

  /// Solves A x = b (collective). Every rank returns the same result.
  la::KspResult solve(const Vec& b, Vec& x,
                      std::source_location loc = std::source_location::current());

 private:
  Mat A_;
  la::KspOptions options_;
  std::unique_ptr<detail::KspWork> work_;
};

}  // namespace sluice::dist
