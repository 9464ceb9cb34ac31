// Source generation for both dialects (see codegen.hpp).

#include "lazy/codegen.hpp"

#include <algorithm>
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <unordered_map>

#include "lazy/cuda_shape.hpp"
#include "sluice/error.hpp"

namespace sluice::lazy::detail {
namespace {

const char* ctype(DType t) {
  switch (t) {
    case DType::boolean:
      return "bool";
    case DType::i32:
      return "int";
    case DType::i64:
      return "long long";
    case DType::f32:
      return "float";
    case DType::f64:
      return "double";
  }
  return "?";
}

std::string float_text(double v, DType t) {
  if (std::isinf(v)) {
    const char* s = v > 0 ? "SL_INF" : "(-SL_INF)";
    return t == DType::f32 ? std::string("((float)") + s + ")" : s;
  }
  if (std::isnan(v)) return t == DType::f32 ? "((float)SL_NAN)" : "SL_NAN";
  char buf[64];
  std::snprintf(buf, sizeof buf, "%a", v);
  std::string s(buf);
  if (t == DType::f32) return "((float)" + s + ")";
  return s;
}

/// Emits the element code of one kernel: each distinct subexpression becomes a named constant in
/// the outermost loop level it depends on (loop-invariant code leaves the inner loops), except
/// inside a lazy branch (a concatenation's), which keeps its code to itself.
class Emitter {
 public:
  Emitter(LazyDialect d, std::vector<int> var_levels, int post_level, bool debug,
          std::vector<std::int64_t>& params)
      : dialect_(d),
        var_levels_(std::move(var_levels)),
        post_(post_level),
        debug_(debug),
        params_(params),
        blocks_(static_cast<std::size_t>(post_level) + 1) {}

  /// Buffer j of the kernel holds the lowered node `slot` with `shape`.
  void bind_buffer(int slot, int j, const Shape& shape, DType t) {
    buffers_[slot] = {j, shape, t, {}};
  }
  /// Buffer j is read from its copy in shared memory `sh<j>`, laid out with `strides`.
  void bind_shared(int slot, int j, const Shape& shape, DType t,
                   std::vector<std::int64_t> strides) {
    buffers_[slot] = {j, shape, t, std::move(strides)};
  }
  std::string value(const ExPtr& e) { return emit(e); }
  /// The code of `level` so far, taken out; the names it defined (and any deeper) are forgotten,
  /// so that later code at that level defines them again (a register tile's epilogue runs in a
  /// loop of its own, after the reduction's).
  std::string take_block(int level) {
    std::string s = std::move(blocks_[static_cast<std::size_t>(level)]);
    blocks_[static_cast<std::size_t>(level)].clear();
    for (auto& [h, list] : memo_) {
      std::erase_if(list, [&](const Memo& m) { return level_of(m.e) >= level; });
    }
    return s;
  }
  [[nodiscard]] int level(const ExPtr& e) { return level_of(e); }
  /// Keeps an expression built for emission alive (levels are remembered by address).
  void keep(const ExPtr& e) { keep_.push_back(e); }
  [[nodiscard]] const std::string& block(int level) const {
    return blocks_[static_cast<std::size_t>(level)];
  }
  std::string param(std::int64_t v) {
    if (v == 0 || v == 1 || v == -1) return std::to_string(v) + "LL";
    // Each occurrence is its own parameter (the source then depends on the structure only),
    // until a kernel has so many that its argument struct nears CUDA's 4 KB: then equal values
    // share one.
    if (params_.size() >= kShareParamsFrom) {
      for (std::size_t i = 0; i < params_.size(); ++i) {
        if (params_[i] == v) return "P[" + std::to_string(i) + "]";
      }
    }
    params_.push_back(v);
    return "P[" + std::to_string(params_.size() - 1) + "]";
  }
  static constexpr std::size_t kShareParamsFrom = 320;

 private:
  struct Buffer {
    int index;
    Shape shape;
    DType dtype;
    std::vector<std::int64_t> shared;  // strides of its shared-memory copy (empty: global)
  };
  struct Memo {
    ExPtr e;
    std::string name;
  };

  int level_of(const ExPtr& e) {
    if (auto it = levels_.find(e.get()); it != levels_.end()) return it->second;
    int l = 0;
    if (e->kind == ExKind::var) {
      l = var_levels_[static_cast<std::size_t>(e->var)];
    } else if (e->kind == ExKind::acc) {
      l = post_;
    } else {
      for (const auto& a : e->args) l = std::max(l, level_of(a));
    }
    levels_.emplace(e.get(), l);
    return l;
  }

  std::string* target_block(int level) {
    if (!branches_.empty()) return branches_.back();
    return &blocks_[static_cast<std::size_t>(level)];
  }

  const std::string* find(const ExPtr& e) const {
    auto it = memo_.find(e->hash);
    if (it == memo_.end()) return nullptr;
    for (const auto& m : it->second) {
      if (same(m.e, e)) return &m.name;
    }
    return nullptr;
  }

  std::string define(const ExPtr& e, const std::string& expr, const char* type = nullptr) {
    const std::string name = "t" + std::to_string(next_++);
    *target_block(level_of(e)) +=
        "const " + std::string(type ? type : ctype(e->dtype)) + " " + name + " = " + expr + ";\n";
    memo_[e->hash].push_back({e, name});
    if (!branches_.empty()) branch_memo_.back().push_back(e->hash);
    return name;
  }

  std::string offset(const ExPtr& load) {
    const auto& b = buffers_.at(load->slot);
    std::vector<std::int64_t> st(b.shape.size(), 1);
    for (std::size_t k = b.shape.size(); k-- > 1;) st[k - 1] = st[k] * b.shape[k];
    if (!b.shared.empty()) st = b.shared;
    ExPtr off = ex_int(0);
    for (std::size_t k = 0; k < load->args.size(); ++k) {
      off = ex_add(off, ex_mul(load->args[k], ex_int(st[k])));
    }
    keep_.push_back(off);  // levels_ is keyed by address: keep the expression alive
    return emit(off);
  }

