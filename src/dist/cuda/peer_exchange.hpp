#pragma once
// Peer exchanges (sluice/ext/dist.hpp's ExchangePath::peer): an exchange's messages moved by the
// copy engines into an inbox on the receiver's device, ordered by stream memory operations on
// flags in host memory that every process of the node maps, so that no multiprocessor is taken
// (NCCL's send and receive kernels need some, which a product running beside them holds). Where
// every rank's GPU reaches every other's: peer access within a process, CUDA IPC between
// processes of one node. The NCCL engine routes each exchange's messages here or through NCCL
// (nccl_engine.cpp). No CUDA header here.

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "sluice/ext/dist.hpp"

struct CUstream_st;

namespace sluice::detail::dist {

class PeerExchange {
 public:
  /// The peer path for `config`'s ranks of this process, or null where it is not taken (one
  /// rank, the engine's path asked for, or `automatic` where some rank's GPU cannot reach
  /// another's). Collective across the communicator's processes, which all decide alike; throws
  /// the same Error on every process where `peer` was asked for and is impossible.
  [[nodiscard]] static std::unique_ptr<PeerExchange> make(const DistEngineConfig& config);
  ~PeerExchange();
  PeerExchange(const PeerExchange&) = delete;
  PeerExchange& operator=(const PeerExchange&) = delete;

  /// The most bytes one exchange sends one peer on this path (SLUICE_DIST_PEER_INBOX): the same
  /// on every process.
  [[nodiscard]] std::size_t slot_bytes() const noexcept { return slot_; }

  /// One message: `bytes` at `data` (on the rank's device), sent from or received into.
  struct Piece {
    void* data = nullptr;
    std::size_t bytes = 0;
  };
  /// An exchange of local rank `local` on `stream` (of its device) that moves messages on this
  /// path: first `begin`, then its `send`s, then (after whatever other path it takes) its
  /// `recv`s, then `end`. Every message of one call goes to (comes from) rank `peer` and the
  /// call's bytes fit a slot; the peer's matching exchange passes the same sizes.
  void begin(CUstream_st* stream, int local);
  void send(CUstream_st* stream, int local, int peer, std::span<const Piece> pieces);
  void recv(CUstream_st* stream, int local, int peer, std::span<const Piece> pieces);
  /// Hands the exchange's waits to the watchdog (its deadline).
  void end(int local);

  /// The text of a wait for a peer that passed its deadline (SLUICE_DIST_TIMEOUT), if one did.
  /// Called by the engine's watchdog (one thread).
  [[nodiscard]] std::optional<std::string> failure();
  /// Lets every wait in flight or to come pass at once (the communicator failed): the flags this
  /// process's ranks wait on are set past any epoch, by the host. A peer still running may
  /// lower one again: call hold_released until the contexts are synchronized.
  void abort() noexcept;
  void hold_released() noexcept;

 private:
  /// A stream memory wait of an exchange: until the flag at `flag` (host view) reaches `value`.
  struct Wait {
    const volatile std::uint64_t* flag = nullptr;
    std::uint64_t value = 0;
    int peer = 0;
    bool ack = false;  // waits for the peer to have emptied a slot (else for its message)
  };
  /// An exchange issued on the path: `seq` (1, 2, ...), written to `reached` as the stream gets
  /// there, and its waits.
  struct Pending {
    std::uint64_t seq = 0;
    std::vector<Wait> waits;
  };
  struct Local {
    int device = 0;
    int rank = 0;
    char* inbox = nullptr;                      // this rank's, on its device
    std::vector<char*> inboxes;                 // every rank's inbox as this device reaches it
    std::vector<void*> opened;                  // other processes' inboxes opened through CUDA IPC
    std::vector<std::uint64_t> sent, received;  // per peer: the exchanges that moved messages
    std::uint64_t seq = 0;
    Pending building;  // the exchange being issued (the issuing thread's)
    std::mutex mutex;  // guards `pending` (the issuing thread and the watchdog)
    std::deque<Pending> pending;
    // The watchdog's: the exchange it saw the stream wait in, and since when.
    std::uint64_t watched = 0;
    std::chrono::steady_clock::time_point since{};
  };
  PeerExchange() = default;
  void release() noexcept;
  [[nodiscard]] std::size_t flag_index(int kind, int owner, int peer) const noexcept;
  [[nodiscard]] std::uint64_t* device_flag(std::size_t index) const noexcept;
  [[nodiscard]] volatile std::uint64_t* host_flag(std::size_t index) const noexcept;
  [[nodiscard]] std::size_t slot_offset(int owner, int sender, std::uint64_t epoch) const noexcept;
  void wait(CUstream_st* stream, Local& loc, std::size_t flag, std::uint64_t value, int peer,
            bool ack);
  void write(CUstream_st* stream, std::size_t flag, std::uint64_t value) const;

  std::string name_;
  int size_ = 1;
  std::size_t slot_ = 0;
  std::int64_t timeout_ns_ = 0;
  void* shared_ = nullptr;  // the node's flags, mapped here (shared memory)
  std::size_t shared_bytes_ = 0;
  bool registered_ = false;
  std::uint64_t* device_flags_ = nullptr;  // the same, as the devices reach them
  std::atomic<bool> aborted_{false};
  std::vector<std::unique_ptr<Local>> locals_;
};

}  // namespace sluice::detail::dist
