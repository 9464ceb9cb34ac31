#pragma once
// Dataflow cases of issue 23 (defects 5-7): every wait on work a HostAccessor holds back is an
// Error, never a hang (another HostAccessor, on the same or another buffer; destroying a buffer
// returns); buffers over const memory are never written; an accessor of an earlier command group
// and a Handler used after its submit are errors. Then a randomized program over write-back,
// const (some in read-only pages), no-write-back and host-less buffers that waits in every way
// while host accessors are held. Written once like dataflow_cases.hpp (nvcc in a cuda build).

#include <gtest/gtest.h>
#include <sys/mman.h>
#include <unistd.h>

#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <optional>
#include <random>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "backend_param.hpp"
#include "sluice/dataflow.hpp"
#include "sluice/sluice.hpp"

namespace sluice::test::dataflow_hold_cases {

namespace df = sluice::dataflow;
using df::access_mode;

// The kernels, one lambda each (on cuda each is loaded by its first launch, which may wait for
// the device to go idle: the tests launch each once before holding anything back).

/// o[i] = 3 * o[i] + in[i] + k over the accessed range.
inline df::Event update(df::Queue& q, df::Buffer<int>& dst, df::Buffer<int>* src, std::size_t lo,
                        std::size_t len, int k) {
  return q.submit([&](df::Handler& h) {
    auto o = dst.get_access<access_mode::read_write>(h, df::range<1>(len), df::id<1>(lo));
    if (src == nullptr || src == &dst) {
      h.parallel_for(df::range<1>(len), [=] SLUICE_KERNEL(df::id<1> i) { o[i] = 4 * o[i] + k; });
    } else {
      auto in = src->get_access<access_mode::read>(h, df::range<1>(len), df::id<1>(lo));
      h.parallel_for(df::range<1>(len),
                     [=] SLUICE_KERNEL(df::id<1> i) { o[i] = 3 * o[i] + in[i] + k; });
    }
  });
}

/// dst = src ^ k over the whole buffer (dst discarded).
inline df::Event overwrite(df::Queue& q, df::Buffer<int>& dst, df::Buffer<int>& src, int k) {
  return q.submit([&](df::Handler& h) {
    auto o = dst.get_access<access_mode::write>(h, df::no_init);
    auto in = src.get_access<access_mode::read>(h);
    h.parallel_for(dst.get_range(), [=] SLUICE_KERNEL(df::id<1> i) { o[i] = in[i] ^ k; });
  });
}

/// dst = k + i over the whole buffer (dst discarded).
inline df::Event fill(df::Queue& q, df::Buffer<int>& dst, int k) {
  return q.submit([&](df::Handler& h) {
    auto o = dst.get_access<access_mode::write>(h, df::no_init);
    h.parallel_for(dst.get_range(), [=] SLUICE_KERNEL(df::item<1> it) {
      o[it.get_id()] = k + static_cast<int>(it.get_id(0));
    });
  });
}

inline bool is_hold_error(const sluice::Error& e) {
  return e.code() == Errc::invalid_state &&
         std::string(e.what()).find("HostAccessor") != std::string::npos;
}

/// Pages of read-only memory holding `values` (writing them is a segmentation fault).
class ReadOnlyInts {
 public:
  explicit ReadOnlyInts(const std::vector<int>& values) : bytes_(round(values.size())) {
    void* p = mmap(nullptr, bytes_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) throw std::runtime_error("mmap failed");
    std::memcpy(p, values.data(), values.size() * sizeof(int));
    mprotect(p, bytes_, PROT_READ);
    data_ = static_cast<const int*>(p);
  }
  ReadOnlyInts(const ReadOnlyInts&) = delete;
  ReadOnlyInts& operator=(const ReadOnlyInts&) = delete;
  ~ReadOnlyInts() { munmap(const_cast<int*>(data_), bytes_); }
  [[nodiscard]] const int* data() const noexcept { return data_; }

