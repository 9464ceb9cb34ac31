// The host backend's engine (sluice/ext/dist.hpp): each call is one host task of the context's
// queue, so it runs in stream order on the context's worker and never blocks the issuing thread.
//
// Between processes it speaks MPI (dist/process.hpp); between the ranks of one process it hands
// data over in memory. A collective meets the process's other local ranks at a rendezvous (their
// k-th collective each: every rank's calls run in its issue order, which the dist layer keeps
// with one tracked object per rank), and the last to arrive combines the local contributions,
// makes the one MPI call of the process and hands out the result. Point-to-point messages between
// local ranks go through mailboxes: a send posts its data and waits until the receiver copied it;
// a receive claims its message when its exchange starts (exchanges run in two halves too).
//
// Every wait polls the process's failure state (a failed rank anywhere fails everybody's pending
// communication) and the optional deadline.

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "dist/host/host_engine.hpp"
#include "dist/process.hpp"
#include "sluice/error.hpp"

namespace sluice::detail::dist {
namespace {

template <class T>
void combine_into(T* acc, const T* in, std::size_t n, DistOp op) {
  for (std::size_t i = 0; i < n; ++i) {
    switch (op) {
      case DistOp::sum:
        acc[i] = static_cast<T>(acc[i] + in[i]);
        break;
      case DistOp::max:
        acc[i] = acc[i] < in[i] ? in[i] : acc[i];
        break;
      case DistOp::min:
        acc[i] = in[i] < acc[i] ? in[i] : acc[i];
        break;
    }
  }
}

void combine_into(void* acc, const void* in, std::size_t n, DistType t, DistOp op) {
  switch (t) {
    case DistType::u8:
      return combine_into(static_cast<std::uint8_t*>(acc), static_cast<const std::uint8_t*>(in), n,
                          op);
    case DistType::i32:
      return combine_into(static_cast<std::int32_t*>(acc), static_cast<const std::int32_t*>(in), n,
                          op);
    case DistType::i64:
      return combine_into(static_cast<std::int64_t*>(acc), static_cast<const std::int64_t*>(in), n,
                          op);
    case DistType::f32:
      return combine_into(static_cast<float*>(acc), static_cast<const float*>(in), n, op);
    case DistType::f64:
      return combine_into(static_cast<double*>(acc), static_cast<const double*>(in), n, op);
  }
}

bool operator==(const DistSignature& a, const DistSignature& b) {
  return a.call == b.call && a.type == b.type && a.op == b.op && a.root == b.root &&
         a.count == b.count;
}

std::string describe(const DistSignature& s) {
  return std::string(dist_call_name(s.call)) + " of " + std::to_string(s.count) + " elements" +
         (s.call == DistCall::reduce || s.call == DistCall::broadcast
              ? " from root " + std::to_string(s.root)
              : std::string());
}

/// One rank's part of a collective.
struct Part {
  DistSignature sig;
  const void* send = nullptr;
  void* recv = nullptr;
};

class HostEngine final : public DistEngine, public std::enable_shared_from_this<HostEngine> {
 public:
  HostEngine(const DistEngineConfig& config, const HostTransport& transport)
      : procs_(transport.procs),
        map_(transport.map),
        ranks_(config.ranks),
        locals_(static_cast<int>(config.ranks.size())),
        next_(config.ranks.size(), 0) {}

  std::string_view name() const noexcept override { return procs_->size() > 1 ? "mpi" : "local"; }

  void allreduce(Stream& stream, int local, const void* send, void* recv, std::size_t count,
                 DistType type, DistOp op, bool checked, const OpInfo& info) override {
    collective(stream, local, {{DistCall::allreduce, type, op, 0, count}, send, recv}, checked,
               info);
  }
  void reduce(Stream& stream, int local, const void* send, void* recv, std::size_t count,
              DistType type, DistOp op, int root, bool checked, const OpInfo& info) override {
    collective(stream, local, {{DistCall::reduce, type, op, root, count}, send, recv}, checked,
               info);
  }
  void broadcast(Stream& stream, int local, void* data, std::size_t count, DistType type, int root,
                 bool checked, const OpInfo& info) override {
    collective(stream, local, {{DistCall::broadcast, type, DistOp::sum, root, count}, data, data},
               checked, info);
  }
  void allgather(Stream& stream, int local, const void* send, void* recv, std::size_t count,
                 DistType type, bool checked, const OpInfo& info) override {
    collective(stream, local, {{DistCall::allgather, type, DistOp::sum, 0, count}, send, recv},
               checked, info);
  }

