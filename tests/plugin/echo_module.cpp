// A backend module for the plugin tests that needs no GPU, built as libsluice-echo.so: backend
// "echo", whose one device forwards its streams and memory to the host backend and runs graphs
// with a runtime of its own, written from the installed headers only (sluice/backend.hpp and
// the IR of sluice/ext/graph_ir.hpp), as a third backend would. Built with SLUICE_ECHO_STALE it
// is libsluice-stale.so instead, whose entry point claims another ABI tag (as a module of
// another sluice build would).

#include <condition_variable>
#include <cstring>
#include <memory>
#include <mutex>
#include <string>
#include <type_traits>
#include <variant>
#include <vector>

#include "sluice/backend.hpp"
#include "sluice/error.hpp"
#include "sluice/ext/graph_ir.hpp"
#include "sluice/ext/plugin.hpp"
#include "sluice/platform.hpp"

namespace {

namespace ir = sluice::ir;

#ifdef SLUICE_ECHO_STALE
constexpr const char* kName = "stale";
#else
constexpr const char* kName = "echo";
#endif

/// The point an event record node records in one launch.
class Point final : public sluice::EventImpl {
 public:
  bool query() override {
    std::lock_guard lock(mutex_);
    return done_;
  }
  void synchronize() override {
    std::unique_lock lock(mutex_);
    cv_.wait(lock, [this] { return done_; });
  }
  double elapsed_ms_since(const sluice::EventImpl&) override {
    throw sluice::Error(sluice::Errc::invalid_argument, "an echo graph's point has no time");
  }
  void fire() {
    {
      std::lock_guard lock(mutex_);
      done_ = true;
    }
    cv_.notify_all();
  }

 private:
  std::mutex mutex_;
  std::condition_variable cv_;
  bool done_ = false;
};

using Points = std::vector<std::shared_ptr<Point>>;
using Waits = std::vector<std::shared_ptr<sluice::EventImpl>>;

void check(const ir::Graph& g) {
  for (const auto& n : g.nodes) {
    if (const auto* k = std::get_if<ir::Kernel>(&n.params); k && !k->work.host) {
      throw sluice::Error(sluice::Errc::unsupported,
                          "echo runs host kernels only ('" + n.name + "')");
    }
    if (std::holds_alternative<ir::Captured>(n.params)) {
      throw sluice::Error(sluice::Errc::unsupported,
                          "echo graphs run no captured operation ('" + n.name + "')");
    }
    for (const auto& c : ir::nested(n)) check(*c);
  }
}

/// Runs `g` node after node in an order of its edges (records and waits: the launched graph's).
void run(const ir::Graph& g, const Points* records, const Waits* waits) {
  for (const auto& n : g.nodes) {
    if (const auto* c = ir::condition(n); c && c->initial) c->assign_initial();
  }
  std::vector<std::uint32_t> pending(g.nodes.size(), 0), order;
  for (auto [a, b] : g.edges) ++pending[b];
  for (std::uint32_t i = 0; i < g.nodes.size(); ++i) {
    if (pending[i] == 0) order.push_back(i);
  }
  for (std::size_t k = 0; k < order.size(); ++k) {
    const auto i = order[k];
    std::visit(
        [&](const auto& p) {
          using P = std::decay_t<decltype(p)>;
          if constexpr (std::is_same_v<P, ir::Kernel>) {
            p.work.host(0, p.work.range);
          } else if constexpr (std::is_same_v<P, ir::Copy>) {
            if (p.bytes != 0) std::memmove(p.dst, p.src, p.bytes);
          } else if constexpr (std::is_same_v<P, ir::Memset>) {
            if (p.bytes != 0) std::memset(p.dst, p.value, p.bytes);
          } else if constexpr (std::is_same_v<P, ir::Host>) {
            p.fn();
          } else if constexpr (std::is_same_v<P, ir::Child>) {
            run(*p.graph, nullptr, nullptr);
          } else if constexpr (std::is_same_v<P, ir::If>) {
            if (p.cond.read()) {
              run(*p.then_graph, nullptr, nullptr);
            } else if (p.else_graph) {
              run(*p.else_graph, nullptr, nullptr);
            }
          } else if constexpr (std::is_same_v<P, ir::While>) {
            while (p.cond.read()) run(*p.body, nullptr, nullptr);
          } else if constexpr (std::is_same_v<P, ir::EventRecord>) {
            (*records)[i]->fire();
          } else if constexpr (std::is_same_v<P, ir::EventWait>) {
            if (const auto& w = (*waits)[i]) w->synchronize();
          }
          // Empty, alloc and free nodes do nothing; captured nodes were refused.
        },
        g.nodes[i].params);
    for (auto [a, b] : g.edges) {
      if (a == i && --pending[b] == 0) order.push_back(b);
    }
  }
}

class EchoGraph final : public sluice::GraphExecutable {
 public:
  explicit EchoGraph(ir::GraphPtr g) : graph_(std::move(g)) { check(*graph_); }
  void launch(sluice::Stream& stream, const sluice::OpInfo& op,
              const std::shared_ptr<sluice::FailureState>& failures,
              ir::LaunchEvents& events) override {
    auto records = std::make_shared<Points>(graph_->nodes.size());
    for (std::size_t i = 0; i < graph_->nodes.size(); ++i) {
      if (!std::holds_alternative<ir::EventRecord>(graph_->nodes[i].params)) continue;
      auto p = std::make_shared<Point>();
      p->failures = failures;
      p->seq = op.seq - 1;
      p->device = sluice::Device{kName, 0};
      (*records)[i] = p;
      events.records.at(i) = p;
    }
    stream.host_task(
        [g = graph_, records, waits = events.waits] {
          struct FireAll {  // a launch that failed must not leave waiters hanging
            Points& points;
            ~FireAll() {
              for (auto& p : points) {
                if (p) p->fire();
              }
            }
          } fire_all{*records};
          run(*g, records.get(), &waits);
        },
        op);
  }
  std::string update(const ir::GraphPtr& g) override {
    check(*g);
    graph_ = g;
    return {};
  }

