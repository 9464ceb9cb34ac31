// Graphs from Python: `Capture` (a `with` block recorded into a Graph), `Replay` (record once,
// relaunch; as `replay.run`, a decorator and a `with` block), explicit `Graph`s and `GraphExec`.

#include <pybind11/functional.h>

#include <map>
#include <mutex>
#include <sstream>

#include "arrays.hpp"
#include "scalar.hpp"
#include "sluice/graph.hpp"

namespace sluice::python {
namespace {

/// A Graph and the Python objects its nodes use (arrays, callables): they live as long as the
/// graph and every executable made from it.
struct PyGraph {
  Graph graph;
  std::vector<PyRef> keep;
};

struct PyExec {
  GraphExec exec;
  std::vector<PyRef> keep;
};

struct PyCapture {
  Context ctx;
  std::string name;
  std::unique_ptr<Capture> capture;
  std::shared_ptr<PyGraph> graph;
};

NodeOptions node_options(const std::string& name, const std::vector<Node>& after,
                         const std::vector<Marked>& uses, std::vector<PyRef>& keep) {
  NodeOptions o;
  o.name = name;
  o.after = after;
  for (const auto& m : uses) {
    o.uses.push_back({m.array->id, m.mode, m.array->range()});
    keep.emplace_back(py::cast(m.array));
  }
  return o;
}

std::vector<Marked> marks_of(const py::object& reads, const py::object& writes) {
  std::vector<Marked> out;
  auto add = [&](const py::object& list, Access mode) {
    if (list.is_none()) return;
    for (auto item : list) {
      if (py::isinstance<Marked>(item)) {
        out.push_back(item.cast<Marked>());
      } else {
        out.push_back({as_array(item, std::nullopt, caller()), mode});
      }
    }
  };
  add(reads, Access::read);
  add(writes, Access::write);
  return out;
}

std::shared_ptr<Array> array_arg(const py::object& o) {
  return as_array(o, std::nullopt, caller());
}

/// A host function for a graph node: takes the GIL, reports a Python exception with its
/// traceback as the node's failure.
std::function<void()> host_fn(const py::function& fn) {
  return PyCall{py::object(fn)};
}

py::dict event_dict(const ReplayEvent& e) {
  py::dict d;
  d["kind"] = e.kind == ReplayEvent::Kind::instantiated     ? "instantiated"
              : e.kind == ReplayEvent::Kind::reinstantiated ? "reinstantiated"
                                                            : "eager";
  d["key"] = e.key;
  d["reason"] = e.reason;
  return d;
}

/// `Replay` for Python: the C++ Replay (for bodies given as callables), and a cache of its own
/// for `with replay.scope(key):` blocks, which cannot be re-run as a body.
struct PyReplay {
  Replay replay;
  std::mutex mutex;
  std::map<std::string, std::unique_ptr<GraphExec>> scopes;
  PyRef callback;
  void report(ReplayEvent::Kind kind, const std::string& key, const std::string& reason) {
    if (!callback) return;
    PythonWork work;
    callback.object()(event_dict(ReplayEvent{kind, key, reason}));
  }
};

struct ReplayScope {
  std::shared_ptr<PyReplay> replay;
  std::string key;
  Context ctx;
  std::unique_ptr<Capture> capture;
};

/// Runs a Python body inside C++ code that has the GIL released: takes the GIL; a sluice.Error
/// of code invalid_state (the capture guard) becomes the C++ Error, so Replay falls back to
/// running the body eagerly; other Python exceptions go through unchanged.
std::function<void()> replay_body(py::object fn) {
  PyRef f{std::move(fn)};
  return [f] {
    PythonWork work;
    try {
      f.object()();
    } catch (py::error_already_set& e) {
      if (auto err = as_sluice_error(e); err && err->code() == Errc::invalid_state) throw *err;
      throw;
    }
  };
}

void launch_scope(ReplayScope& s, Graph graph, std::source_location loc) {
  PyReplay& r = *s.replay;
  std::unique_lock lock(r.mutex);
  auto& exec = r.scopes[s.key];
  std::optional<std::pair<ReplayEvent::Kind, std::string>> event;
  if (!exec) {
    exec = std::make_unique<GraphExec>(graph, s.ctx.device(), loc);
    event = {ReplayEvent::Kind::instantiated, "first run"};
  } else if (!(exec->device() == s.ctx.device())) {
    event = {ReplayEvent::Kind::reinstantiated,
             "device " + s.ctx.device().to_string() + " instead of " + exec->device().to_string()};
    exec = std::make_unique<GraphExec>(graph, s.ctx.device(), loc);
  } else {
    try {
      exec->update(graph, loc);
    } catch (const Error& e) {
      event = {ReplayEvent::Kind::reinstantiated, e.what()};
      exec = std::make_unique<GraphExec>(graph, s.ctx.device(), loc);
    }
  }
  exec->launch(s.ctx, loc);
  lock.unlock();
  if (event) r.report(event->first, s.key, event->second);
}

template <class Int>
Node add_while_typed(Graph& g, const Managed<Int>& cond, const Graph& body,
                     std::optional<std::int64_t> initial, NodeOptions o) {
  if (initial) return g.add_while(cond, body, ConditionDefault{*initial}, std::move(o));
  return g.add_while(cond, body, std::move(o));
}

template <class Int>
Node add_if_typed(Graph& g, const Managed<Int>& cond, const Graph& then_graph,
                  const Graph* else_graph, std::optional<std::int64_t> initial, NodeOptions o) {
  if (else_graph != nullptr) {
    if (initial)
      return g.add_if(cond, then_graph, *else_graph, ConditionDefault{*initial}, std::move(o));
    return g.add_if(cond, then_graph, *else_graph, std::move(o));
  }
  if (initial) return g.add_if(cond, then_graph, ConditionDefault{*initial}, std::move(o));
  return g.add_if(cond, then_graph, std::move(o));
}

/// Calls `f(managed)` with the int32 or int64 Managed inside `cond`.
template <class F>
Node with_int_condition(const py::object& cond, F&& f) {
  auto& m = cond.cast<PyManaged&>();
  if (auto* i = std::get_if<Managed<std::int32_t>>(&m.value)) return f(*i);
  if (auto* l = std::get_if<Managed<std::int64_t>>(&m.value)) return f(*l);
  throw py::type_error("a conditional node's condition is an int32 or int64 sluice.Managed");
}

}  // namespace

void bind_graph(py::module_& m) {
  py::class_<Node>(m, "Node", "A node of a Graph.")
      .def_property_readonly("name", &Node::name)
      .def_property_readonly("kind", [](const Node& n) { return std::string(to_string(n.kind())); })
      .def_property_readonly("index", &Node::index)
      .def("__repr__", [](const Node& n) {
        return n.valid() ? "<sluice.Node " + std::to_string(n.index()) + " '" + n.name() + "' " +
                               to_string(n.kind()) + ">"
                         : std::string("<sluice.Node of a destroyed graph>");
      });

  py::class_<PyGraph, std::shared_ptr<PyGraph>>(
      m, "Graph",
      "A DAG of named nodes that declare what they read and write; launching an executable of it "
      "(GraphExec) is one operation of a context, ordered by the tracker like any other.")
      .def(py::init([](const std::string& name) {
             return std::make_shared<PyGraph>(PyGraph{Graph(name), {}});
           }),
           py::arg("name") = "graph")
      .def_property_readonly("name", [](const PyGraph& g) { return g.graph.name(); })
      .def("__len__", [](const PyGraph& g) { return g.graph.size(); })
      .def(
          "node", [](const PyGraph& g, std::uint32_t i) { return g.graph.node(i); },
          py::arg("index"))
      .def(
          "find", [](const PyGraph& g, const std::string& name) { return g.graph.find(name); },
          py::arg("name"))
      .def_property_readonly("nodes",
                             [](const PyGraph& g) {
                               std::vector<Node> out;
                               for (std::uint32_t i = 0; i < g.graph.size(); ++i)
                                 out.push_back(g.graph.node(i));
                               return out;
                             })
      .def_property_readonly("edges", [](const PyGraph& g) { return g.graph.edges(); })
      .def(
          "dot", [](const PyGraph& g) { return g.graph.dot(); }, "Graphviz DOT of the graph.")
      .def(
          "add_empty",
          [](PyGraph& g, const std::string& name, const std::vector<Node>& after) {
            return g.graph.add_empty(node_options(name, after, {}, g.keep));
          },
          py::arg("name") = "", py::arg("after") = std::vector<Node>{})
      .def(
          "add_memset",
          [](PyGraph& g, const py::object& dst, int value, const std::string& name,
             const std::vector<Node>& after) {
            auto d = array_arg(dst);
            auto o = node_options(name, after, {{d, Access::write}}, g.keep);
            return g.graph.add_memset(d->data, value, d->nbytes, std::move(o));
          },
          py::arg("dst"), py::arg("value"), py::arg("name") = "",
          py::arg("after") = std::vector<Node>{}, "Sets every byte of `dst` to `value`.")
      .def(
          "add_copy",
          [](PyGraph& g, const py::object& dst, const py::object& src, const std::string& name,
             const std::vector<Node>& after) {
            auto d = array_arg(dst);
            auto s = array_arg(src);
            if (d->nbytes != s->nbytes) {
              throw Error(Errc::invalid_argument, "add_copy: the two sides differ in size",
                          caller());
            }
            auto o = node_options(name, after, {{d, Access::write}, {s, Access::read}}, g.keep);
            return g.graph.add_copy(d->data, s->data, d->nbytes, std::move(o));
          },
          py::arg("dst"), py::arg("src"), py::arg("name") = "",
          py::arg("after") = std::vector<Node>{}, "Copies all of `src` into `dst`.")
      .def(
          "add_host",
          [](PyGraph& g, const py::function& fn, const std::string& name, const py::object& reads,
             const py::object& writes, const std::vector<Node>& after) {
            auto o = node_options(name, after, marks_of(reads, writes), g.keep);
            return g.graph.add_host(host_fn(fn), std::move(o));
          },
          py::arg("fn"), py::arg("name") = "", py::arg("reads") = py::none(),
          py::arg("writes") = py::none(), py::arg("after") = std::vector<Node>{},
          "A host function node (it takes the GIL when it runs); `reads`/`writes` list the "
          "arrays it touches.")
      .def(
          "add_child",
          [](PyGraph& g, const PyGraph& child, const std::string& name,
             const std::vector<Node>& after) {
            for (const auto& k : child.keep) g.keep.push_back(k);
            return g.graph.add_child(child.graph, node_options(name, after, {}, g.keep));
          },
          py::arg("child"), py::arg("name") = "", py::arg("after") = std::vector<Node>{})
      .def(
          "add_while",
          [](PyGraph& g, const py::object& cond, const PyGraph& body,
             std::optional<std::int64_t> initial, const std::string& name,
             const std::vector<Node>& after) {
            for (const auto& k : body.keep) g.keep.push_back(k);
            g.keep.emplace_back(cond);
            return with_int_condition(cond, [&](const auto& c) {
              return add_while_typed(g.graph, c, body.graph, initial,
                                     node_options(name, after, {}, g.keep));
            });
          },
          py::arg("cond"), py::arg("body"), py::arg("initial") = py::none(), py::arg("name") = "",
          py::arg("after") = std::vector<Node>{},
          "Runs `body` while `cond` (an int32/int64 Managed) is non-zero, tested on the device "
          "before each trip; `initial`, if given, is assigned to cond at the start of each run.")
      .def(
          "add_if",
          [](PyGraph& g, const py::object& cond, const PyGraph& then_graph,
             const std::optional<std::shared_ptr<PyGraph>>& else_graph,
             std::optional<std::int64_t> initial, const std::string& name,
             const std::vector<Node>& after) {
            for (const auto& k : then_graph.keep) g.keep.push_back(k);
            if (else_graph) {
              for (const auto& k : (*else_graph)->keep) g.keep.push_back(k);
            }
            g.keep.emplace_back(cond);
            return with_int_condition(cond, [&](const auto& c) {
              return add_if_typed(g.graph, c, then_graph.graph,
                                  else_graph ? &(*else_graph)->graph : nullptr, initial,
                                  node_options(name, after, {}, g.keep));
            });
          },
          py::arg("cond"), py::arg("then"), py::arg("orelse") = py::none(),
          py::arg("initial") = py::none(), py::arg("name") = "",
          py::arg("after") = std::vector<Node>{},
          "Runs `then` if `cond` is non-zero when the node starts, else `orelse`.")
      .def(
          "add_event_record",
          [](PyGraph& g, Event& event, const std::string& name, const std::vector<Node>& after) {
            return g.graph.add_event_record(event, node_options(name, after, {}, g.keep));
          },
          py::arg("event"), py::arg("name") = "", py::arg("after") = std::vector<Node>{},
          "Each launch re-records `event` at this node.")
      .def(
          "add_event_wait",
          [](PyGraph& g, const Event& event, const std::string& name,
             const std::vector<Node>& after) {
            return g.graph.add_event_wait(event, node_options(name, after, {}, g.keep));
          },
          py::arg("event"), py::arg("name") = "", py::arg("after") = std::vector<Node>{})
      .def(
          "add_edge",
          [](PyGraph& g, const Node& from, const Node& to) {
            g.graph.add_edge(from, to, caller());
          },
          py::arg("from_node"), py::arg("to_node"), "`to_node` runs after `from_node`.")
      .def(
          "instantiate",
          [](const PyGraph& g, const py::object& device) {
            auto d = to_device(device);
            const auto loc = caller();
            auto exec = nogil([&] {
              return std::make_shared<PyExec>(
                  PyExec{GraphExec(g.graph, d ? *d : current_context().device(), loc), g.keep});
            });
            return exec;
          },
          py::arg("device") = py::none(),
          "A GraphExec of this graph for `device` (default: the current context's).")
      .def("__repr__", [](const PyGraph& g) {
        return "<sluice.Graph '" + g.graph.name() + "' of " + std::to_string(g.graph.size()) +
               " nodes>";
      });

  py::class_<PyExec, std::shared_ptr<PyExec>>(
      m, "GraphExec",
      "A graph instantiated for one device; launching it is one operation of a context.")
      .def(py::init([](const PyGraph& g, const py::object& device) {
             auto d = to_device(device);
             const auto loc = caller();
             return nogil([&] {
               return std::shared_ptr<PyExec>(
                   new PyExec{GraphExec(g.graph, d ? *d : current_context().device(), loc), g.keep},
                   NogilDelete{});
             });
           }),
           py::arg("graph"), py::arg("device") = py::none())
      .def(
          "launch",
          [](PyExec& e, const std::optional<Context>& ctx) {
            const auto loc = caller();
            Context c = context_or_current(ctx);
            nogil([&] { e.exec.launch(c, loc); });
          },
          py::arg("ctx") = py::none(),
          "Runs the graph as one operation of `ctx` (default: the current context); conflicting "
          "earlier work on other contexts is waited for, later work waits for it.")
      .def(
          "update",
          [](PyExec& e, const PyGraph& g) {
            const auto loc = caller();
            nogil([&] { e.exec.update(g.graph, loc); });
            for (const auto& k : g.keep) e.keep.push_back(k);
          },
          py::arg("graph"),
          "Takes every parameter from `graph`, of the same topology (else Error naming the first "
          "difference).")
      .def(
          "set_memset",
          [](PyExec& e, const Node& n, const py::object& dst, int value) {
            auto d = array_arg(dst);
            const auto loc = caller();
            nogil([&] { e.exec.set_memset(n, d->data, value, d->nbytes, loc); });
            e.keep.emplace_back(py::cast(d));
          },
          py::arg("node"), py::arg("dst"), py::arg("value"))
      .def(
          "set_copy",
          [](PyExec& e, const Node& n, const py::object& dst, const py::object& src) {
            auto d = array_arg(dst);
            auto s = array_arg(src);
            const auto loc = caller();
            nogil([&] { e.exec.set_copy(n, d->data, s->data, d->nbytes, loc); });
            e.keep.emplace_back(py::cast(d));
            e.keep.emplace_back(py::cast(s));
          },
          py::arg("node"), py::arg("dst"), py::arg("src"))
      .def(
          "set_host",
          [](PyExec& e, const Node& n, const py::function& fn) {
            const auto loc = caller();
            auto f = host_fn(fn);
            nogil([&] { e.exec.set_host(n, f, loc); });
          },
          py::arg("node"), py::arg("fn"))
      .def(
          "set_conditional_default",
          [](PyExec& e, const Node& n, std::int64_t value) {
            const auto loc = caller();
            nogil([&] { e.exec.set_conditional_default(n, value, loc); });
          },
          py::arg("node"), py::arg("value"))
      .def_property_readonly("device", [](const PyExec& e) { return e.exec.device(); })
      .def("dot", [](const PyExec& e) {
        std::ostringstream out;
        e.exec.write_dot(out);
        return out.str();
      });

  py::class_<PyCapture, std::shared_ptr<PyCapture>>(
      m, "Capture",
      "Records everything issued on a context (and on contexts that join it by waiting on its "
      "work) into a Graph instead of running it:\n\n"
      "    with sluice.Capture(ctx) as cap:\n        ...\n    exec = cap.graph.instantiate()\n\n"
      "An operation that cannot be part of a graph (a host wait such as synchronize or "
      "Managed.value(), a copy from or to pageable host memory) raises sluice.Error; the partial "
      "capture is discarded and the contexts stay usable.")
      .def(py::init([](const std::optional<Context>& ctx, const std::string& name) {
             return std::make_shared<PyCapture>(
                 PyCapture{context_or_current(ctx), name, nullptr, nullptr});
           }),
           py::arg("ctx") = py::none(), py::arg("name") = "capture")
      .def("__enter__",
           [](const std::shared_ptr<PyCapture>& c) {
             const auto loc = caller();
             nogil([&] { c->capture = std::make_unique<Capture>(c->ctx, c->name, loc); });
             return c;
           })
      .def("__exit__",
           [](PyCapture& c, const py::object& type, const py::object&, const py::object&) {
             auto cap = std::move(c.capture);
             if (!cap) return false;
             if (!type.is_none()) {
               nogil([&] { cap.reset(); });  // discards what was recorded
               return false;
             }
             const auto loc = caller();
             auto g = nogil([&] {
               Graph graph = cap->end(loc);
               cap.reset();
               return graph;
             });
             c.graph = std::make_shared<PyGraph>(PyGraph{std::move(g), {}});
             return false;
           })
      .def_property_readonly("graph",
                             [](const PyCapture& c) {
                               if (!c.graph) {
                                 throw Error(Errc::invalid_state,
                                             "Capture.graph: the capture has not ended (use it "
                                             "after the with block)",
                                             caller());
                               }
                               return c.graph;
                             })
      .def_property_readonly("active",
                             [](const PyCapture& c) { return c.capture && c.capture->active(); });

  py::class_<PyReplay, std::shared_ptr<PyReplay>>(
      m, "_Replay", "The C++ part of sluice.Replay (see sluice/__init__.py).")
      .def(py::init([] { return std::shared_ptr<PyReplay>(new PyReplay, NogilDelete{}); }))
      .def(
          "run",
          [](PyReplay& r, const Context& ctx, const std::string& key, py::object body) {
            const auto loc = caller();
            auto f = replay_body(std::move(body));
            nogil([&] { r.replay.run(ctx, key, f, loc); });
          },
          py::arg("ctx"), py::arg("key"), py::arg("body"))
      .def(
          "on_event",
          [](const std::shared_ptr<PyReplay>& r, py::object callback) {
            r->callback = callback.is_none() ? PyRef() : PyRef(callback);
            if (callback.is_none()) {
              r->replay.on_event(nullptr);
              return;
            }
            std::weak_ptr<PyReplay> weak = r;
            r->replay.on_event([weak](const ReplayEvent& e) {
              if (auto p = weak.lock()) p->report(e.kind, e.key, e.reason);
            });
          },
          py::arg("callback"))
      .def_property_readonly("size",
                             [](PyReplay& r) {
                               std::lock_guard lock(r.mutex);
                               return r.replay.size() + r.scopes.size();
                             })
      .def(
          "scope",
          [](const std::shared_ptr<PyReplay>& r, const std::string& key, const Context& ctx) {
            return ReplayScope{r, key, ctx, nullptr};
          },
          py::arg("key"), py::arg("ctx"));

  py::class_<ReplayScope>(m, "_ReplayScope")
      .def("__enter__",
           [](ReplayScope& s) {
             const auto loc = caller();
             nogil([&] { s.capture = std::make_unique<Capture>(s.ctx, s.key, loc); });
           })
      .def("__exit__",
           [](ReplayScope& s, const py::object& type, const py::object&, const py::object&) {
             auto cap = std::move(s.capture);
             if (!cap) return false;
             if (!type.is_none()) {
               nogil([&] { cap.reset(); });
               return false;
             }
             const auto loc = caller();
             nogil([&] {
               Graph graph = cap->end(loc);
               cap.reset();
               launch_scope(s, std::move(graph), loc);
             });
             return false;
           });

  m.def("graph_stats", [] {
    const auto s = graph::stats();
    py::dict d;
    d["captures"] = s.captures;
    d["instantiations"] = s.instantiations;
    d["launches"] = s.launches;
    d["updates"] = s.updates;
    d["reinstantiations"] = s.reinstantiations;
    d["eager_fallbacks"] = s.eager_fallbacks;
    d["eager_cheaper"] = s.eager_cheaper;
    d["coalesced_nodes"] = s.coalesced_nodes;
    d["batched_nodes"] = s.batched_nodes;
    d["unchanged"] = s.unchanged;
    return d;
  });
}

}  // namespace sluice::python