  void exchange(Stream& stream, int local, const void* send, std::span<const DistSegment> sends,
                void* recv, std::span<const DistSegment> recvs, DistType type,
                const OpInfo& info) override {
    stream.host_task(
        [self = shared_from_this(), local, type, what = std::string(info.what),
         part = OwnedPart{send, {sends.begin(), sends.end()}, recv, {recvs.begin(), recvs.end()}}] {
          Started st = self->start_exchange(local, {&part, 1}, type, what);
          self->finish_exchange(local, st, what);
        },
        info);
  }

  bool splits_exchanges() const noexcept override { return true; }

  void exchange_start(Stream& stream, int local, std::span<const DistExchangePart> parts,
                      DistType type, const void* key, const OpInfo& info) override {
    stream.host_task(
        [self = shared_from_this(), local, type, key, owned = own(parts),
         what = std::string(info.what)] {
          Started st = self->start_exchange(local, owned, type, what);
          std::lock_guard lock(self->mutex_);
          // One still here with this key never finished (its stream failed before): replaced,
          // its MPI requests are cancelled as it is dropped.
          self->started_[{local, key}] = std::move(st);
        },
        info);
  }

  void exchange_finish(Stream& stream, int local, const void* key, const OpInfo& info) override {
    stream.host_task(
        [self = shared_from_this(), local, key, what = std::string(info.what)] {
          Started st;
          {
            std::lock_guard lock(self->mutex_);
            const auto it = self->started_.find({local, key});
            if (it == self->started_.end()) {
              throw Error(Errc::invalid_state, what + ": no exchange was started here");
            }
            st = std::move(it->second);
            self->started_.erase(it);
          }
          self->finish_exchange(local, st, what);
        },
        info);
  }

 private:
  /// A collective's meeting point: the k-th collective of every local rank.
  struct Slot {
    std::vector<Part> parts;
    int arrived = 0;
    int left = 0;
    bool done = false;
    std::string error;
  };
  /// A message between two local ranks, waiting for its receiver.
  struct Post {
    const std::byte* data = nullptr;
    std::size_t bytes = 0;
    bool taken = false;
    std::string error;
  };

  void collective(Stream& stream, int local, Part part, bool checked, const OpInfo& info) {
    stream.host_task(
        [self = shared_from_this(), local, part, checked, what = std::string(info.what)] {
          self->run_collective(local, part, checked, what);
        },
        info);
  }

  /// Waits on cv_ (lock held) until `ready()`, failing on a failure of the process or the
  /// deadline.
  template <class Ready>
  void wait_locked(std::unique_lock<std::mutex>& lock, Ready&& ready, const std::string& what) {
    const double limit = timeout_seconds();
    const auto start = std::chrono::steady_clock::now();
    while (!ready()) {
      cv_.wait_for(lock, std::chrono::milliseconds(5));
      if (ready()) return;
      if (auto f = process_failure()) throw Error(Errc::work_failed, what + ": " + *f);
      if (limit > 0 &&
          std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() > limit) {
        const std::string message =
            what + " did not complete within " + std::to_string(limit) +
            " s (SLUICE_DIST_TIMEOUT): a rank of this process did not make the matching call";
        fail_process(message, true);
        throw Error(Errc::work_failed, message);
      }
    }
  }

  void run_collective(int local, const Part& part, bool checked, const std::string& what) {
    throw_if_failed(what);
    if (locals_ == 1) {
      run_process_part(std::vector<Part>{part}, checked, what);
      return;
    }
    std::unique_lock lock(mutex_);
    const std::uint64_t k = next_[static_cast<std::size_t>(local)]++;
    Slot& slot = slots_[k];
    if (slot.parts.empty()) slot.parts.resize(static_cast<std::size_t>(locals_));
    slot.parts[static_cast<std::size_t>(local)] = part;
    if (++slot.arrived == locals_) {
      // The last to arrive does the process's part for everybody.
      lock.unlock();
      std::string error;
      try {
        run_process_part(slot.parts, checked, what);
      } catch (const std::exception& e) {
        error = e.what();
        // Thrown again below as this rank's own: one "sluice: " prefix is enough.
        if (error.rfind("sluice: ", 0) == 0) error.erase(0, 8);
      }
      lock.lock();
      slot.error = error;
      slot.done = true;
      cv_.notify_all();
    } else {
      wait_locked(
          lock, [&] { return slot.done; }, what);
    }
    const std::string error = slot.error;
    if (++slot.left == locals_) slots_.erase(k);
    if (!error.empty()) throw Error(Errc::work_failed, error);
  }