  std::string emit(const ExPtr& e) {
    switch (e->kind) {
      case ExKind::literal:
        if (is_float(e->dtype)) return float_text(e->lit.f, e->dtype);
        if (e->dtype == DType::boolean) return e->lit.i ? "true" : "false";
        if (e->dtype == DType::i32) {
          return e->lit.i >= -1 && e->lit.i <= 1 ? std::to_string(e->lit.i)
                                                 : "((int)" + param(e->lit.i) + ")";
        }
        return param(e->lit.i);
      case ExKind::var:
        return "i" + std::to_string(e->var);
      case ExKind::acc:
        return "acc";
      default:
        break;
    }
    if (const std::string* n = find(e)) return *n;
    switch (e->kind) {
      case ExKind::load: {
        const auto& b = buffers_.at(e->slot);
        const std::string off = offset(e);
        return define(e,
                      (b.shared.empty() ? "b" : "sh") + std::to_string(b.index) + "[" + off + "]");
      }
      case ExKind::cast: {
        const std::string a = emit(e->args[0]);
        if (e->dtype == DType::boolean) return define(e, "(" + a + " != 0)");
        return define(e, "(" + std::string(ctype(e->dtype)) + ")(" + a + ")");
      }
      case ExKind::unary:
        return define(e, unary(e->op, e->dtype, emit(e->args[0])));
      case ExKind::binary: {
        const std::string a = emit(e->args[0]);
        const std::string b = emit(e->args[1]);
        return define(e, binary(e->op, e->args[0]->dtype, a, b));
      }
      case ExKind::bound: {
        const std::string i = emit(e->args[0]);
        const std::string n = emit(e->args[1]);
        if (debug_) {
          return define(e, "SL_bndd(" + i + ", " + n + ", " + std::to_string(e->site) + ", " +
                               (e->wrap ? "1" : "0") + ", err)");
        }
        return define(e, (e->wrap ? "SL_bndw(" : "SL_bnd(") + i + ", " + n + ")");
      }
      case ExKind::where: {
        const std::string c = emit(e->args[0]);
        if (!e->lazy) {
          const std::string a = emit(e->args[1]);
          const std::string b = emit(e->args[2]);
          return define(e, "(" + c + " ? " + a + " : " + b + ")");
        }
        // Each branch is evaluated only when taken: its code stays inside it.
        const std::string name = "t" + std::to_string(next_++);
        std::string* outer = target_block(level_of(e));
        std::string then_code, else_code;
        const std::string a = branch(e->args[1], then_code);
        const std::string b = branch(e->args[2], else_code);
        *outer += std::string(ctype(e->dtype)) + " " + name + ";\nif (" + c + ") {\n" + then_code +
                  name + " = " + a + ";\n} else {\n" + else_code + name + " = " + b + ";\n}\n";
        memo_[e->hash].push_back({e, name});
        if (!branches_.empty()) branch_memo_.back().push_back(e->hash);
        return name;
      }
      default:
        throw Error(Errc::invalid_state,
                    "sluice::lazy internal error: codegen: unexpected expression");
    }
  }

  std::string branch(const ExPtr& e, std::string& code) {
    branches_.push_back(&code);
    branch_memo_.emplace_back();
    const std::string v = emit(e);
    for (auto h : branch_memo_.back()) {
      auto& list = memo_[h];
      if (!list.empty()) list.pop_back();
    }
    branch_memo_.pop_back();
    branches_.pop_back();
    return v;
  }

  std::string unary(Op op, DType t, const std::string& a) {
    switch (op) {
      case Op::neg:
        return "(-" + a + ")";
      case Op::abs:
        return "SL_abs(" + a + ")";
      case Op::logical_not:
        return "(!" + a + ")";
      case Op::bit_not:
        return "(~" + a + ")";
      default:
        break;
    }
    (void)t;
    return std::string("SL_") + op_symbol(op) + "(" + a + ")";
  }

  std::string binary(Op op, DType t, const std::string& a, const std::string& b) {
    const bool integer = is_int(t) || t == DType::boolean;
    switch (op) {
      case Op::add:
        return "(" + a + " + " + b + ")";
      case Op::sub:
        return "(" + a + " - " + b + ")";
      case Op::mul:
        return "(" + a + " * " + b + ")";
      case Op::div:
        return integer ? "SL_idiv(" + a + ", " + b + ")" : "(" + a + " / " + b + ")";
      case Op::mod:
        return "SL_imod(" + a + ", " + b + ")";
      case Op::pow:
        return "SL_pow(" + a + ", " + b + ")";
      case Op::minimum:
        return "(" + b + " < " + a + " ? " + b + " : " + a + ")";
      case Op::maximum:
        return "(" + a + " < " + b + " ? " + b + " : " + a + ")";
      case Op::eq:
        return "(" + a + " == " + b + ")";
      case Op::ne:
        return "(" + a + " != " + b + ")";
      case Op::lt:
        return "(" + a + " < " + b + ")";
      case Op::le:
        return "(" + a + " <= " + b + ")";
      case Op::gt:
        return "(" + a + " > " + b + ")";
      case Op::ge:
        return "(" + a + " >= " + b + ")";
      case Op::logical_and:
        return "(" + a + " && " + b + ")";
      case Op::logical_or:
        return "(" + a + " || " + b + ")";
      case Op::bit_and:
        return "(" + a + " & " + b + ")";
      case Op::bit_or:
        return "(" + a + " | " + b + ")";
      case Op::bit_xor:
        return "(" + a + " ^ " + b + ")";
      default:
        break;
    }
    throw Error(Errc::invalid_state,
                std::string("sluice::lazy codegen: no binary ") + op_symbol(op));
  }

