#include "dist/process.hpp"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <initializer_list>
#include <mutex>
#include <thread>
#include <utility>

#include "sluice/error.hpp"

#ifdef SLUICE_HAVE_MPI
#include <mpi.h>
#endif

namespace sluice::detail::dist {
namespace {

struct FailureState {
  std::mutex mutex;
  std::atomic<bool> failed{false};
  std::string message;
};

FailureState& failure_state() {
  static auto* s = new FailureState;  // never destroyed: read during static teardown
  return *s;
}

void record_failure(const std::string& message) {
  auto& s = failure_state();
  std::lock_guard lock(s.mutex);
  if (s.failed.load()) return;
  s.message = message;
  s.failed.store(true, std::memory_order_release);
}

}  // namespace

double timeout_seconds() {
  static const double value = [] {
    const char* env = std::getenv("SLUICE_DIST_TIMEOUT");
    return env != nullptr && *env != '\0' ? std::strtod(env, nullptr) : 0.0;
  }();
  return value;
}

void back_off(unsigned round) {
  if (round < 64) return;
  if (round < 512) {
    std::this_thread::yield();
    return;
  }
  std::this_thread::sleep_for(std::chrono::microseconds(round < 4096 ? 20 : 200));
}

std::optional<std::string> process_failure() {
  auto& s = failure_state();
  if (!s.failed.load(std::memory_order_acquire)) return std::nullopt;
  std::lock_guard lock(s.mutex);
  return s.message;
}

int RankMap::process_of(int rank) const {
  const auto it = std::upper_bound(offset.begin(), offset.end(), rank);
  return static_cast<int>(it - offset.begin()) - 1;
}

void throw_if_failed(std::string_view what) {
  if (auto f = process_failure()) {
    throw Error(Errc::work_failed, std::string(what) + ": " + *f);
  }
}

#ifndef SLUICE_HAVE_MPI

// ---- without MPI: one process ------------------------------------------------------------------

bool mpi_built() noexcept {
  return false;
}
void mpi_init(int*, char***, bool) {}
void mpi_finalize() noexcept {}
int world_rank() {
  return 0;
}
int world_size() {
  return 1;
}
void fail_process(const std::string& message, bool) noexcept {
  try {
    record_failure(message);
  } catch (...) {
  }
}
void poll_failure_notices() noexcept {}

struct ProcComm::Impl {};

std::shared_ptr<ProcComm> ProcComm::world() {
  return std::make_shared<ProcComm>(std::make_unique<Impl>());
}

int ProcComm::world_node_rank() {
  return 0;
}

int ProcComm::world_node_size() {
  return 1;
}

std::shared_ptr<ProcComm> ProcComm::from_handle(const void*, std::size_t) {
  throw Error(Errc::unsupported,
              "dist: this sluice was built without MPI (SLUICE_MPI=OFF or no MPI found); "
              "rebuild with libopenmpi-dev installed to use an MPI communicator");
}

ProcComm::ProcComm(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
ProcComm::~ProcComm() = default;

void ProcComm::allgather(const void* send, std::size_t bytes, void* recv) const {
  std::memmove(recv, send, bytes);
}
std::vector<std::byte> ProcComm::allgatherv(std::span<const std::byte> send) const {
  return {send.begin(), send.end()};
}
void ProcComm::broadcast(void*, std::size_t, int) const {}
std::vector<std::vector<std::byte>> ProcComm::alltoallv(
    const std::vector<std::vector<std::byte>>& data) const {
  return data;
}
void ProcComm::allreduce(const void* send, void* recv, std::size_t count, DistType type, DistOp,
                         std::string_view) const {
  if (send != recv) std::memmove(recv, send, count * dist_type_size(type));
}
void ProcComm::reduce(const void* send, void* recv, std::size_t count, DistType type, DistOp, int,
                      std::string_view) const {
  if (send != recv) std::memmove(recv, send, count * dist_type_size(type));
}
void ProcComm::broadcast(void*, std::size_t, DistType, int, std::string_view) const {}
void ProcComm::allgatherv(const void* send, void* recv, std::span<const int> counts, DistType type,
                          std::string_view) const {
  if (send != recv) {
    std::memmove(recv, send, static_cast<std::size_t>(counts[0]) * dist_type_size(type));
  }
}
void ProcComm::check_signature(const DistSignature&, std::string_view) const {}
void ProcComm::exchange(std::span<const Message> sends, std::span<const Message> recvs, DistType,
                        std::string_view what) const {
  if (!sends.empty() || !recvs.empty()) {
    throw Error(Errc::invalid_state,
                std::string(what) + ": a message to another process in a build without MPI");
  }
}
struct ProcComm::Pending {};
std::shared_ptr<ProcComm::Pending> ProcComm::exchange_start(std::span<const Message> sends,
                                                            std::span<const Message> recvs,
                                                            DistType type,
                                                            std::string_view what) const {
  exchange(sends, recvs, type, what);
  return std::make_shared<Pending>();
}
void ProcComm::exchange_finish(Pending&, std::string_view) const {}

#else

// ---- MPI ---------------------------------------------------------------------------------------

namespace {

/// MPI's state as sluice sees it.
struct Mpi {
  std::mutex mutex;  // held around every MPI call unless the library is thread-multiple
  bool multiple = false;
  bool owned = false;      // sluice initialized MPI and finalizes it
  bool finalized = false;  // by sluice
  MPI_Comm notices = MPI_COMM_NULL;
  MPI_Request notice_request = MPI_REQUEST_NULL;
  char notice[1024] = {};
  std::vector<MPI_Request> sent_notices;
  std::vector<std::string> notice_texts;  // the buffers of sent notices
};

Mpi& mpi() {
  static auto* m = new Mpi;
  return *m;
}

constexpr int kNoticeTag = 7;

/// Holds the MPI lock unless MPI is thread-multiple.
class MpiLock {
 public:
  MpiLock() : lock_(mpi().mutex, std::defer_lock) {
    if (!mpi().multiple) lock_.lock();
  }

 private:
  std::unique_lock<std::mutex> lock_;
};

std::string mpi_error_text(int code) {
  char text[MPI_MAX_ERROR_STRING];
  int len = 0;
  if (MPI_Error_string(code, text, &len) != MPI_SUCCESS) return "MPI error " + std::to_string(code);
  return {text, static_cast<std::size_t>(len)};
}

/// Throws (after failing the process) if an MPI call returned an error.
void check(int code, std::string_view what) {
  if (code == MPI_SUCCESS) return;
  const std::string message = "process " + std::to_string(world_rank()) + ": " + std::string(what) +
                              ": " + mpi_error_text(code);
  fail_process(message, true);
  throw Error(Errc::backend_failure, message);
}

MPI_Datatype mpi_type(DistType t) {
  switch (t) {
    case DistType::u8:
      return MPI_UINT8_T;
    case DistType::i32:
      return MPI_INT32_T;
    case DistType::i64:
      return MPI_INT64_T;
    case DistType::f32:
      return MPI_FLOAT;
    case DistType::f64:
      return MPI_DOUBLE;
  }
  return MPI_BYTE;
}

MPI_Op mpi_op(DistOp op) {
  switch (op) {
    case DistOp::sum:
      return MPI_SUM;
    case DistOp::max:
      return MPI_MAX;
    case DistOp::min:
      return MPI_MIN;
  }
  return MPI_SUM;
}

bool mpi_running() {
  int init = 0, fin = 0;
  MPI_Initialized(&init);
  MPI_Finalized(&fin);
  return init != 0 && fin == 0;
}

/// Tests for a notice from another process (the MPI lock held or not needed).
void poll_notices_locked() {
  auto& m = mpi();
  if (m.notice_request == MPI_REQUEST_NULL) return;
  int done = 0;
  MPI_Status status;
  if (MPI_Test(&m.notice_request, &done, &status) != MPI_SUCCESS || done == 0) return;
  m.notice[sizeof m.notice - 1] = '\0';
  record_failure(m.notice);
}

void start_notices() {
  auto& m = mpi();
  if (m.notices != MPI_COMM_NULL) return;
  MPI_Comm_dup(MPI_COMM_WORLD, &m.notices);
  MPI_Comm_set_errhandler(m.notices, MPI_ERRORS_RETURN);
  MPI_Irecv(m.notice, sizeof m.notice, MPI_CHAR, MPI_ANY_SOURCE, kNoticeTag, m.notices,
            &m.notice_request);
}

/// Waits for `requests` (MPI locked per test), failing on a notice, an error or the deadline.
/// `explain(k, code)` may say better than MPI what request k's error means.
void wait_all(std::span<MPI_Request> requests, std::span<MPI_Status> statuses,
              std::string_view what,
              const std::function<std::string(std::size_t, int)>& explain = {}) {
  const double limit = timeout_seconds();
  const auto start = std::chrono::steady_clock::now();
  for (unsigned round = 0;; ++round) {
    int done = 0;
    int code = MPI_SUCCESS;
    {
      MpiLock lock;
      code = MPI_Testall(static_cast<int>(requests.size()), requests.data(), &done,
                         statuses.empty() ? MPI_STATUSES_IGNORE : statuses.data());
      poll_notices_locked();
    }
    if (code != MPI_SUCCESS) {
      // Testall reports the failing request's error in its status.
      for (std::size_t k = 0; k < statuses.size(); ++k) {
        const int e = statuses[k].MPI_ERROR;
        if (e == MPI_SUCCESS || e == MPI_ERR_PENDING) continue;
        if (explain) {
          if (std::string text = explain(k, e); !text.empty()) {
            fail_process(text, true);
            throw Error(Errc::invalid_argument, text);
          }
        }
        code = e;
      }
      check(code, what);
    }
    if (done != 0) return;
    throw_if_failed(what);
    if (limit > 0 &&
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() > limit) {
      const std::string message = "process " + std::to_string(world_rank()) + ": " +
                                  std::string(what) + " did not complete within " +
                                  std::to_string(limit) +
                                  " s (SLUICE_DIST_TIMEOUT): a process may have stopped "
                                  "communicating, or called this operation out of order";
      fail_process(message, true);
      throw Error(Errc::work_failed, message);
    }
    back_off(round);
  }
}

void wait_one(MPI_Request& request, std::string_view what) {
  MPI_Status status;
  wait_all({&request, 1}, {&status, 1}, what);
}

void finalize_at_exit() {
  mpi_finalize();
}

}  // namespace

bool mpi_built() noexcept {
  return true;
}

void mpi_init(int* argc, char*** argv, bool owned) {
  auto& m = mpi();
  std::lock_guard lock(m.mutex);
  int init = 0;
  MPI_Initialized(&init);
  int provided = MPI_THREAD_SINGLE;
  if (init == 0) {
    if (MPI_Init_thread(argc, argv, MPI_THREAD_MULTIPLE, &provided) != MPI_SUCCESS) {
      throw Error(Errc::backend_failure, "dist: MPI_Init_thread failed");
    }
    m.owned = true;
    if (!owned) std::atexit(finalize_at_exit);
  } else {
    MPI_Query_thread(&provided);
  }
  if (provided < MPI_THREAD_SERIALIZED) {
    throw Error(Errc::unsupported,
                "dist: MPI was initialized with a thread level below MPI_THREAD_SERIALIZED; "
                "sluice calls MPI from its contexts' threads: initialize it with "
                "MPI_Init_thread(..., MPI_THREAD_MULTIPLE, ...) or let sluice do it");
  }
  m.multiple = provided >= MPI_THREAD_MULTIPLE;
  start_notices();
}

void mpi_finalize() noexcept {
  auto& m = mpi();
  std::lock_guard lock(m.mutex);
  if (!m.owned || m.finalized || !mpi_running()) return;
  m.finalized = true;
  poll_notices_locked();
  if (failure_state().failed.load()) {
    // Let the notices go out and the others report, then leave MPI as it is: MPI_Finalize would
    // wait for operations and processes that never complete. The process exits on its own; mpirun
    // then ends the job, reporting a process that exited without finalizing: say why here, since
    // mpirun's report cannot.
    {
      auto& f = failure_state();
      std::lock_guard failure_lock(f.mutex);
      std::fprintf(stderr, "sluice: dist: process %d leaves MPI unfinalized after a failure: %s\n",
                   world_rank(), f.message.c_str());
    }
    const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(500);
    while (!m.sent_notices.empty() && std::chrono::steady_clock::now() < until) {
      int done = 0;
      MPI_Testall(static_cast<int>(m.sent_notices.size()), m.sent_notices.data(), &done,
                  MPI_STATUSES_IGNORE);
      if (done != 0) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    return;
  }
  if (m.notice_request != MPI_REQUEST_NULL) {
    MPI_Cancel(&m.notice_request);
    MPI_Wait(&m.notice_request, MPI_STATUS_IGNORE);
  }
  if (m.notices != MPI_COMM_NULL) MPI_Comm_free(&m.notices);
  MPI_Finalize();
}

int world_rank() {
  if (!mpi_running()) return 0;
  int r = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &r);
  return r;
}

int world_size() {
  if (!mpi_running()) return 1;
  int s = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &s);
  return s;
}

void poll_failure_notices() noexcept {
  try {
    if (!mpi_running()) return;
    MpiLock lock;
    poll_notices_locked();
  } catch (...) {
  }
}

void fail_process(const std::string& message, bool notify) noexcept {
  try {
    record_failure(message);
    if (!notify || !mpi_running()) return;
    auto& m = mpi();
    MpiLock lock;
    if (m.notices == MPI_COMM_NULL || !m.sent_notices.empty()) return;  // once
    int me = 0, n = 1;
    MPI_Comm_rank(m.notices, &me);
    MPI_Comm_size(m.notices, &n);
    m.notice_texts.reserve(static_cast<std::size_t>(n));
    for (int p = 0; p < n; ++p) {
      if (p == me) continue;
      m.notice_texts.push_back(message.substr(0, sizeof m.notice - 1));
      const auto& text = m.notice_texts.back();
      MPI_Request r = MPI_REQUEST_NULL;
      MPI_Isend(text.c_str(), static_cast<int>(text.size() + 1), MPI_CHAR, p, kNoticeTag, m.notices,
                &r);
      m.sent_notices.push_back(r);
    }
  } catch (...) {
  }
}

struct ProcComm::Impl {
  MPI_Comm ctl = MPI_COMM_NULL, coll = MPI_COMM_NULL, p2p = MPI_COMM_NULL;
  ~Impl() {
    if (!mpi_running()) return;
    for (MPI_Comm* c : {&ctl, &coll, &p2p}) {
      if (*c != MPI_COMM_NULL) MPI_Comm_free(c);
    }
  }
};

namespace {
std::shared_ptr<ProcComm> make_comm(MPI_Comm base) {
  auto impl = std::make_unique<ProcComm::Impl>();
  for (MPI_Comm* c : {&impl->ctl, &impl->coll, &impl->p2p}) {
    check(MPI_Comm_dup(base, c), "MPI_Comm_dup");
    MPI_Comm_set_errhandler(*c, MPI_ERRORS_RETURN);
  }
  return std::shared_ptr<ProcComm>(new ProcComm(std::move(impl)));
}
}  // namespace

ProcComm::ProcComm(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {
  MPI_Comm_rank(impl_->ctl, &rank_);
  MPI_Comm_size(impl_->ctl, &size_);
  MPI_Comm node;
  MPI_Comm_split_type(impl_->ctl, MPI_COMM_TYPE_SHARED, rank_, MPI_INFO_NULL, &node);
  MPI_Comm_rank(node, &node_rank_);
  MPI_Comm_free(&node);
}

ProcComm::~ProcComm() = default;

std::shared_ptr<ProcComm> ProcComm::world() {
  mpi_init(nullptr, nullptr, false);
  return make_comm(MPI_COMM_WORLD);
}

namespace {
/// The process's place on its node and the node's process count from MPI's shared-memory split
/// (collective on MPI_COMM_WORLD: the first call, on every process alike).
const std::pair<int, int>& node_split() {
  mpi_init(nullptr, nullptr, false);
  static const std::pair<int, int> split = [] {
    int world = 0, place = 0, count = 1;
    MPI_Comm_rank(MPI_COMM_WORLD, &world);
    MPI_Comm node;
    MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, world, MPI_INFO_NULL, &node);
    MPI_Comm_rank(node, &place);
    MPI_Comm_size(node, &count);
    MPI_Comm_free(&node);
    return std::pair{place, count};
  }();
  return split;
}

int from_launcher(std::initializer_list<const char*> vars) {
  for (const char* var : vars) {
    if (const char* v = std::getenv(var); v != nullptr && *v != '\0') return std::atoi(v);
  }
  return -1;
}
}  // namespace

int ProcComm::world_node_rank() {
  // The launcher says it (no collective call needed); else MPI's shared-memory split does.
  const int r = from_launcher({"OMPI_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID", "SLURM_LOCALID"});
  return r >= 0 ? r : node_split().first;
}

int ProcComm::world_node_size() {
  const int n = from_launcher({"OMPI_COMM_WORLD_LOCAL_SIZE", "MPI_LOCALNRANKS"});
  return n >= 1 ? n : node_split().second;
}

std::shared_ptr<ProcComm> ProcComm::from_handle(const void* handle, std::size_t bytes) {
  if (bytes != sizeof(MPI_Comm)) {
    throw Error(Errc::invalid_argument,
                "dist: the MPI communicator handle has " + std::to_string(bytes) +
                    " bytes, this sluice's MPI uses " + std::to_string(sizeof(MPI_Comm)) +
                    ": build the program against the MPI sluice was built with");
  }
  mpi_init(nullptr, nullptr, false);
  MPI_Comm c;
  std::memcpy(&c, handle, sizeof c);
  return make_comm(c);
}

void ProcComm::allgather(const void* send, std::size_t bytes, void* recv) const {
  MPI_Request r;
  {
    MpiLock lock;
    check(MPI_Iallgather(send, static_cast<int>(bytes), MPI_BYTE, recv, static_cast<int>(bytes),
                         MPI_BYTE, impl_->ctl, &r),
          "MPI_Iallgather");
  }
  wait_one(r, "dist set-up (allgather)");
}

std::vector<std::byte> ProcComm::allgatherv(std::span<const std::byte> send) const {
  const int mine = static_cast<int>(send.size());
  std::vector<int> counts(static_cast<std::size_t>(size_));
  allgather(&mine, sizeof mine, counts.data());
  std::vector<int> displs(counts.size());
  int total = 0;
  for (std::size_t p = 0; p < counts.size(); ++p) {
    displs[p] = total;
    total += counts[p];
  }
  std::vector<std::byte> out(static_cast<std::size_t>(total));
  MPI_Request r;
  {
    MpiLock lock;
    check(MPI_Iallgatherv(send.data(), mine, MPI_BYTE, out.data(), counts.data(), displs.data(),
                          MPI_BYTE, impl_->ctl, &r),
          "MPI_Iallgatherv");
  }
  wait_one(r, "dist set-up (allgatherv)");
  return out;
}

void ProcComm::broadcast(void* data, std::size_t bytes, int root) const {
  MPI_Request r;
  {
    MpiLock lock;
    check(MPI_Ibcast(data, static_cast<int>(bytes), MPI_BYTE, root, impl_->ctl, &r), "MPI_Ibcast");
  }
  wait_one(r, "dist set-up (broadcast)");
}

std::vector<std::vector<std::byte>> ProcComm::alltoallv(
    const std::vector<std::vector<std::byte>>& data) const {
  const auto n = static_cast<std::size_t>(size_);
  std::vector<int> send_counts(n), recv_counts(n), sdispls(n), rdispls(n);
  std::vector<std::byte> sendbuf;
  for (std::size_t p = 0; p < n; ++p) {
    send_counts[p] = static_cast<int>(data[p].size());
    sdispls[p] = static_cast<int>(sendbuf.size());
    sendbuf.insert(sendbuf.end(), data[p].begin(), data[p].end());
  }
  MPI_Request r;
  {
    MpiLock lock;
    check(MPI_Ialltoall(send_counts.data(), 1, MPI_INT, recv_counts.data(), 1, MPI_INT, impl_->ctl,
                        &r),
          "MPI_Ialltoall");
  }
  wait_one(r, "dist set-up (alltoall)");
  int total = 0;
  for (std::size_t p = 0; p < n; ++p) {
    rdispls[p] = total;
    total += recv_counts[p];
  }
  std::vector<std::byte> recvbuf(static_cast<std::size_t>(total));
  {
    MpiLock lock;
    check(
        MPI_Ialltoallv(sendbuf.data(), send_counts.data(), sdispls.data(), MPI_BYTE, recvbuf.data(),
                       recv_counts.data(), rdispls.data(), MPI_BYTE, impl_->ctl, &r),
        "MPI_Ialltoallv");
  }
  wait_one(r, "dist set-up (alltoallv)");
  std::vector<std::vector<std::byte>> out(n);
  for (std::size_t p = 0; p < n; ++p) {
    out[p].assign(recvbuf.begin() + rdispls[p], recvbuf.begin() + rdispls[p] + recv_counts[p]);
  }
  return out;
}

void ProcComm::allreduce(const void* send, void* recv, std::size_t count, DistType type, DistOp op,
                         std::string_view what) const {
  MPI_Request r;
  {
    MpiLock lock;
    check(MPI_Iallreduce(send == recv ? MPI_IN_PLACE : send, recv, static_cast<int>(count),
                         mpi_type(type), mpi_op(op), impl_->coll, &r),
          what);
  }
  wait_one(r, what);
}

void ProcComm::reduce(const void* send, void* recv, std::size_t count, DistType type, DistOp op,
                      int root, std::string_view what) const {
  MPI_Request r;
  {
    MpiLock lock;
    const bool in_place = rank_ == root && send == recv;
    check(MPI_Ireduce(in_place ? MPI_IN_PLACE : send, recv, static_cast<int>(count), mpi_type(type),
                      mpi_op(op), root, impl_->coll, &r),
          what);
  }
  wait_one(r, what);
}

void ProcComm::broadcast(void* data, std::size_t count, DistType type, int root,
                         std::string_view what) const {
  MPI_Request r;
  {
    MpiLock lock;
    check(MPI_Ibcast(data, static_cast<int>(count), mpi_type(type), root, impl_->coll, &r), what);
  }
  wait_one(r, what);
}

void ProcComm::allgatherv(const void* send, void* recv, std::span<const int> counts, DistType type,
                          std::string_view what) const {
  std::vector<int> displs(counts.size());
  int total = 0;
  for (std::size_t p = 0; p < counts.size(); ++p) {
    displs[p] = total;
    total += counts[p];
  }
  MPI_Request r;
  {
    MpiLock lock;
    check(MPI_Iallgatherv(send, counts[static_cast<std::size_t>(rank_)], mpi_type(type), recv,
                          counts.data(), displs.data(), mpi_type(type), impl_->coll, &r),
          what);
  }
  wait_one(r, what);
}

void ProcComm::check_signature(const DistSignature& sig, std::string_view what) const {
  const std::uint64_t mine[5] = {
      static_cast<std::uint64_t>(sig.call), static_cast<std::uint64_t>(sig.type),
      static_cast<std::uint64_t>(sig.op),
      static_cast<std::uint64_t>(static_cast<std::uint32_t>(sig.root)), sig.count};
  std::vector<std::uint64_t> all(5 * static_cast<std::size_t>(size_));
  MPI_Request r;
  {
    MpiLock lock;
    check(MPI_Iallgather(mine, 5, MPI_UINT64_T, all.data(), 5, MPI_UINT64_T, impl_->coll, &r),
          what);
  }
  wait_one(r, what);
  static constexpr const char* kFields[] = {"operation", "element type", "reduction", "root",
                                            "count"};
  for (int p = 1; p < size_; ++p) {
    for (int f = 0; f < 5; ++f) {
      const auto a = all[static_cast<std::size_t>(f)];
      const auto b = all[static_cast<std::size_t>(5 * p + f)];
      if (a == b) continue;
      const std::string message = std::string(what) + ": process " + std::to_string(p) +
                                  " called it with " + kFields[f] + " " + std::to_string(b) +
                                  " and process 0 with " + std::to_string(a) +
                                  "; every rank must make the same collective call";
      fail_process(message, true);
      throw Error(Errc::invalid_argument, message);
    }
  }
}

/// A started exchange: its requests (receives first) and what the receives expect.
struct ProcComm::Pending {
  std::vector<MPI_Request> requests;
  std::vector<Message> recvs;
  MPI_Datatype type = MPI_DATATYPE_NULL;
  bool finished = false;