 private:
  ir::GraphPtr graph_;
};

class EchoBackend final : public sluice::Backend {
 public:
  std::string_view name() const noexcept override { return kName; }
  std::vector<sluice::DeviceInfo> devices() override {
    auto ds = host_->devices();
    for (auto& d : ds) {
      d.device.backend = kName;
      d.name = std::string(kName) + " of " + d.name;
    }
    return ds;
  }
  std::unique_ptr<sluice::Stream> create_stream(const sluice::StreamConfig& config) override {
    return host_->create_stream(config);
  }
  void* allocate_pinned(std::size_t bytes) override { return host_->allocate_pinned(bytes); }
  void deallocate_pinned(void* ptr) noexcept override { host_->deallocate_pinned(ptr); }
  void set_pool_release_threshold(int device, std::size_t bytes) override {
    host_->set_pool_release_threshold(device, bytes);
  }
  void trim_pool(int device, std::size_t keep_bytes) override {
    host_->trim_pool(device, keep_bytes);
  }
  std::size_t pool_reserved(int device) override { return host_->pool_reserved(device); }
  std::unique_ptr<sluice::GraphExecutable> instantiate_graph(const ir::GraphPtr& graph,
                                                             int) override {
    return std::make_unique<EchoGraph>(graph);
  }

 private:
  std::shared_ptr<sluice::Backend> host_ = sluice::find_backend("host");
};

int register_all(char* why, std::size_t why_size) noexcept {
  return sluice::plugin_register(why, why_size,
                                 [] { sluice::register_backend(std::make_shared<EchoBackend>()); });
}

}  // namespace

#ifdef SLUICE_ECHO_STALE
extern "C" __attribute__((visibility("default"))) const SluicePlugin* sluice_plugin() {
  static const SluicePlugin plugin{SLUICE_PLUGIN_ENTRY_VERSION, "not this sluice", kName,
                                   &register_all};
  return &plugin;
}
#else
SLUICE_PLUGIN_DEFINE("echo", register_all)
#endif