 private:
  static std::size_t round(std::size_t n) {
    const auto page = static_cast<std::size_t>(sysconf(_SC_PAGESIZE));
    return (n * sizeof(int) + page - 1) / page * page;
  }
  std::size_t bytes_;
  const int* data_ = nullptr;
};

/// Defect 5: a second HostAccessor whose data a command group held back by the first one (on
/// this thread) produces is an Error, as Event::wait and Queue::wait are.
inline void second_host_accessor_is_an_error(const Device& d) {
  auto q = df::Queue(df::QueueOptions{.device = d, .in_order = true});
  constexpr std::size_t n = 64;
  std::vector<int> hv(n, 1);
  df::Buffer<int> b(hv.data(), df::range<1>(n));
  for (int pass = 0; pass < 2; ++pass) {  // pass 0 loads the kernel
    const bool hold = pass == 1;
    {
      std::optional<df::HostAccessor<int, 1, access_mode::read_write>> h;
      if (hold) h.emplace(b);
      const auto e = update(q, b, nullptr, 0, n, 1);  // held back while h lives
      if (hold) {
        (*h)[0] = 7;
        try {
          df::HostAccessor<int, 1, access_mode::read> again(b);
          ADD_FAILURE() << "a second HostAccessor over held-back work returned";
        } catch (const sluice::Error& err) {
          EXPECT_TRUE(is_hold_error(err)) << err.what();
        }
        EXPECT_THROW(e.wait(), sluice::Error);
      }
    }
    q.wait();
  }
  df::HostAccessor<int, 1, access_mode::read> h(b);
  EXPECT_EQ(h[0], 4 * 7 + 1) << "the host's write, then the kernel";
  EXPECT_EQ(h[1], 4 * (4 * 1 + 1) + 1);
}

/// Defect 5: a HostAccessor on another buffer that a held-back command group writes is an Error;
/// destroying such a buffer returns (it cannot throw) without writing it back.
inline void other_buffer_of_a_held_group(const Device& d) {
  auto q = df::Queue(df::QueueOptions{.device = d, .in_order = false});
  constexpr std::size_t n = 64;
  std::vector<int> av(n, 2), bv(n, 3);
  df::Buffer<int> a(av.data(), df::range<1>(n));
  for (int pass = 0; pass < 2; ++pass) {  // pass 0 loads the kernels
    const bool hold = pass == 1;
    std::vector<int> cv(n, 4);
    df::Buffer<int> b(bv.data(), df::range<1>(n));
    std::optional<df::Buffer<int>> c;
    c.emplace(cv.data(), df::range<1>(n));
    {
      std::optional<df::HostAccessor<int, 1, access_mode::read>> h;
      if (hold) h.emplace(a);
      overwrite(q, b, a, 1);   // reads a: held back; writes b
      overwrite(q, *c, a, 5);  // likewise c
      if (hold) {
        try {
          df::HostAccessor<int, 1, access_mode::read> hb(b);
          ADD_FAILURE() << "a HostAccessor on a buffer written by held-back work returned";
        } catch (const sluice::Error& err) {
          EXPECT_TRUE(is_hold_error(err)) << err.what();
        }
        c.reset();  // must return; the held-back write never reaches cv
        EXPECT_EQ(cv, std::vector<int>(n, 4)) << "written back before its producer ran";
      }
    }
    q.wait();
    if (!hold) c.reset();
    df::HostAccessor<int, 1, access_mode::read> hb(b);
    EXPECT_EQ(hb[5], 2 ^ 1);
    if (!hold) {
      EXPECT_EQ(cv[5], 2 ^ 5) << "written back when nothing is held";
    }
  }
}

/// Fails the test binary (instead of hanging it) if the scope is not left within `limit`: a
/// regression of a "must return" case fails CI in seconds instead of at the job's timeout.
class Watchdog {
 public:
  Watchdog(std::string what, std::chrono::seconds limit)
      : what_(std::move(what)), thread_([this, limit] {
          std::unique_lock lock(mutex_);
          if (!cv_.wait_for(lock, limit, [&] { return done_; })) {
            std::fprintf(stderr, "FAILED: %s did not return within %lld s (a hang); aborting\n",
                         what_.c_str(), static_cast<long long>(limit.count()));
            std::fflush(stderr);
            std::_Exit(1);
          }
        }) {}
  Watchdog(const Watchdog&) = delete;
  Watchdog& operator=(const Watchdog&) = delete;
  ~Watchdog() {
    {
      std::lock_guard lock(mutex_);
      done_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }

 private:
  std::string what_;
  std::mutex mutex_;
  std::condition_variable cv_;
  bool done_ = false;
  std::thread thread_;
};

/// Issue 23's hang class on the release side: destroying buffers (each kind), core device and
/// pinned buffers, a graph launched behind held-back work, a context that waits for it and the
/// queue itself, while a HostAccessor of this thread holds work back, returns (on cuda
/// cudaFreeHost, cudaFree, a graph's or a context's teardown would wait for the whole device).
/// After the accessor goes, the held-back work runs and every result is right.
inline void releases_while_holding_return(const Device& d) {
  constexpr std::size_t n = 64;
  for (int pass = 0; pass < 2; ++pass) {  // pass 0 loads the kernels and the graph's code
    const bool hold = pass == 1;
    Watchdog watchdog(hold ? "releasing while a HostAccessor holds work back" : "warm-up pass",
                      std::chrono::seconds(90));
    std::vector<int> av(n, 2), bv(n, 3), dv(n, 0);
    df::Buffer<int> a(av.data(), df::range<1>(n));
    std::optional<df::Queue> q;
    q.emplace(df::QueueOptions{.device = d, .in_order = false});
    std::optional<df::Buffer<int>> b, c, e, f;
    b.emplace(bv.data(), df::range<1>(n));  // written by the held-back group
    c.emplace(df::range<1>(n));             // host-less; a host copy of its own (pinned) below
    e.emplace(df::range<1>(n));             // host-less, device data only
    f.emplace(dv.data(), df::range<1>(n));  // write-back, its work done before the hold
    fill(*q, *c, 10);
    fill(*q, *e, 20);
    fill(*q, *f, 30);
    {
      df::HostAccessor<int, 1, access_mode::read> hc(*c);
      ASSERT_EQ(hc[3], 13);
    }
    // Core memory and a graph on a context of its own.
    std::optional<Context> ctx;
    ctx.emplace(d);
    std::optional<DeviceBuffer<int>> dev;
    dev.emplace(*ctx, n);
    std::optional<PinnedBuffer<int>> pin;
    pin.emplace(d, n);
    std::optional<GraphExec> exec;
    {
      Capture cap(*ctx, "release-while-holding");
      sluice::fill(*ctx, *dev, 9);
      exec.emplace(cap.end(), d);
    }
    exec->launch(*ctx);
    ctx->synchronize();
    std::vector<int> pv;
    {
      std::optional<df::HostAccessor<int, 1, access_mode::read>> h;
      if (hold) h.emplace(a);
      overwrite(*q, *b, a, 1);  // reads a: held back while h lives
      if (hold) {
        // ctx now waits for the held-back group, and so does a launch of the graph there.
        for (const auto& qc : q->contexts()) ctx->wait_for(qc);
        exec->launch(*ctx);
      }
      b.reset();  // used by held-back work: parked, not written back
      c.reset();  // its own pinned host copy (cudaFreeHost)
      e.reset();
      f.reset();  // written back (its work is done), then freed
      // Written back unless its copy would queue behind the held-back group (docs/dataflow.md).
      if (hold) {
        EXPECT_TRUE(dv[5] == 35 || dv[5] == 0) << dv[5];
      } else {
        EXPECT_EQ(dv[5], 35);
      }
      pin.reset();
      dev.reset();
      exec.reset();  // a launch of it may wait for the held-back group
      ctx.reset();   // its stream waits for the held-back group
      q.reset();     // its context runs the held-back group
      if (hold) {
        EXPECT_EQ(bv, std::vector<int>(n, 3)) << "written back before its producer ran";
        EXPECT_EQ(av[0], 2);
      }
    }
    EXPECT_EQ(av, std::vector<int>(n, 2));
    if (!hold) {
      EXPECT_EQ(bv, std::vector<int>(n, 2 ^ 1));
    }
    // The device still works, and the work held back ran: a new queue reads a.
    df::Queue q2(df::QueueOptions{.device = d});
    std::vector<int> out(n, 0);
    {
      df::Buffer<int> o(out.data(), df::range<1>(n));
      overwrite(q2, o, a, 4);
    }
    EXPECT_EQ(out, std::vector<int>(n, 2 ^ 4));
  }
}

/// Defect 6: a buffer made over const memory is never written, not even by a host accessor's
/// read-back; over read-only pages a write would crash.
inline void const_buffers_are_never_written(const Device& d) {
  auto q = df::Queue(df::QueueOptions{.device = d, .in_order = false});
  constexpr std::size_t n = 100;
  std::vector<int> src(n, 5);
  ReadOnlyInts ro(std::vector<int>(n, 9));
  {
    df::Buffer<int> b(static_cast<const int*>(src.data()), df::range<1>(n));
    df::Buffer<int> r(ro.data(), df::range<1>(n));
    b.set_write_back(true);  // still never: the memory is const
    update(q, b, nullptr, 0, n, 1);
    update(q, r, nullptr, 0, n, 1);
    {
      df::HostAccessor<int, 1, access_mode::read> hb(b);
      df::HostAccessor<int, 1, access_mode::read> hr(r);
      EXPECT_EQ(hb[3], 21);
      EXPECT_EQ(hr[3], 37);
    }
    {
      df::HostAccessor<int, 1, access_mode::read_write> wb(r);  // writes a private copy
      wb[0] = -1;
    }
    update(q, r, nullptr, 0, 1, 0);
    df::HostAccessor<int, 1, access_mode::read> hr(r);
    EXPECT_EQ(hr[0], -4);
  }
  EXPECT_EQ(src, std::vector<int>(n, 5));
  EXPECT_EQ(std::vector<int>(ro.data(), ro.data() + n), std::vector<int>(n, 9));
}

/// Defect 7: an accessor of an earlier command group used in a later one, and a Handler used
/// after its submit returned, are clear errors.
inline void stale_accessor_and_handler_are_errors(const Device& d) {
  auto q = df::Queue(df::QueueOptions{.device = d, .in_order = false});
  constexpr std::size_t n = 16;
  std::vector<int> v(n, 1);
  df::Buffer<int> b(v.data(), df::range<1>(n));
  df::Accessor<int, 1, access_mode::read_write> kept;
  df::Handler* handler = nullptr;
  q.submit([&](df::Handler& h) {
    kept = b.get_access<access_mode::read_write>(h);
    handler = &h;
    auto a = kept;
    h.single_task([=] SLUICE_KERNEL() { a[0] = 2; });
  });
  try {
    q.submit([&](df::Handler& h) {
      auto a = kept;  // from the group above
      h.single_task([=] SLUICE_KERNEL() { a[1] = 3; });
    });
    ADD_FAILURE() << "an accessor of an earlier command group was accepted";
  } catch (const sluice::Error& e) {
    EXPECT_EQ(e.code(), Errc::invalid_state) << e.what();
    EXPECT_NE(std::string(e.what()).find("earlier command group"), std::string::npos) << e.what();
  }
  try {
    handler->depends_on(df::Event{});
    ADD_FAILURE() << "a Handler was used after its submit returned";
  } catch (const sluice::Error& e) {
    EXPECT_EQ(e.code(), Errc::invalid_state) << e.what();
    EXPECT_NE(std::string(e.what()).find("after its submit returned"), std::string::npos)
        << e.what();
  }
  q.wait();
  df::HostAccessor<int, 1, access_mode::read> h(b);
  EXPECT_EQ(h[0], 2);
  EXPECT_EQ(h[1], 1);
}

/// A randomized program: kernels over buffers of every kind, host accessors held over several
/// steps, and meanwhile every kind of wait. A wait either returns with the data of sequential
/// execution or is an Error naming the HostAccessor; none hangs. Memory a const buffer was made
/// over is never written (some lies in read-only pages), and buffers that write back do.
inline void random_holds(const Device& d, bool in_order, unsigned seed, int* waited, int* refused) {
  constexpr int kBuffers = 5;
  constexpr std::size_t n = 128;
  constexpr int kSteps = 50;
  std::mt19937 rng(seed);
  auto pick = [&](std::size_t m) { return static_cast<std::size_t>(rng() % m); };
  auto q = df::Queue(df::QueueOptions{.device = d, .in_order = in_order});
  // Kinds: 0 write-back over a vector, 1 const vector, 2 const read-only pages, 3 no write-back,
  // 4 no host memory.
  struct Slot {
    int kind = 0;
    std::vector<int> initial;                  // the contents it was made with
    std::vector<int> ref;                      // its contents in sequential execution
    std::unique_ptr<std::vector<int>> memory;  // the user's memory (kinds 0, 1, 3)
    std::unique_ptr<ReadOnlyInts> pages;       // kind 2
    std::optional<df::Buffer<int>> buf;
    bool initialized = true;
  };
  std::vector<Slot> slots(kBuffers);
  // Memory of destroyed buffers: held-back work may still read it until the accessors go.
  std::vector<std::unique_ptr<std::vector<int>>> old_memory;
  std::vector<std::unique_ptr<ReadOnlyInts>> old_pages;
  auto make = [&](int s) {
    auto& sl = slots[s];
    sl.kind = static_cast<int>(pick(5));
    sl.initial.assign(n, 0);
    for (std::size_t i = 0; i < n; ++i) sl.initial[i] = static_cast<int>(rng() % 1000);
    sl.ref = sl.initial;
    sl.initialized = true;
    switch (sl.kind) {
      case 0:
      case 3:
        sl.memory = std::make_unique<std::vector<int>>(sl.initial);
        sl.buf.emplace(sl.memory->data(), df::range<1>(n));
        if (sl.kind == 3) sl.buf->set_write_back(false);
        break;
      case 1:
        sl.memory = std::make_unique<std::vector<int>>(sl.initial);
        sl.buf.emplace(static_cast<const int*>(sl.memory->data()), df::range<1>(n));
        break;
      case 2:
        sl.pages = std::make_unique<ReadOnlyInts>(sl.initial);
        sl.buf.emplace(sl.pages->data(), df::range<1>(n));
        break;
      default:
        sl.buf.emplace(df::range<1>(n));
        sl.initialized = false;  // contents undefined until written
        break;
    }
  };
  // Memory a const buffer was made over keeps its contents, whatever happened.
  auto check_const_memory = [&](const Slot& sl, const char* when) {
    if (sl.kind != 1 && sl.kind != 2) return;
    const int* p = sl.kind == 2 ? sl.pages->data() : sl.memory->data();
    for (std::size_t i = 0; i < n; ++i) {
      ASSERT_EQ(p[i], sl.initial[i]) << "const memory written, " << when << ", seed " << seed;
    }
  };
  for (int s = 0; s < kBuffers; ++s) make(s);
  struct Held {
    int slot;
    int until;  // step at which it goes
    std::optional<df::HostAccessor<int, 1, access_mode::read>> r;
    std::optional<df::HostAccessor<int, 1, access_mode::read_write>> w;
  };
  std::vector<std::unique_ptr<Held>> held;
  std::vector<df::Event> events;
  auto expect_data = [&](const int* data, int s, int step) {
    if (!slots[s].initialized) return;
    for (std::size_t i = 0; i < n; ++i) {
      ASSERT_EQ(data[i], slots[s].ref[i])
          << "slot " << s << " byte " << i << " step " << step << " seed " << seed;
    }
  };
  // A wait that must return or be refused: counts which, checks the error.
  auto attempt = [&](const auto& wait) {
    try {
      wait();
      ++*waited;
      return true;
    } catch (const sluice::Error& e) {
      EXPECT_TRUE(is_hold_error(e)) << e.what() << " seed " << seed;
      ++*refused;
      return false;
    }
  };
  for (int step = 0; step < kSteps; ++step) {
    std::erase_if(held, [&](const auto& h) { return h->until <= step; });
    const int dst = static_cast<int>(pick(kBuffers));
    const int src = static_cast<int>(pick(kBuffers));
    const int k = step + 1;
    auto& r = slots[dst].ref;
    switch (pick(10)) {
      case 0:
      case 1: {  // a ranged update, reading another buffer
        if (!slots[dst].initialized || !slots[src].initialized) break;
        const std::size_t lo = pick(n), len = 1 + pick(n - lo);
        const auto s = slots[src].ref;
        for (std::size_t i = lo; i < lo + len; ++i) {
          r[i] = src == dst ? 4 * r[i] + k : 3 * r[i] + s[i] + k;
        }
        events.push_back(update(q, *slots[dst].buf, &*slots[src].buf, lo, len, k));
        break;
      }
      case 2: {  // overwrite dst from src
        if (src == dst || !slots[src].initialized) break;
        for (std::size_t i = 0; i < n; ++i) r[i] = slots[src].ref[i] ^ k;
        slots[dst].initialized = true;
        events.push_back(overwrite(q, *slots[dst].buf, *slots[src].buf, k));
        break;
      }
      case 3: {  // fill dst
        for (std::size_t i = 0; i < n; ++i) r[i] = k + static_cast<int>(i);
        slots[dst].initialized = true;
        events.push_back(fill(q, *slots[dst].buf, k));
        break;
      }
      case 4:
      case 9: {  // hold a host accessor for a few steps (read_write ones write right away)
        if (!slots[dst].initialized) break;
        auto h = std::make_unique<Held>();
        h->slot = dst;
        h->until = step + 1 + static_cast<int>(pick(8));
        const bool write = pick(2) == 0;
        const bool ok = attempt([&] {
          if (write) {
            h->w.emplace(*slots[dst].buf);
          } else {
            h->r.emplace(*slots[dst].buf);
          }
        });
        if (!ok) break;
        expect_data(write ? h->w->data() : h->r->data(), dst, step);
        if (write) {
          const std::size_t i = pick(n);
          (*h->w)[i] = -k;
          r[i] = -k;
        }
        held.push_back(std::move(h));
        break;
      }
      case 5: {  // another host accessor, released at once
        if (!slots[dst].initialized) break;
        std::vector<int> seen;
        if (attempt([&] {
              df::HostAccessor<int, 1, access_mode::read> h(*slots[dst].buf);
              seen.assign(h.begin(), h.end());
            })) {
          expect_data(seen.data(), dst, step);
        }
        break;
      }
      case 6:  // Event::wait on a random earlier command group
        if (!events.empty()) attempt([&] { events[pick(events.size())].wait(); });
        break;
      case 7:  // Queue::wait, or wait_all
        if (pick(2) == 0) {
          attempt([&] { q.wait(); });
        } else if (!events.empty()) {
          attempt([&] { df::wait_all({events.back(), events[pick(events.size())]}); });
        }
        break;
      default: {  // destroy a buffer (returns whatever is held) and make a new one
        bool accessed = false;
        for (const auto& h : held) accessed = accessed || h->slot == dst;
        if (accessed) break;  // its host accessors keep it alive anyway
        auto& sl = slots[dst];
        sl.buf.reset();  // must return even when held-back work uses it
        if (sl.kind == 0 && held.empty() && sl.initialized) {
          EXPECT_EQ(*sl.memory, sl.ref) << "write-back of slot " << dst << " seed " << seed;
        }
        check_const_memory(sl, "at destruction");
        if (sl.memory) old_memory.push_back(std::move(sl.memory));
        if (sl.pages) old_pages.push_back(std::move(sl.pages));
        make(dst);
        break;
      }
    }
    if (::testing::Test::HasFatalFailure()) return;
  }
  held.clear();
  q.wait();
  for (int s = 0; s < kBuffers; ++s) {
    auto& sl = slots[s];
    if (sl.initialized) {
      df::HostAccessor<int, 1, access_mode::read> h(*sl.buf);
      expect_data(h.data(), s, kSteps);
    }
    sl.buf.reset();
    if (sl.kind == 0 && sl.initialized) {
      EXPECT_EQ(*sl.memory, sl.ref) << "write-back, seed " << seed;
    }
    check_const_memory(sl, "at the end");
  }
  for (const auto& m : old_memory) (void)m;
}

}  // namespace sluice::test::dataflow_hold_cases

namespace sluice::test {

namespace df = sluice::dataflow;

class DataflowHold : public BackendTest {};

TEST_P(DataflowHold, SecondHostAccessorIsAnError) {
  dataflow_hold_cases::second_host_accessor_is_an_error(device());
}
TEST_P(DataflowHold, OtherBufferOfAHeldGroup) {
  dataflow_hold_cases::other_buffer_of_a_held_group(device());
}
TEST_P(DataflowHold, ConstBuffersAreNeverWritten) {
  dataflow_hold_cases::const_buffers_are_never_written(device());
}
TEST_P(DataflowHold, StaleAccessorAndHandlerAreErrors) {
  dataflow_hold_cases::stale_accessor_and_handler_are_errors(device());
}
TEST_P(DataflowHold, ReleasesWhileHoldingReturn) {
  dataflow_hold_cases::releases_while_holding_return(device());
}
TEST_P(DataflowHold, RandomProgramsWaitEveryWayWhileHolding) {
  // A hang fails the binary in seconds instead of at the job's timeout.
  dataflow_hold_cases::Watchdog watchdog("random programs holding HostAccessors",
                                         std::chrono::seconds(240));
  int waited = 0, refused = 0;
  // Loads the kernels first (cuda: a first launch under a gate may wait for an idle device).
  {
    auto q = df::Queue(df::QueueOptions{.device = device()});
    std::vector<int> v(8, 1);
    df::Buffer<int> a(v.data(), df::range<1>(8)), b(df::range<1>(8));
    dataflow_hold_cases::fill(q, b, 1);
    dataflow_hold_cases::update(q, a, nullptr, 0, 8, 1);
    dataflow_hold_cases::update(q, a, &b, 0, 8, 1);
    dataflow_hold_cases::overwrite(q, b, a, 1);
    q.wait();
  }
  for (unsigned seed = 1; seed <= 100; ++seed) {
    SCOPED_TRACE("seed " + std::to_string(seed));
    dataflow_hold_cases::random_holds(device(), seed % 4 == 0, seed, &waited, &refused);
    if (HasFatalFailure()) return;
  }
  std::printf("waits that returned: %d, refused: %d\n", waited, refused);
  EXPECT_GT(waited, 0);
  EXPECT_GT(refused, 0) << "no wait ever met held-back work";
}

SLUICE_INSTANTIATE_BACKENDS(DataflowHold);

}  // namespace sluice::test