  Pending() = default;
  Pending(const Pending&) = delete;
  Pending& operator=(const Pending&) = delete;
  ~Pending() {
    if (finished) return;
    // Dropped unfinished (its operation failed or never ran): nothing may still write into
    // buffers that are about to be reused.
    MpiLock lock;
    for (auto& r : requests) {
      if (r == MPI_REQUEST_NULL) continue;
      MPI_Cancel(&r);
      MPI_Request_free(&r);
    }
  }
};

void ProcComm::exchange(std::span<const Message> sends, std::span<const Message> recvs,
                        DistType type, std::string_view what) const {
  const auto pending = exchange_start(sends, recvs, type, what);
  exchange_finish(*pending, what);
}

std::shared_ptr<ProcComm::Pending> ProcComm::exchange_start(std::span<const Message> sends,
                                                            std::span<const Message> recvs,
                                                            DistType type,
                                                            std::string_view what) const {
  auto p = std::make_shared<Pending>();
  p->requests.assign(sends.size() + recvs.size(), MPI_REQUEST_NULL);
  p->recvs.assign(recvs.begin(), recvs.end());
  p->type = mpi_type(type);
  MpiLock lock;
  std::size_t k = 0;
  // A longer message than a receive expects fails with MPI's truncation error; a shorter one
  // is caught in exchange_finish.
  for (const auto& m : recvs) {
    check(MPI_Irecv(m.data, static_cast<int>(m.count), p->type, m.process, m.tag, impl_->p2p,
                    &p->requests[k++]),
          what);
  }
  for (const auto& m : sends) {
    check(MPI_Isend(m.data, static_cast<int>(m.count), p->type, m.process, m.tag, impl_->p2p,
                    &p->requests[k++]),
          what);
  }
  return p;
}

void ProcComm::exchange_finish(Pending& p, std::string_view what) const {
  const auto& recvs = p.recvs;
  std::vector<MPI_Status> statuses(p.requests.size());
  wait_all(p.requests, statuses, what, [&](std::size_t k, int code) -> std::string {
    int cls = code;
    MPI_Error_class(code, &cls);
    if (k >= recvs.size() || cls != MPI_ERR_TRUNCATE) return {};
    return std::string(what) + ": process " + std::to_string(recvs[k].process) +
           " sent more than the " + std::to_string(recvs[k].count) + " elements process " +
           std::to_string(rank_) + " expected";
  });
  p.finished = true;
  for (std::size_t k = 0; k < recvs.size(); ++k) {
    int got = 0;
    MPI_Get_count(&statuses[k], p.type, &got);
    if (static_cast<std::size_t>(got) != recvs[k].count) {
      const std::string message =
          std::string(what) + ": process " + std::to_string(recvs[k].process) + " sent " +
          std::to_string(got) + " elements where process " + std::to_string(rank_) + " expected " +
          std::to_string(recvs[k].count);
      fail_process(message, true);
      throw Error(Errc::invalid_argument, message);
    }
  }
}

#endif

}  // namespace sluice::detail::dist