  LazyDialect dialect_;
  std::vector<int> var_levels_;
  int post_;
  bool debug_;
  std::vector<std::int64_t>& params_;
  std::vector<std::string> blocks_;
  std::vector<std::string*> branches_;
  std::vector<std::vector<std::uint64_t>> branch_memo_;
  std::unordered_map<int, Buffer> buffers_;
  std::unordered_map<std::uint64_t, std::vector<Memo>> memo_;
  std::unordered_map<const Ex*, int> levels_;
  std::vector<ExPtr> keep_;
  int next_ = 0;
};

std::string combine(ReduceOp op, const std::string& v, const std::string& acc = "acc") {
  switch (op) {
    case ReduceOp::sum:
      return acc + " += " + v + ";\n";
    case ReduceOp::prod:
      return acc + " *= " + v + ";\n";
    case ReduceOp::min:
      return acc + " = " + v + " < " + acc + " ? " + v + " : " + acc + ";\n";
    case ReduceOp::max:
      return acc + " = " + acc + " < " + v + " ? " + v + " : " + acc + ";\n";
  }
  return {};
}

/// The initial value of a reduction's accumulator.
std::string reduce_init(ReduceOp op, DType t) {
  const ExPtr id = reduce_identity(op, t);
  if (is_float(id->dtype)) return float_text(id->lit.f, id->dtype);
  if (id->dtype == DType::i32) return std::to_string(id->lit.i);
  return std::to_string(id->lit.i) + "LL";
}

/// Factors of a product tree (of one type).
void factors_of(const ExPtr& e, std::vector<ExPtr>& out) {
  if (e->kind == ExKind::binary && e->op == Op::mul && e->args[0]->dtype == e->dtype &&
      e->args[1]->dtype == e->dtype) {
    factors_of(e->args[0], out);
    factors_of(e->args[1], out);
    return;
  }
  out.push_back(e);
}

/// A sum over reduction loops of a product whose factors do not all depend on the innermost
/// loop: each loop sums the product of its own factors times the next loop's partial sum, and the
/// factors independent of every reduction variable multiply the total (an einsum's geometric
/// factor leaves the loop over nodes, as one writes it by hand). Changes only the rounding.
bool factored_sum(const Kernel& k, Emitter& em, int element, int rank,
                  const std::vector<std::string>& red_ext, std::string& inner, std::string& value) {
  const int nred = static_cast<int>(k.red.size());
  if (k.rop != ReduceOp::sum || nred == 0 || !is_float(k.body->dtype)) return false;
  std::vector<ExPtr> fs;
  factors_of(k.body, fs);
  if (fs.size() < 2) return false;
  // Bucket 0: independent of the reduction; bucket r + 1: innermost dependence on variable r.
  std::vector<std::vector<ExPtr>> buckets(static_cast<std::size_t>(nred) + 1);
  for (const auto& f : fs) {
    const int l = em.level(f);
    buckets[static_cast<std::size_t>(std::max(0, l - element))].push_back(f);
  }
  if (buckets.back().size() == fs.size()) return false;  // nothing leaves the inner loop
  std::vector<std::string> prod(buckets.size());
  for (std::size_t b = 0; b < buckets.size(); ++b) {
    if (buckets[b].empty()) continue;
    ExPtr p = buckets[b][0];
    for (std::size_t q = 1; q < buckets[b].size(); ++q) p = ex_mul(p, buckets[b][q]);
    em.keep(p);
    prod[b] = em.value(p);
  }
  const char* T = ctype(k.body->dtype);
  const std::string zero = float_text(0.0, k.body->dtype);
  std::string code;
  for (int r = 0; r < nred; ++r) {
    const std::string i = std::to_string(rank + r);
    code += std::string(T) + " s" + std::to_string(r) + " = " + zero + ";\n";
    code += "for (long long i" + i + " = 0; i" + i + " < " + red_ext[static_cast<std::size_t>(r)] +
            "; ++i" + i + ") {\n" + em.block(element + 1 + r);
  }
  for (int r = nred - 1; r >= 0; --r) {
    const auto& f = prod[static_cast<std::size_t>(r) + 1];
    std::string term;
    if (r == nred - 1) {
      term = f.empty() ? std::string("1") : f;
    } else {
      term = f.empty() ? "s" + std::to_string(r + 1) : f + " * s" + std::to_string(r + 1);
    }
    code += "s" + std::to_string(r) + " += " + term + ";\n}\n";
  }
  code += std::string(T) + " acc = " + (prod[0].empty() ? std::string("s0") : prod[0] + " * s0") +
          ";\n";
  value = k.epilogue ? em.value(k.epilogue) : "acc";
  inner = code + em.block(element + 1 + nred);
  return true;
}

double weight_of(const Kernel& k) {
  if (k.kind != Kernel::Kind::reduce) return 1;
  return std::clamp(static_cast<double>(numel(k.red)) / 8.0, 1.0, 4096.0);
}

}  // namespace

std::string prelude(LazyDialect d) {
  std::string s = "// generated by sluice::lazy\n";
  if (d == LazyDialect::cuda) {
    s += "#define SL_FN static __device__ __forceinline__\n"
         "#define SL_INF __longlong_as_double(0x7ff0000000000000LL)\n"
         "#define SL_NAN __longlong_as_double(0x7ff8000000000000LL)\n"
         "#define SL_RESTRICT __restrict__\n";
  } else {
    s += "#define SL_FN static inline __attribute__((always_inline))\n"
         "#define SL_INF __builtin_inf()\n"
         "#define SL_NAN __builtin_nan(\"\")\n"
         "#define SL_RESTRICT __restrict__\n";
  }
  // A buffer slot holds its buffer's address (SL_B), or under a binding table the address of
  // the table's entry that holds it (SL_BT, bind_through_table).
  s += "#define SL_B(p) (p)\n#define SL_BT(p) (*(void* const*)(p))\n";
  // Math in both precisions: the CUDA math library's names are C's, the host's are builtins.
  const char* host_fns[][2] = {{"sqrt", "sqrt"}, {"exp", "exp"},     {"log", "log"},
                               {"sin", "sin"},   {"cos", "cos"},     {"tan", "tan"},
                               {"tanh", "tanh"}, {"floor", "floor"}, {"ceil", "ceil"}};
  for (auto& f : host_fns) {
    const std::string n = f[0];
    const std::string impl = d == LazyDialect::cuda ? n : "__builtin_" + n;
    s += "SL_FN double SL_" + n + "(double x) { return " + impl + "(x); }\n";
    s += "SL_FN float SL_" + n + "(float x) { return " + impl + "f(x); }\n";
  }
  const std::string pw = d == LazyDialect::cuda ? "pow" : "__builtin_pow";
  s += "SL_FN double SL_pow(double x, double y) { return " + pw + "(x, y); }\n";
  s += "SL_FN float SL_pow(float x, float y) { return " + pw + "f(x, y); }\n";
  s +=
      "SL_FN double SL_abs(double x) { return x < 0 ? -x : (x == 0 ? 0.0 : x); }\n"
      "SL_FN float SL_abs(float x) { return x < 0 ? -x : (x == 0 ? 0.0f : x); }\n"
      "SL_FN int SL_abs(int x) { return x < 0 ? (int)(0u - (unsigned)x) : x; }\n"
      "SL_FN long long SL_abs(long long x) { return x < 0 ? (long long)(0ull - (unsigned long "
      "long)x) : x; }\n"
      "SL_FN int SL_idiv(int a, int b) { return b == 0 ? 0 : (b == -1 ? (int)(0u - (unsigned)a) "
      ": a / b); }\n"
      "SL_FN long long SL_idiv(long long a, long long b) { return b == 0 ? 0 : (b == -1 ? (long "
      "long)(0ull - (unsigned long long)a) : a / b); }\n"
      "SL_FN int SL_imod(int a, int b) { return (b == 0 || b == -1) ? 0 : a % b; }\n"
      "SL_FN long long SL_imod(long long a, long long b) { return (b == 0 || b == -1) ? 0 : a % b; "
      "}\n"
      "SL_FN long long SL_bnd(long long i, long long n) { return i < 0 ? 0 : (i >= n ? n - 1 : i); "
      "}\n"
      "SL_FN long long SL_bndw(long long i, long long n) { return SL_bnd(i < 0 ? i + n : i, n); "
      "}\n";
  if (d == LazyDialect::cuda) {
    s += "SL_FN void SL_report(long long* err, int site, long long i, long long n) {\n"
         "  if (atomicCAS((unsigned long long*)err, 0ull, 1ull) == 0ull) {\n"
         "    err[1] = site; err[2] = i; err[3] = n; __threadfence_system(); }\n}\n";
  } else {
    s +=
        "SL_FN void SL_report(long long* err, int site, long long i, long long n) {\n"
        "  long long expected = 0;\n"
        "  if (__atomic_compare_exchange_n(err, &expected, 2, 0, __ATOMIC_ACQ_REL, "
        "__ATOMIC_ACQUIRE)) {\n"
        "    err[1] = site; err[2] = i; err[3] = n; __atomic_store_n(err, 1, __ATOMIC_RELEASE); }\n"
        "}\n";
  }
  s += "SL_FN long long SL_bndd(long long i, long long n, int site, int wrap, long long* err) {\n"
       "  long long j = (wrap && i < 0) ? i + n : i;\n"
       "  if (j < 0 || j >= n) { SL_report(err, site, i, n); return SL_bnd(j, n); }\n"
       "  return j;\n}\n";
  return s;
}

KernelCode emit_kernel(const Kernel& k, const Lowered& L, LazyDialect d, int index, bool debug,
                       const CudaShape* chosen, const std::string& suffix, int members) {
  KernelCode code;
  code.name = "sl_k" + std::to_string(index) + suffix;
  code.members = std::max(members, 1);
  const bool horizontal = code.members > 1;
  code.elements = numel(k.shape);
  code.weight = weight_of(k);
  code.debug = debug;
  code.buffers = k.reads;
  code.outputs = 1 + static_cast<int>(k.siblings.size());
  const bool cuda = d == LazyDialect::cuda;
  const int rank = static_cast<int>(k.shape.size());
  const int nred = k.kind == Kernel::Kind::reduce ? static_cast<int>(k.red.size()) : 0;
  // The cuda kernel's shape: operands staged in shared memory, lanes per output (cuda_shape.hpp).
  const CudaShape shape = !cuda ? CudaShape{} : chosen ? *chosen : choose_cuda_shape(k, L);
  if (cuda) code.shape = describe(shape);
  const int G = shape.group;
  // Register tiles: T outputs of the last axis per thread (cuda reductions only).
  const int T = cuda && k.kind == Kernel::Kind::reduce && G == 1 && rank > 0 &&
                        k.shape.back() > 1 && code.elements > 0
                    ? std::max(shape.tile, 1)
                    : 1;
  // Loop levels: 0 the prologue; host: 1 the row (all but the last output axis), 2 the element;
  // cuda: 1 the element (a thread); then one level per reduction variable (one for all of them
  // when lanes share an output: they walk the flattened terms); with tiles, then the tile (the
  // last output axis: its code runs per output, inside the reduction); then "after the
  // reduction" (the epilogue).
  const int element = cuda ? 1 : 2;
  const int tile_level = element + 1 + nred;
  std::vector<int> var_levels(static_cast<std::size_t>(rank + nred));
  for (int v = 0; v < rank; ++v)
    var_levels[static_cast<std::size_t>(v)] = (cuda || v == rank - 1) ? element : 1;
  if (T > 1) var_levels[static_cast<std::size_t>(rank - 1)] = tile_level;
  for (int r = 0; r < nred; ++r)
    var_levels[static_cast<std::size_t>(rank + r)] = element + 1 + (G > 1 ? 0 : r);
  const int post = T > 1 ? tile_level + 1 : element + 1 + (G > 1 ? 1 : nred);
  std::int64_t chunks = 1;  // tiles along the last axis
  if (T > 1) {
    const std::int64_t last = k.shape.back();
    chunks = (last + T - 1) / T;
    code.elements = code.elements / last * chunks;  // threads: one per tile
  }
  Emitter em(d, var_levels, post, debug, code.params);
  for (std::size_t j = 0; j < k.reads.size(); ++j) {
    const auto& n = L.nodes[static_cast<std::size_t>(k.reads[j])];
    em.bind_buffer(k.reads[j], static_cast<int>(j) + 1, n.shape, n.dtype);
  }
  for (const auto& st : shape.staged) {
    const auto j = static_cast<std::size_t>(st.read);
    const auto& n = L.nodes[static_cast<std::size_t>(k.reads[j])];
    em.bind_shared(k.reads[j], static_cast<int>(j) + 1, n.shape, n.dtype, st.strides);
  }
  // Extents of the loops (parameters unless 0 or 1).
  std::vector<std::string> ext(static_cast<std::size_t>(rank));
  for (int v = 0; v < rank; ++v)
    ext[static_cast<std::size_t>(v)] = em.param(k.shape[static_cast<std::size_t>(v)]);
  std::vector<std::string> red_ext(static_cast<std::size_t>(nred));
  for (int r = 0; r < nred; ++r)
    red_ext[static_cast<std::size_t>(r)] = em.param(k.red[static_cast<std::size_t>(r)]);
  const std::string total = em.param(code.elements);

  // The element's value (and for a reduction, its loop).
  std::string inner;  // code of the element level after the blocks, up to the store
  std::string value;
  const std::string init =
      k.kind == Kernel::Kind::reduce ? reduce_init(k.rop, k.body->dtype) : std::string();
  // A multi-output reduction has one loop nest, a thread per output (merge_siblings keeps its
  // reductions short and untiled; its cuda shape never shares lanes or tiles).
  if (!k.siblings.empty() && (G > 1 || T > 1)) {
    throw Error(Errc::invalid_state,
                "sluice::lazy internal error: a multi-output kernel with lanes or tiles");
  }
  // The store of each further output: its reduction's accumulator, or its element value.
  std::vector<std::string> sibling_values(k.siblings.size());
  const std::string last_var = "i" + std::to_string(rank - 1);
  std::string tile_store;  // tiles: the loop over the tile's outputs that stores them
  if (T > 1) {
    // T accumulators; the factors of a sum of products that do not depend on the last output
    // axis multiply first, so that their product is computed once per term for the whole tile.
    ExPtr body = k.body;
    if (k.rop == ReduceOp::sum && is_float(k.body->dtype)) {
      std::vector<ExPtr> fs;
      factors_of(k.body, fs);
      ExPtr shared, own;
      for (const auto& f : fs) {
        ExPtr& into = em.level(f) < tile_level ? shared : own;
        into = into ? ex_mul(into, f) : f;
      }
      if (shared && own) {
        body = ex_mul(shared, own);
        em.keep(body);
      }
    }
    const std::string v = em.value(body);
    const char* Ty = ctype(k.body->dtype);
    const std::string last_ext = ext[static_cast<std::size_t>(rank - 1)];
    const std::string Ts = std::to_string(T);
    std::string loops = std::string(Ty) + " acc_[" + Ts +
                        "];\n#pragma unroll\nfor (int t_ = 0; t_ < " + Ts +
                        "; ++t_) acc_[t_] = " + init + ";\n";
    for (int r = 0; r < nred; ++r) {
      loops += "for (long long i" + std::to_string(rank + r) + " = 0; i" +
               std::to_string(rank + r) + " < " + red_ext[static_cast<std::size_t>(r)] + "; ++i" +
               std::to_string(rank + r) + ") {\n" + em.block(element + 1 + r);
    }
    // Past the axis' end (its last tile) the outputs are computed at its last index, not stored.
    loops += "#pragma unroll\nfor (int t_ = 0; t_ < " + Ts + "; ++t_) {\nconst long long " +
             last_var + " = c_ * " + Ts + " + t_ < " + last_ext + " ? c_ * " + Ts +
             " + t_ : " + last_ext + " - 1;\n" + em.take_block(tile_level) + Ty +
             " acc = acc_[t_];\n" + combine(k.rop, v) + "acc_[t_] = acc;\n}\n";
    for (int r = 0; r < nred; ++r) loops += "}\n";
    inner = loops;
    value = k.epilogue ? em.value(k.epilogue) : "acc";
    tile_store = "#pragma unroll\nfor (int t_ = 0; t_ < " + Ts + "; ++t_) {\nconst long long " +
                 last_var + " = c_ * " + Ts + " + t_;\nif (" + last_var + " < " + last_ext +
                 ") {\nconst " + Ty + " acc = acc_[t_];\n" + em.block(tile_level) + em.block(post) +
                 "out[fo_ + t_] = " + value + ";\n}\n}\n";
  } else if (G > 1) {
    // G lanes per output: lane l sums the flattened terms l, l + G, ... (consecutive lanes read
    // consecutive elements), then a shuffle combines the lanes; lanes of a group past the end
    // sum nothing.
    const std::string v = em.value(k.body);
    value = k.epilogue ? em.value(k.epilogue) : "acc";
    const std::string terms = em.param(numel(k.red));
    const char* T = ctype(k.body->dtype);
    std::string loops = std::string(T) + " acc = " + init + ";\n";
    loops += "for (long long r_ = live_ ? (long long)lane_ : " + terms + "; r_ < " + terms +
             "; r_ += " + std::to_string(G) + ") {\nlong long q_ = r_;\n";
    for (int r = nred - 1; r >= 0; --r) {
      const std::string i = "i" + std::to_string(rank + r);
      const auto& e = red_ext[static_cast<std::size_t>(r)];
      loops += r == 0 ? "const long long " + i + " = q_;\n"
                      : "const long long " + i + " = q_ % " + e + "; q_ /= " + e + ";\n";
    }
    loops += em.block(element + 1) + combine(k.rop, v) + "}\n";
    loops += "for (int o_ = " + std::to_string(G / 2) + "; o_ > 0; o_ >>= 1) {\nconst " + T +
             " w_ = __shfl_down_sync(0xffffffffu, acc, o_, " + std::to_string(G) + ");\n" +
             combine(k.rop, "w_") + "}\n";
    inner = loops + "if (live_ && lane_ == 0) {\n" + em.block(post);
  } else if (k.kind == Kernel::Kind::reduce && k.siblings.empty() &&
             factored_sum(k, em, element, rank, red_ext, inner, value)) {
    // A sum of products with factors independent of the inner loops: nested partial sums.
  } else if (k.kind == Kernel::Kind::reduce) {
    const std::string v = em.value(k.body);
    value = k.epilogue ? em.value(k.epilogue) : "acc";
    std::string loops = std::string(ctype(k.body->dtype)) + " acc = " + init + ";\n";
    // A multi-output reduction's further reductions: an accumulator each, over the same loops
    // (their terms emitted before the loops' code is taken).
    std::string more;
    for (std::size_t o = 0; o < k.siblings.size(); ++o) {
      const auto& sib = k.siblings[o];
      if (!sib.reduce) continue;
      const std::string acc = "acc" + std::to_string(o + 1);
      const std::string sv = em.value(sib.body);
      loops += std::string(ctype(sib.body->dtype)) + " " + acc + " = " +
               reduce_init(sib.rop, sib.body->dtype) + ";\n";
      more += combine(sib.rop, sv, acc);
      sibling_values[o] = acc;
    }
    for (int r = 0; r < nred; ++r) {
      loops += "for (long long i" + std::to_string(rank + r) + " = 0; i" +
               std::to_string(rank + r) + " < " + red_ext[static_cast<std::size_t>(r)] + "; ++i" +
               std::to_string(rank + r) + ") {\n" + em.block(element + 1 + r);
    }
    loops += combine(k.rop, v) + more;
    for (int r = 0; r < nred; ++r) loops += "}\n";
    inner = loops + em.block(post);
  } else {
    value = em.value(k.body);
  }
  // A multi-output kernel's further element values (shared loads and index arithmetic are named
  // once, in the first that needs them).
  for (std::size_t o = 0; o < k.siblings.size(); ++o) {
    if (!k.siblings[o].reduce) sibling_values[o] = em.value(k.siblings[o].body);
  }

  const std::string args = "sl_a" + std::to_string(index) + suffix;
  std::string t;  // the function (its argument struct goes before it once all parameters exist)
  const char* out_type = ctype(L.nodes[static_cast<std::size_t>(k.out)].dtype);
  std::string pro;
  const std::string a = cuda ? "a." : "a->";
  // A horizontal kernel's body is a function of one member's slots (bp_) and the parameters.
  const std::string slots = horizontal ? "bp_" : a + "b";
  if (!horizontal) pro += std::string("const long long* SL_RESTRICT P = ") + a + "p;\n";
  auto slot = [&](std::size_t j) { return "SL_B(" + slots + "[" + std::to_string(j) + "])"; };
  pro += std::string(out_type) + "* SL_RESTRICT out = (" + out_type + "*)" + slot(0) + ";\n";
  for (std::size_t j = 0; j < k.reads.size(); ++j) {
    const char* ty = ctype(L.nodes[static_cast<std::size_t>(k.reads[j])].dtype);
    pro += "const " + std::string(ty) + "* SL_RESTRICT b" + std::to_string(j + 1) + " = (const " +
           ty + "*)" + slot(j + 1) + ";\n";
  }
  for (std::size_t o = 0; o < k.siblings.size(); ++o) {
    const char* ty = ctype(L.nodes[static_cast<std::size_t>(k.siblings[o].out)].dtype);
    pro += std::string(ty) + "* SL_RESTRICT out" + std::to_string(o + 1) + " = (" + ty + "*)" +
           slot(k.reads.size() + o + 1) + ";\n";
  }
  if (debug) {
    pro += "long long* err = (long long*)" + slots + "[" + std::to_string(code.buffer_slots() - 1) +
           "];\n";
  }
  const std::string one = code.name + "_one";
  const std::string S = std::to_string(code.buffer_slots());
  const std::string W = std::to_string(code.members);
  std::string store = "out[f] = " + value + ";\n";
  for (std::size_t o = 0; o < sibling_values.size(); ++o)
    store += "out" + std::to_string(o + 1) + "[f] = " + sibling_values[o] + ";\n";
  if (cuda) {
    if (G > 1) {
      // Threads, a whole number of warps (every lane of a warp takes part in the shuffles).
      code.elements = (code.elements * G + 31) / 32 * 32;
    }
    // Index arithmetic of the loop in 32 bits when everything fits, the grid-stride step past the
    // end included (blocks x 256 threads: a few million at most on any device).
    std::int64_t biggest = std::max(code.elements, numel(k.shape));  // tiles: fewer threads
    for (int r : k.reads)
      biggest = std::max(biggest, numel(L.nodes[static_cast<std::size_t>(r)].shape));
    const char* I =
        biggest < (std::int64_t{1} << 31) - (std::int64_t{1} << 26) ? "int" : "long long";
    if (k.kind == Kernel::Kind::reduce) t += "// shape: " + code.shape + "\n";
    t += horizontal ? "static __device__ __forceinline__ void " + one +
                          "(void* const* bp_, const long long* SL_RESTRICT P, const unsigned bx_, "
                          "const unsigned gx_) {\n"
                    : "extern \"C\" __global__ void __launch_bounds__(256) " + code.name +
                          "(const " + args + " a) {\n";
    t += pro + "typedef " + I + " I;\nconst I n = (I)" + total + ";\n";
    if (shape.staged.empty()) {
      t += "const I nb = (I)gridDim.x;\n";
    } else {
      // Each block copies the staged operands once: enough outputs per block to repay the copy
      // (half an output per staged element: 512 blocks for the wide DAG's 2^20 outputs, about 4
      // per SM on an H100 for occupancy), at least 256 blocks, and blocks beyond that leave at
      // once.
      std::int64_t staged = 0;
      for (const auto& st : shape.staged) {
        staged += numel(
            L.nodes[static_cast<std::size_t>(k.reads[static_cast<std::size_t>(st.read)])].shape);
      }
      // With tiles a thread computes T outputs: threads per block in proportion (one tile per
      // thread at least, a whole block).
      const std::int64_t per_block =
          std::max<std::int64_t>(T > 1 ? 256 : 1024, std::max<std::int64_t>(1024, staged / 2) / T);
      const std::int64_t cap =
          std::max<std::int64_t>(256, (code.elements + per_block - 1) / per_block);
      code.max_blocks = cap;  // the launch stops there (the check below stays for any grid)
      t += "const I cap_ = (I)" + em.param(cap) +
           ";\nconst I nb = (I)gridDim.x < cap_ ? (I)gridDim.x : cap_;\n"
           "if ((I)blockIdx.x >= nb) return;\n";
      for (const auto& st : shape.staged) {
        const auto j = static_cast<std::size_t>(st.read);
        const auto& n = L.nodes[static_cast<std::size_t>(k.reads[j])];
        const std::string b = std::to_string(j + 1);
        t += "__shared__ " + std::string(ctype(n.dtype)) + " sh" + b + "[" +
             std::to_string(st.capacity) + "];\n";
        t += "for (long long x_ = threadIdx.x; x_ < " + em.param(numel(n.shape)) +
             "; x_ += blockDim.x) {\nlong long q_ = x_, o_ = 0;\n";
        for (std::size_t a = n.shape.size(); a-- > 0;) {
          const std::string stride = em.param(st.strides[a]);
          if (a == 0) {
            t += "o_ += q_ * " + stride + ";\n";
          } else {
            const std::string e = em.param(n.shape[a]);
            t += "o_ += (q_ % " + e + ") * " + stride + "; q_ /= " + e + ";\n";
          }
        }
        t += "sh" + b + "[o_] = b" + b + "[x_];\n}\n";
      }
      t += "__syncthreads();\n";
    }
    t += em.block(0);
    if (G > 1) {
      const std::string g = std::to_string(G);
      t += "const I nt = (I)" + em.param(code.elements) +
           ";\nconst int lane_ = (int)(threadIdx.x % " + g +
           "u);\nfor (I t_ = (I)blockIdx.x * (I)blockDim.x + (I)threadIdx.x; t_ < nt; t_ += nb * "
           "(I)blockDim.x) {\nconst bool live_ = t_ / " +
           g + " < n;\nconst I f = live_ ? t_ / " + g + " : n - 1;\n";
    } else {
      t += "for (I f = (I)blockIdx.x * (I)blockDim.x + (I)threadIdx.x; f < n; f += nb * "
           "(I)blockDim.x) {\n";
    }
    if (T > 1) {
      // Thread f computes tile c_ of the last axis: outputs fo_ .. fo_ + T - 1.
      const std::string ch = em.param(chunks);
      t += "I q = f;\nconst long long c_ = q % (I)" + ch + "; q /= (I)" + ch +
           ";\nconst I fo_ = q * (I)" + ext[static_cast<std::size_t>(rank - 1)] + " + (I)(c_ * " +
           std::to_string(T) + ");\n";
      for (int v = rank - 2; v >= 0; --v) {
        const auto& e = ext[static_cast<std::size_t>(v)];
        if (v == 0) {
          t += "const long long i0 = q;\n";
        } else {
          t +=
              "const long long i" + std::to_string(v) + " = q % (I)" + e + "; q /= (I)" + e + ";\n";
        }
      }
    } else if (rank > 0) {
      t += "I q = f;\n";
      for (int v = rank - 1; v >= 0; --v) {
        const auto& e = ext[static_cast<std::size_t>(v)];
        if (v == 0) {
          t += "const long long i0 = q;\n";
        } else {
          t +=
              "const long long i" + std::to_string(v) + " = q % (I)" + e + "; q /= (I)" + e + ";\n";
        }
      }
    }
    t += em.block(1) + inner + (T > 1 ? tile_store : store) + (G > 1 ? "}\n" : "") + "}\n}\n";
    if (horizontal) {
      // The member's body sees its own block index and count: the grid is split into groups of
      // per_ blocks, each group taking members in turn (a block's threads all take the same ones,
      // so the barrier before a member's staging is uniform).
      for (const auto& [from, to] :
           {std::pair<std::string, std::string>{"blockIdx.x", "bx_"}, {"gridDim.x", "gx_"}}) {
        for (auto at = t.find(from); at != std::string::npos; at = t.find(from, at + to.size())) {
          t.replace(at, from.size(), to);
        }
      }
      t += "extern \"C\" __global__ void __launch_bounds__(256) " + code.name + "(const " + args +
           " a) {\nconst unsigned m_ = " + W +
           "u;\nconst unsigned per_ = gridDim.x >= m_ ? gridDim.x / m_ : 1u;\n"
           "const unsigned groups_ = gridDim.x / per_;\n"
           "if (blockIdx.x >= groups_ * per_) return;\n"
           "for (unsigned k_ = blockIdx.x / per_; k_ < m_; k_ += groups_) {\n"
           "if (k_ >= groups_) __syncthreads();\n" +
           one + "(a.b + k_ * " + S + "u, a.p, blockIdx.x % per_, per_);\n}\n}\n";
    }
  } else {
    t += horizontal ? "static inline void " + one +
                          "(void* const* bp_, const long long* SL_RESTRICT P, long long lo, long "
                          "long hi) {\n"
                    : "extern \"C\" void " + code.name +
                          "(const void* args_, long long lo, long long hi) {\nconst " + args +
                          "* a = (const " + args + "*)args_;\n";
    t += pro + em.block(0) + "if (lo >= hi) return;\n";
    if (rank == 0) {
      t += "const long long f = 0;\n" + em.block(1) + em.block(2) + inner + store + "}\n";
    } else {
      const std::string last = "i" + std::to_string(rank - 1);
      t += "long long v[" + std::to_string(rank) + "];\n{ long long q = lo;\n";
      for (int v = rank - 1; v >= 0; --v) {
        const auto& e = ext[static_cast<std::size_t>(v)];
        if (v == 0) {
          t += "v[0] = q; }\n";
        } else {
          t += "v[" + std::to_string(v) + "] = q % " + e + "; q /= " + e + ";\n";
        }
      }
      t += "for (long long g = lo; g < hi;) {\n";
      for (int v = 0; v + 1 < rank; ++v) {
        t += "const long long i" + std::to_string(v) + " = v[" + std::to_string(v) + "];\n";
      }
      t += em.block(1);
      t += "const long long m = (hi - g) < (" + ext[static_cast<std::size_t>(rank - 1)] + " - v[" +
           std::to_string(rank - 1) + "]) ? (hi - g) : (" +
           ext[static_cast<std::size_t>(rank - 1)] + " - v[" + std::to_string(rank - 1) + "]);\n";
      t += "for (long long e = 0; e < m; ++e) {\nconst long long " + last + " = v[" +
           std::to_string(rank - 1) + "] + e;\nconst long long f = g + e;\n" + em.block(2) + inner +
           store + "}\n";
      t += "g += m;\nv[" + std::to_string(rank - 1) + "] = 0;\n";
      // Carry into the outer axes: the innermost of them is tested first.
      std::string nested;
      for (int v = 0; v <= rank - 2; ++v) {
        nested = v == 0
                     ? "if (++v[0] == " + ext[0] + ") { v[0] = 0; }\n"
                     : "if (++v[" + std::to_string(v) + "] == " + ext[static_cast<std::size_t>(v)] +
                           ") {\nv[" + std::to_string(v) + "] = 0;\n" + nested + "}\n";
      }
      t += nested + "}\n}\n";
    }
    if (horizontal) {
      // Elements [lo, hi) of all members, member m's being [m * n_, (m + 1) * n_).
      t += "extern \"C\" void " + code.name +
           "(const void* args_, long long lo, long long hi) {\n" + "const " + args +
           "* a = (const " + args + "*)args_;\n" +
           "const long long* SL_RESTRICT P = a->p;\nconst long long n_ = " + total + ";\n" +
           "for (long long m_ = lo / n_; m_ < " + W + " && m_ * n_ < hi; ++m_) {\n" +
           "const long long l_ = lo > m_ * n_ ? lo - m_ * n_ : 0;\n" +
           "const long long h_ = hi < (m_ + 1) * n_ ? hi - m_ * n_ : n_;\n" + one +
           "(a->b + m_ * " + S + ", P, l_, h_);\n}\n}\n";
    }
  }
  code.elements *= code.members;
  code.max_blocks *= code.members;
  code.text = "struct " + args + " { void* b[" +
              std::to_string(static_cast<std::size_t>(code.members) * code.buffer_slots()) +
              "]; long long p[" + std::to_string(std::max<std::size_t>(code.params.size(), 1)) +
              "]; };\n" + t;
  return code;
}

void read_slots_through_table(KernelCode& code) {
  if (code.indirect) return;
  static constexpr std::string_view from = "SL_B(", to = "SL_BT(";
  for (auto at = code.text.find(from); at != std::string::npos;
       at = code.text.find(from, at + to.size())) {
    code.text.replace(at, from.size(), to);
  }
  code.indirect = true;
}

KernelCode emit_table(int index, std::int64_t count, LazyDialect d) {
  KernelCode code;
  code.name = "sl_k" + std::to_string(index);
  code.elements = count;
  code.buffers.assign(static_cast<std::size_t>(count), -1);
  const std::string args = "sl_a" + std::to_string(index);
  const std::string n = std::to_string(count);
  std::string t =
      "struct " + args + " { void* b[" + std::to_string(count + 1) + "]; long long p[1]; };\n";
  if (d == LazyDialect::cuda) {
    t += "extern \"C\" __global__ void __launch_bounds__(256) " + code.name + "(const " + args +
         " a) {\nvoid** out = (void**)a.b[0];\n"
         "for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < " +
         n + "; i += gridDim.x * blockDim.x) out[i] = a.b[1 + i];\n}\n";
  } else {
    t += "extern \"C\" void " + code.name + "(const void* args_, long long lo, long long hi) {\n" +
         "const " + args + "* a = (const " + args + "*)args_;\nvoid** out = (void**)a->b[0];\n" +
         "for (long long i = lo; i < hi; ++i) out[i] = a->b[1 + i];\n}\n";
  }
  code.text = std::move(t);
  return code;
}

}  // namespace sluice::lazy::detail