  /// The process's part of a collective, given every local rank's part (in local order).
  void run_process_part(const std::vector<Part>& parts, bool checked, const std::string& what) {
    const DistSignature& sig = parts[0].sig;
    for (std::size_t l = 1; l < parts.size(); ++l) {
      if (parts[l].sig == sig) continue;
      const std::string message = what + ": rank " + std::to_string(ranks_[l]) + " called " +
                                  describe(parts[l].sig) + " where rank " +
                                  std::to_string(ranks_[0]) + " called " + describe(sig) +
                                  "; every rank must make the same collective call";
      fail_process(message, true);
      throw Error(Errc::invalid_argument, message);
    }
    const bool remote = procs_->size() > 1;
    if (remote && checked) procs_->check_signature(sig, what);
    const std::size_t elem = dist_type_size(sig.type);
    const std::size_t bytes = sig.count * elem;
    switch (sig.call) {
      case DistCall::allreduce:
      case DistCall::reduce: {
        std::vector<std::byte> acc(static_cast<const std::byte*>(parts[0].send),
                                   static_cast<const std::byte*>(parts[0].send) + bytes);
        for (std::size_t l = 1; l < parts.size(); ++l) {
          combine_into(acc.data(), parts[l].send, sig.count, sig.type, sig.op);
        }
        if (sig.call == DistCall::allreduce) {
          if (remote) procs_->allreduce(acc.data(), acc.data(), sig.count, sig.type, sig.op, what);
          for (const auto& p : parts) std::memcpy(p.recv, acc.data(), bytes);
        } else {
          const int root_process = map_.process_of(sig.root);
          if (remote) {
            procs_->reduce(acc.data(), acc.data(), sig.count, sig.type, sig.op, root_process, what);
          }
          if (root_process == procs_->rank()) {
            std::memcpy(parts[static_cast<std::size_t>(map_.local_of(sig.root))].recv, acc.data(),
                        bytes);
          }
        }
        break;
      }
      case DistCall::broadcast: {
        const int root_process = map_.process_of(sig.root);
        const bool mine = root_process == procs_->rank();
        void* source =
            mine ? parts[static_cast<std::size_t>(map_.local_of(sig.root))].recv : parts[0].recv;
        if (remote) procs_->broadcast(source, sig.count, sig.type, root_process, what);
        for (const auto& p : parts) {
          if (p.recv != source) std::memcpy(p.recv, source, bytes);
        }
        break;
      }
      case DistCall::allgather: {
        // This process's block (its ranks are consecutive), then every process's.
        std::vector<std::byte> block(bytes * parts.size());
        for (std::size_t l = 0; l < parts.size(); ++l) {
          std::memcpy(block.data() + l * bytes, parts[l].send, bytes);
        }
        auto* out = static_cast<std::byte*>(parts[0].recv);
        if (remote) {
          std::vector<int> counts(map_.count.size());
          for (std::size_t p = 0; p < counts.size(); ++p) {
            counts[p] = static_cast<int>(sig.count) * map_.count[p];
          }
          procs_->allgatherv(block.data(), out, counts, sig.type, what);
        } else {
          std::memcpy(out, block.data(), block.size());
        }
        const std::size_t total = bytes * static_cast<std::size_t>(map_.size());
        for (std::size_t l = 1; l < parts.size(); ++l) std::memcpy(parts[l].recv, out, total);
        break;
      }
      case DistCall::exchange:
        break;
    }
  }

  /// One part of an exchange as its host task keeps it (the caller's spans do not outlive the
  /// call that issued it).
  struct OwnedPart {
    const void* send = nullptr;
    std::vector<DistSegment> sends;
    void* recv = nullptr;
    std::vector<DistSegment> recvs;
  };
  /// An exchange between its start and its finish.
  struct Started {
    std::shared_ptr<ProcComm::Pending> remote;  // the messages to and from other processes
    std::vector<std::shared_ptr<Post>> posted;  // sends to local ranks, until they are taken
    struct LocalRecv {
      DistSegment segment;
      std::byte* base = nullptr;  // the part's receive buffer
      std::uint64_t seq = 0;      // the message of its mailbox it claimed (Box)
    };
    std::vector<LocalRecv> local_recvs;  // receives from local ranks
    std::size_t elem = 0;
  };

  static std::vector<OwnedPart> own(std::span<const DistExchangePart> parts) {
    std::vector<OwnedPart> owned;
    for (const auto& p : parts) {
      owned.push_back(
          {p.send, {p.sends.begin(), p.sends.end()}, p.recv, {p.recvs.begin(), p.recvs.end()}});
    }
    return owned;
  }

