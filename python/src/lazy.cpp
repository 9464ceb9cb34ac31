// `sluice._sluice._lazy`: the primitives under the Python package `sluice.lazy` (reference 001).
// Nodes of the C++ lazy layer's DAG (sluice/lazy.hpp) with their element type known at run time,
// the constructors of every array operation, and compiled programs run on sluice arrays. The
// NumPy-like front end (operators, Python numbers, dtype rules, the `compile` decorator) is the
// Python part, python/sluice/lazy/.

#include <map>
#include <string>

#include "arrays.hpp"
#include "common.hpp"
#include "releases.hpp"
#include "sluice/lazy.hpp"

namespace sluice::python {
namespace {

namespace lz = sluice::lazy;

/// A node of the DAG, as Python holds it.
struct Node {
  lz::detail::NodePtr node;
};

lz::DType to_lazy(const DType& t, std::source_location loc) {
  using C = DType::Code;
  if (t.code == C::bool_) return lz::DType::boolean;
  if (t.code == C::int_ && t.bits == 32) return lz::DType::i32;
  if (t.code == C::int_ && t.bits == 64) return lz::DType::i64;
  if (t.code == C::float_ && t.bits == 32) return lz::DType::f32;
  if (t.code == C::float_ && t.bits == 64) return lz::DType::f64;
  throw Error(Errc::invalid_argument,
              "sluice.lazy: arrays of " + t.name() +
                  " are not supported (bool, int32, int64, float32 or float64: convert first)",
              loc);
}

lz::Shape shape_of(const py::handle& shape) {
  lz::Shape out;
  if (py::isinstance<py::int_>(shape)) {
    out.push_back(shape.cast<std::int64_t>());
  } else {
    for (auto s : shape) out.push_back(s.cast<std::int64_t>());
  }
  return out;
}

py::tuple to_tuple(const lz::Shape& s) {
  py::tuple t(s.size());
  for (std::size_t i = 0; i < s.size(); ++i) t[i] = s[i];
  return t;
}

std::optional<std::vector<int>> axes_of(const py::object& axes) {
  if (axes.is_none()) return std::nullopt;
  if (py::isinstance<py::int_>(axes)) return std::vector<int>{axes.cast<int>()};
  std::vector<int> v;
  for (auto a : axes) v.push_back(a.cast<int>());
  return v;
}

lz::Op op_of(const std::string& name, std::source_location loc) {
  static const std::map<std::string, lz::Op> ops = {
      {"neg", lz::Op::neg},
      {"abs", lz::Op::abs},
      {"sqrt", lz::Op::sqrt},
      {"exp", lz::Op::exp},
      {"log", lz::Op::log},
      {"sin", lz::Op::sin},
      {"cos", lz::Op::cos},
      {"tan", lz::Op::tan},
      {"tanh", lz::Op::tanh},
      {"floor", lz::Op::floor},
      {"ceil", lz::Op::ceil},
      {"logical_not", lz::Op::logical_not},
      {"bit_not", lz::Op::bit_not},
      {"add", lz::Op::add},
      {"sub", lz::Op::sub},
      {"mul", lz::Op::mul},
      {"div", lz::Op::div},
      {"mod", lz::Op::mod},
      {"pow", lz::Op::pow},
      {"minimum", lz::Op::minimum},
      {"maximum", lz::Op::maximum},
      {"eq", lz::Op::eq},
      {"ne", lz::Op::ne},
      {"lt", lz::Op::lt},
      {"le", lz::Op::le},
      {"gt", lz::Op::gt},
      {"ge", lz::Op::ge},
      {"logical_and", lz::Op::logical_and},
      {"logical_or", lz::Op::logical_or},
      {"bit_and", lz::Op::bit_and},
      {"bit_or", lz::Op::bit_or},
      {"bit_xor", lz::Op::bit_xor},
  };
  auto it = ops.find(name);
  if (it == ops.end()) {
    throw Error(Errc::invalid_argument, "sluice.lazy: no element-wise operation '" + name + "'",
                loc);
  }
  return it->second;
}

lz::ReduceOp reduce_of(const std::string& name, std::source_location loc) {
  if (name == "sum") return lz::ReduceOp::sum;
  if (name == "prod") return lz::ReduceOp::prod;
  if (name == "min") return lz::ReduceOp::min;
  if (name == "max") return lz::ReduceOp::max;
  throw Error(Errc::invalid_argument, "sluice.lazy: no reduction '" + name + "'", loc);
}

/// A literal of `dtype` from a Python number.
lz::detail::Literal literal_of(const py::handle& value, lz::DType dtype) {
  lz::detail::Literal l{dtype, 0, 0};
  if (dtype == lz::DType::f32 || dtype == lz::DType::f64) {
    l.f = value.cast<double>();
  } else {
    l.i = value.cast<std::int64_t>();
  }
  return l;
}

std::vector<lz::detail::NodePtr> nodes_of(const std::vector<Node>& v) {
  std::vector<lz::detail::NodePtr> out;
  out.reserve(v.size());
  for (const auto& n : v) out.push_back(n.node);
  return out;
}

/// A sluice array as a lazy binding, checked for use by `ctx`'s device.
lz::Bind bind_of(const std::shared_ptr<Array>& a, const Context& ctx, bool output,
                 const std::string& what, std::source_location loc) {
  a->check_live(loc);
  const Device dev = ctx.device();
  const bool usable = dev.backend == "host" ? a->host_accessible()
                                            : (a->memory != Memory::host && a->device == dev);
  if (!usable) {
    throw Error(Errc::invalid_argument,
                "sluice.lazy: " + what + " is " + a->device.to_string() +
                    (a->memory == Memory::host ? " (pageable host) memory" : " memory") +
                    " but the program runs on " + dev.to_string() +
                    "; copy it there first (sluice.array(x, ctx=ctx))",
                loc);
  }
  if (output && a->readonly) {
    throw Error(Errc::invalid_argument, "sluice.lazy: " + what + " is read-only", loc);
  }
  return lz::Bind(a->data, a->id, a->size(), to_lazy(a->dtype, loc), lz::Shape(a->shape));
}

lz::Options options_of(const std::string& fusion, const std::string& schedule, bool debug,
                       std::size_t cache_capacity, const std::string& name,
                       const py::object& device, std::source_location loc) {
  lz::Options o;
  if (fusion == "none") {
    o.fusion = lz::Fusion::none;
  } else if (fusion == "elementwise") {
    o.fusion = lz::Fusion::elementwise;
  } else if (fusion == "full") {
    o.fusion = lz::Fusion::full;
  } else {
    throw Error(Errc::invalid_argument,
                "sluice.lazy: fusion is 'none', 'elementwise' or 'full', not '" + fusion + "'",
                loc);
  }
  if (schedule == "dataflow") {
    o.schedule = lz::Schedule::dataflow;
  } else if (schedule == "serial") {
    o.schedule = lz::Schedule::serial;
  } else {
    throw Error(Errc::invalid_argument,
                "sluice.lazy: schedule is 'dataflow' or 'serial', not '" + schedule + "'", loc);
  }
  o.debug = debug;
  o.cache_capacity = cache_capacity;
  o.name = name;
  o.device = to_device(device);
  return o;
}

struct Inputs {
  std::vector<std::string> names;  // kept: Input holds a string_view
  std::vector<lz::Input> inputs;
};

Inputs inputs_of(const py::dict& d, const Context& ctx, std::source_location loc) {
  Inputs in;
  in.names.reserve(d.size());
  for (auto [k, v] : d) in.names.push_back(k.cast<std::string>());
  std::size_t i = 0;
  for (auto [k, v] : d) {
    auto a = as_array(v, ctx, loc);
    in.inputs.emplace_back(in.names[i], bind_of(a, ctx, false, "input '" + in.names[i] + "'", loc));
    ++i;
  }
  return in;
}

py::dict stats_dict(const lz::Stats& s) {
  py::dict d;
  d["operations"] = s.operations;
  d["kernels"] = s.kernels;
  d["blas"] = s.blas;
  d["graph_nodes"] = s.graph_nodes;
  d["concurrency"] = s.concurrency;
  d["temporaries"] = s.temporaries;
  d["temporary_bytes"] = s.temporary_bytes;
  d["codegen_ms"] = s.codegen_ms;
  d["build_ms"] = s.build_ms;
  d["build_origin"] = s.build_origin;
  d["last_build_ms"] = s.last_build_ms;
  d["last_build_origin"] = s.last_build_origin;
  d["instantiations"] = s.instantiations;
  d["instance_hits"] = s.instance_hits;
  d["evictions"] = s.evictions;
  d["rebinds"] = s.rebinds;
  d["rebound_nodes"] = s.rebound_nodes;
  d["binding_mode"] = s.binding_mode;
  d["table"] = s.table;
  d["launches"] = s.launches;
  d["tune_mode"] = s.tune_mode;
  d["gemm_mode"] = s.gemm_mode;
  d["tile_mode"] = s.tile_mode;
  d["tiled_kernels"] = s.tiled_kernels;
  d["multi_output_kernels"] = s.multi_output_kernels;
  d["tune_groups"] = s.tune_groups;
  d["tuned_groups"] = s.tuned_groups;
  d["tune_hits"] = s.tune_hits;
  d["tune_candidates"] = s.tune_candidates;
  d["tune_ms"] = s.tune_ms;
  return d;
}

}  // namespace

void bind_lazy(py::module_& parent) {
  py::module_ m = parent.def_submodule(
      "_lazy",
      "Primitives of sluice.lazy (the C++ lazy array layer, sluice/lazy.hpp): DAG nodes, their "
      "constructors, and compiled programs. Use the package sluice.lazy instead.");

  py::class_<Node>(m, "Node", "A node of a lazy array program's DAG (immutable).")
      .def_property_readonly(
          "shape", [](const Node& n) { return to_tuple(lz::detail::node_shape(*n.node)); })
      .def_property_readonly(
          "dtype",
          [](const Node& n) { return std::string(lz::to_string(lz::detail::node_dtype(*n.node))); })
      .def_property_readonly("name", [](const Node& n) { return lz::detail::node_name(*n.node); })
      .def_property_readonly(
          "id", [](const Node& n) { return reinterpret_cast<std::uintptr_t>(n.node.get()); });

  m.def(
      "placeholder",
      [](const std::string& name, const py::object& shape, const py::object& dtype) {
        const auto loc = caller();
        return Node{lz::detail::make_placeholder(name, shape_of(shape),
                                                 to_lazy(DType::from_python(dtype), loc), loc)};
      },
      py::arg("name"), py::arg("shape"), py::arg("dtype"));
  m.def(
      "constant",
      [](const py::object& obj, const std::optional<Context>& ctx) {
        const auto loc = caller();
        auto a = as_array(obj, ctx, loc);
        a->check_live(loc);
        const auto dt = to_lazy(a->dtype, loc);
        return Node{
            lz::detail::make_constant(a, a->data, a->id, a->nbytes, lz::Shape(a->shape), dt, loc)};
      },
      py::arg("array"), py::arg("ctx") = py::none());
  m.def(
      "fill",
      [](const py::object& value, const py::object& dtype, const py::object& shape) {
        const auto loc = caller();
        const auto dt = to_lazy(DType::from_python(dtype), loc);
        return Node{lz::detail::make_fill(literal_of(value, dt), shape_of(shape), loc)};
      },
      py::arg("value"), py::arg("dtype"), py::arg("shape"));
  m.def("unary", [](const std::string& op, const Node& a) {
    const auto loc = caller();
    return Node{lz::detail::make_unary(op_of(op, loc), a.node, loc)};
  });
  m.def("binary", [](const std::string& op, const Node& a, const Node& b) {
    const auto loc = caller();
    return Node{lz::detail::make_binary(op_of(op, loc), a.node, b.node, loc)};
  });
  m.def("where", [](const Node& c, const Node& a, const Node& b) {
    return Node{lz::detail::make_where(c.node, a.node, b.node, caller())};
  });
  m.def("cast", [](const Node& a, const py::object& dtype) {
    const auto loc = caller();
    return Node{lz::detail::make_cast(a.node, to_lazy(DType::from_python(dtype), loc), loc)};
  });
  m.def(
      "reduce",
      [](const std::string& op, const Node& a, const py::object& axes, bool keepdims) {
        const auto loc = caller();
        return Node{
            lz::detail::make_reduce(reduce_of(op, loc), a.node, axes_of(axes), keepdims, loc)};
      },
      py::arg("op"), py::arg("a"), py::arg("axes") = py::none(), py::arg("keepdims") = false);
  m.def("einsum", [](const std::string& spec, const std::vector<Node>& operands) {
    return Node{lz::detail::make_einsum(spec, nodes_of(operands), caller())};
  });
  m.def(
      "take",
      [](const Node& a, const Node& indices, std::optional<int> axis) {
        return Node{lz::detail::make_take(a.node, indices.node, axis, caller())};
      },
      py::arg("a"), py::arg("indices"), py::arg("axis") = py::none());
  m.def("take_along_axis", [](const Node& a, const Node& indices, int axis) {
    return Node{lz::detail::make_take_along_axis(a.node, indices.node, axis, caller())};
  });
  m.def("index", [](const Node& a, const py::tuple& items) {
    const auto loc = caller();
    std::vector<lz::detail::IndexItem> v;
    using K = lz::detail::IndexItem::Kind;
    for (auto item : items) {
      lz::detail::IndexItem it;
      if (item.is_none()) {
        it.kind = K::newaxis;
      } else if (item.ptr() == Py_Ellipsis) {
        it.kind = K::ellipsis;
      } else if (py::isinstance<py::slice>(item)) {
        auto get = [&](const char* attr) -> std::optional<std::int64_t> {
          py::object o = item.attr(attr);
          if (o.is_none()) return std::nullopt;
          return o.cast<std::int64_t>();
        };
        it.kind = K::slice;
        it.slice.start = get("start");
        it.slice.stop = get("stop");
        it.slice.step = get("step").value_or(1);
        if (it.slice.step == 0) {
          throw Error(Errc::invalid_argument, "sluice.lazy: a slice step may not be zero", loc);
        }
      } else if (py::isinstance<Node>(item)) {
        it.kind = K::array;
        it.array = item.cast<const Node&>().node;
      } else if (py::isinstance<py::int_>(item) || py::hasattr(item, "__index__")) {
        it.kind = K::integer;
        it.integer =
            py::reinterpret_borrow<py::object>(item).attr("__index__")().cast<std::int64_t>();
      } else {
        throw py::type_error(
            "sluice.lazy: an index is a slice, an integer, an integer lazy "
            "array, None or ..., not " +
            std::string(py::str(py::type::of(item))));
      }
      v.push_back(std::move(it));
    }
    return Node{lz::detail::make_index(a.node, std::move(v), loc)};
  });
  m.def("reshape", [](const Node& a, const py::object& shape) {
    return Node{lz::detail::make_reshape(a.node, shape_of(shape), caller())};
  });
  m.def(
      "transpose",
      [](const Node& a, const py::object& perm) {
        return Node{lz::detail::make_transpose(a.node, axes_of(perm), caller())};
      },
      py::arg("a"), py::arg("axes") = py::none());
  m.def("concatenate", [](const std::vector<Node>& arrays, int axis) {
    return Node{lz::detail::make_concatenate(nodes_of(arrays), axis, caller())};
  });
  m.def("stack", [](const std::vector<Node>& arrays, int axis) {
    return Node{lz::detail::make_stack(nodes_of(arrays), axis, caller())};
  });
  m.def(
      "roll",
      [](const Node& a, std::int64_t shift, std::optional<int> axis) {
        return Node{lz::detail::make_roll(a.node, shift, axis, caller())};
      },
      py::arg("a"), py::arg("shift"), py::arg("axis") = py::none());
  m.def("broadcast_to", [](const Node& a, const py::object& shape) {
    return Node{lz::detail::make_broadcast_to(a.node, shape_of(shape), caller())};
  });

  py::class_<lz::Program, std::shared_ptr<lz::Program>>(m, "Program",
                                                        "A compiled lazy array program.")
      .def(
          "run",
          [](lz::Program& p, const Context& ctx, const py::dict& inputs, const py::list& outputs) {
            const auto loc = caller();
            collect();
            Inputs in = inputs_of(inputs, ctx, loc);
            std::vector<std::shared_ptr<Array>> keep;
            std::vector<lz::Bind> outs;
            for (std::size_t o = 0; o < outputs.size(); ++o) {
              keep.push_back(as_array(outputs[o], ctx, loc));
              outs.push_back(bind_of(keep.back(), ctx, true, "output " + std::to_string(o), loc));
            }
            nogil([&] { p.run(ctx, in.inputs, outs, loc); });
          },
          py::arg("ctx"), py::arg("inputs"), py::arg("outputs"))
      .def(
          "output_shapes",
          [](const lz::Program& p, const py::dict& shapes) {
            std::vector<std::pair<std::string, lz::Shape>> v;
            for (auto [k, s] : shapes) v.emplace_back(k.cast<std::string>(), shape_of(s));
            py::list out;
            for (const auto& s : p.output_shapes(v)) out.append(to_tuple(s));
            return out;
          },
          py::arg("shapes") = py::dict())
      .def("placeholders",
           [](const lz::Program& p) {
             py::list out;
             for (const auto& ph : p.placeholders()) {
               out.append(py::make_tuple(ph.name, to_tuple(ph.shape),
                                         std::string(lz::to_string(ph.dtype))));
             }
             return out;
           })
      .def("dot", &lz::Program::dot)
      .def("stats", [](const lz::Program& p) { return stats_dict(p.stats()); })
      .def("source", &lz::Program::source)
      .def("kernels", [](const lz::Program& p) {
        py::list out;
        for (const auto& k : p.kernels()) {
          py::dict d;
          d["name"] = k.name;
          d["kind"] = k.kind;
          d["source"] = k.source;
          d["elements"] = k.elements;
          d["ops"] = k.ops;
          d["shape"] = k.shape;
          d["candidates"] = k.candidates;
          d["candidate_us"] = k.candidate_us;
          d["choice"] = k.choice;
          out.append(d);
        }
        return out;
      });

  m.def(
      "compile",
      [](const std::vector<Node>& outputs, const std::string& fusion, const std::string& schedule,
         bool debug, std::size_t cache_capacity, const std::string& name,
         const py::object& device) {
        const auto loc = caller();
        auto o = options_of(fusion, schedule, debug, cache_capacity, name, device, loc);
        auto nodes = nodes_of(outputs);
        return nogil([&] {
          return std::shared_ptr<lz::Program>(
              new lz::Program(lz::detail::compile_nodes(std::move(nodes), o, loc)), NogilDelete{});
        });
      },
      py::arg("outputs"), py::arg("fusion") = "full", py::arg("schedule") = "dataflow",
      py::arg("debug") = false, py::arg("cache_capacity") = 8, py::arg("name") = "lazy",
      py::arg("device") = py::none());
  m.def(
      "eval_into",
      [](const Context& ctx, const Node& a, const py::dict& inputs, const py::object& out,
         const std::string& fusion, const std::string& schedule, bool debug) {
        const auto loc = caller();
        collect();
        auto o = options_of(fusion, schedule, debug, 8, "lazy", py::none(), loc);
        Inputs in = inputs_of(inputs, ctx, loc);
        auto arr = as_array(out, ctx, loc);
        auto b = bind_of(arr, ctx, true, "the output", loc);
        nogil([&] { lz::detail::eval_into(ctx, a.node, in.inputs, b, o, loc); });
      },
      py::arg("ctx"), py::arg("array"), py::arg("inputs"), py::arg("out"),
      py::arg("fusion") = "full", py::arg("schedule") = "dataflow", py::arg("debug") = false);
  m.def("global_stats", [] {
    const auto g = lz::global_stats();
    py::dict d;
    d["programs"] = g.programs;
    d["modules_built"] = g.modules_built;
    d["module_memory_hits"] = g.module_memory_hits;
    d["module_disk_hits"] = g.module_disk_hits;
    d["eval_cache_hits"] = g.eval_cache_hits;
    return d;
  });
  m.def("clear_module_memory", [] { lz::clear_module_memory(); });
}

}  // namespace sluice::python