  /// Posts the parts' sends (to local ranks first, so that no rank waits for one that waits for
  /// it) and every receive; waits for nothing.
  Started start_exchange(int local, std::span<const OwnedPart> parts, DistType type,
                         const std::string& what) {
    throw_if_failed(what);
    Started st;
    st.elem = dist_type_size(type);
    const int me = ranks_[static_cast<std::size_t>(local)];
    const int my_process = procs_->rank();
    std::vector<ProcComm::Message> remote_sends, remote_recvs;
    {
      std::lock_guard lock(mutex_);
      for (const auto& part : parts) {
        for (const auto& s : part.sends) {
          const auto* data = static_cast<const std::byte*>(part.send) + s.offset * st.elem;
          if (map_.process_of(s.peer) == my_process) {
            auto post = std::make_shared<Post>();
            post->data = data;
            post->bytes = s.count * st.elem;
            mailboxes_[{me, s.peer}].posts.push_back(post);
            st.posted.push_back(std::move(post));
          } else {
            remote_sends.push_back({map_.process_of(s.peer), tag(local, map_.local_of(s.peer)),
                                    const_cast<std::byte*>(data), s.count});
          }
        }
      }
      // Receives from local ranks claim their messages now, in the order of the exchanges'
      // starts, which the senders' posts follow.
      for (const auto& part : parts) {
        for (const auto& r : part.recvs) {
          if (map_.process_of(r.peer) != my_process) continue;
          st.local_recvs.push_back(
              {r, static_cast<std::byte*>(part.recv), mailboxes_[{r.peer, me}].claimed++});
        }
      }
      cv_.notify_all();
    }
    for (const auto& part : parts) {
      for (const auto& r : part.recvs) {
        if (map_.process_of(r.peer) == my_process) continue;  // claimed above
        remote_recvs.push_back({map_.process_of(r.peer), tag(map_.local_of(r.peer), local),
                                static_cast<std::byte*>(part.recv) + r.offset * st.elem, r.count});
      }
    }
    if (!remote_sends.empty() || !remote_recvs.empty()) {
      st.remote = procs_->exchange_start(remote_sends, remote_recvs, type, what);
    }
    return st;
  }

  /// Waits for the messages of other processes, takes those of local ranks, and waits until the
  /// local ranks took this rank's.
  void finish_exchange(int local, Started& st, const std::string& what) {
    const std::size_t elem = st.elem;
    const int me = ranks_[static_cast<std::size_t>(local)];
    if (st.remote != nullptr) procs_->exchange_finish(*st.remote, what);
    std::unique_lock lock(mutex_);
    for (const auto& [r, base, seq] : st.local_recvs) {
      auto& box = mailboxes_[{r.peer, me}];
      wait_locked(
          lock, [&] { return box.first + box.posts.size() > seq; }, what);
      auto post = box.posts[static_cast<std::size_t>(seq - box.first)];
      const auto drop_taken = [&] {
        while (!box.posts.empty() && box.posts.front()->taken) {
          box.posts.pop_front();
          ++box.first;
        }
      };
      const std::size_t bytes = r.count * elem;
      if (post->bytes != bytes) {
        const std::string message = what + ": rank " + std::to_string(r.peer) + " sent " +
                                    std::to_string(post->bytes / elem) + " elements where rank " +
                                    std::to_string(me) + " expected " + std::to_string(r.count);
        post->error = message;
        post->taken = true;
        drop_taken();
        cv_.notify_all();
        fail_process(message, true);
        throw Error(Errc::invalid_argument, message);
      }
      std::memcpy(base + r.offset * elem, post->data, bytes);
      post->taken = true;
      drop_taken();
      cv_.notify_all();
    }
    for (const auto& post : st.posted) {
      wait_locked(
          lock, [&] { return post->taken; }, what);
      if (!post->error.empty()) throw Error(Errc::invalid_argument, post->error);
    }
  }

  /// The MPI tag of messages from local rank `from` of one process to local rank `to` of another.
  [[nodiscard]] int tag(int from, int to) const { return from * map_.max_local + to; }

  std::shared_ptr<ProcComm> procs_;
  RankMap map_;
  std::vector<int> ranks_;
  int locals_;
  std::mutex mutex_;
  std::condition_variable cv_;
  std::vector<std::uint64_t> next_;  // per local rank: its next collective's number
  std::map<std::uint64_t, Slot> slots_;
  /// The messages from one local rank to another, in the order they were sent: posts[0] is
  /// message number `first`. A receive claims its number when its exchange starts (`claimed`),
  /// so two exchanges in flight between the same ranks take their own messages whatever order
  /// they finish in.
  struct Box {
    std::deque<std::shared_ptr<Post>> posts;
    std::uint64_t first = 0;
    std::uint64_t claimed = 0;
  };
  std::map<std::pair<int, int>, Box> mailboxes_;
  std::map<std::pair<int, const void*>, Started> started_;  // exchanges between their halves
};

}  // namespace

std::shared_ptr<DistEngine> make_host_engine(const DistEngineConfig& config) {
  const auto* transport = static_cast<const HostTransport*>(config.transport.get());
  if (transport == nullptr) {
    throw Error(Errc::invalid_argument, "dist: the host engine needs the dist layer's transport");
  }
  return std::make_shared<HostEngine>(config, *transport);
}

}  // namespace sluice::detail::dist
