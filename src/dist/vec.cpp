// dist::Vec and its operations (sluice/dist.hpp): la's operations on each rank's block, and
// reductions finished by an allreduce of the device values.

#include <cstring>
#include <string>

#include "core/context_impl.hpp"
#include "dist/comm_state.hpp"
#include "dist/mat_impl.hpp"
#include "sluice/error.hpp"

using namespace sluice::detail;  // la's kernel argument types (sluice/ext/la_kernels.hpp)

namespace sluice::dist {
namespace {

using detail::CommState;

const CommState& state_of(const Vec& v, std::string_view what, std::source_location loc) {
  if (!v.valid()) {
    throw Error(Errc::invalid_state,
                std::string(what) +
                    ": a default-constructed or moved-from dist::Vec has no storage; create it "
                    "with dist::Vec(comm, n) or A.create_vec()",
                loc);
  }
  return *v.comm().state();
}

/// Throws unless `a` and `b` share the communicator and the rows.
void check_pair(const Vec& a, const Vec& b, std::string_view what, std::source_location loc) {
  (void)state_of(a, what, loc);
  (void)state_of(b, what, loc);
  if (!(a.comm() == b.comm())) {
    throw Error(Errc::invalid_argument,
                std::string(what) + ": the vectors belong to different communicators", loc);
  }
  if (!a.layout().same_rows(b.layout())) {
    throw Error(Errc::invalid_argument,
                std::string(what) + ": the vectors split their rows differently (" +
                    std::to_string(a.size()) + " and " + std::to_string(b.size()) +
                    " rows); make one with the other's layout (duplicate, or A.create_vec())",
                loc);
  }
}

/// Reduces local rank l's value across ranks after `local_part(l, value, ctx)` produced it.
template <class Local>
void reduce_values(const Vec& x, std::span<Managed<double>> out, DistOp op, Local&& local_part,
                   std::string_view what, std::source_location loc) {
  const CommState& st = state_of(x, what, loc);
  if (out.size() != static_cast<std::size_t>(x.local_count())) {
    throw Error(Errc::invalid_argument,
                std::string(what) + ": give one Managed value per local rank (" +
                    std::to_string(x.local_count()) + "), got " + std::to_string(out.size()),
                loc);
  }
  st.each([&](int l) {
    const Context& ctx = x.local(l).context();
    local_part(l, out[static_cast<std::size_t>(l)], ctx);
    st.allreduce_value(l, out[static_cast<std::size_t>(l)], op, ctx, loc);
  });
}

template <class Local>
double reduce_value(const Vec& x, DistOp op, Local&& local_part, std::string_view what,
                    std::source_location loc) {
  std::vector<Managed<double>> out(static_cast<std::size_t>(x.local_count()));
  reduce_values(x, out, op, std::forward<Local>(local_part), what, loc);
  return out.front().value(loc);
}

}  // namespace

// ---- Vec ----------------------------------------------------------------------------------------

Vec::Vec(const Comm& comm, std::int64_t global, std::source_location loc)
    : Vec(comm, Layout::split(comm.size(), global), loc) {}

Vec::Vec(const Comm& comm, Layout layout, std::source_location loc)
    : comm_(std::make_shared<Comm>(comm)), layout_(std::move(layout)) {
  const CommState& st = *comm.state();
  if (layout_.ranks() != st.size()) {
    throw Error(Errc::invalid_argument,
                "dist::Vec: the layout is for " + std::to_string(layout_.ranks()) +
                    " ranks, the communicator has " + std::to_string(st.size()),
                loc);
  }
  // Every process must mean the same vector.
  const std::int64_t mine[2] = {layout_.size(), static_cast<std::int64_t>(layout_.halo())};
  std::vector<std::int64_t> all(2 * static_cast<std::size_t>(st.procs->size()));
  st.procs->allgather(mine, sizeof mine, all.data());
  for (int p = 0; p < st.procs->size(); ++p) {
    const auto size = all[2 * static_cast<std::size_t>(p)];
    if (size != all[0]) {
      throw Error(Errc::invalid_argument,
                  "dist::Vec: process " + std::to_string(p) + " asked for " + std::to_string(size) +
                      " rows and process 0 for " + std::to_string(all[0]) +
                      "; every process must make the same vector",
                  loc);
    }
  }
  for (int l = 0; l < st.locals(); ++l) {
    const int r = st.ranks[static_cast<std::size_t>(l)];
    locals_.emplace_back(st.contexts[static_cast<std::size_t>(l)],
                         static_cast<std::size_t>(layout_.local_size(r)), layout_.halo(),
                         layout_.halo(), loc);
  }
}

const Comm& Vec::comm() const {
  if (!comm_) {
    throw Error(Errc::invalid_state,
                "a default-constructed or moved-from dist::Vec has no communicator");
  }
  return *comm_;
}

Vec Vec::duplicate(std::source_location loc) const {
  (void)state_of(*this, "dist::Vec::duplicate", loc);
  Vec v;
  v.comm_ = comm_;
  v.layout_ = layout_;
  for (const auto& l : locals_) v.locals_.push_back(l.duplicate(loc));
  return v;
}

void Vec::assign(std::span<const double> global_values, std::source_location loc) {
  const CommState& st = state_of(*this, "dist::Vec::assign", loc);
  if (global_values.size() != static_cast<std::size_t>(size())) {
    throw Error(Errc::invalid_argument,
                "dist::Vec::assign: give the whole vector (" + std::to_string(size()) +
                    " values) on every process, got " + std::to_string(global_values.size()),
                loc);
  }
  for (int l = 0; l < local_count(); ++l) {
    const int r = st.ranks[static_cast<std::size_t>(l)];
    locals_[static_cast<std::size_t>(l)].assign(
        global_values.subspan(static_cast<std::size_t>(layout_.start(r)),
                              static_cast<std::size_t>(layout_.local_size(r))),
        loc);
  }
}

std::vector<double> Vec::to_vector(std::source_location loc) const {
  const CommState& st = state_of(*this, "dist::Vec::to_vector", loc);
  // This process's ranks are consecutive: their blocks, then every process's in order.
  std::vector<double> mine;
  for (const auto& l : locals_) {
    const auto v = l.to_vector(loc);
    mine.insert(mine.end(), v.begin(), v.end());
  }
  const auto bytes = st.procs->allgatherv(std::span<const std::byte>(
      reinterpret_cast<const std::byte*>(mine.data()), mine.size() * sizeof(double)));
  std::vector<double> all(bytes.size() / sizeof(double));
  std::memcpy(all.data(), bytes.data(), bytes.size());
  return all;
}

// ---- element-wise -------------------------------------------------------------------------------

void set(Vec& x, double alpha, std::source_location loc) {
  (void)state_of(x, "dist::set", loc);
  for (int l = 0; l < x.local_count(); ++l) la::set(x.local(l), alpha, loc);
}
void copy(const Vec& x, Vec& y, std::source_location loc) {
  check_pair(x, y, "dist::copy", loc);
  for (int l = 0; l < x.local_count(); ++l) la::copy(x.local(l), y.local(l), loc);
}
void scale(Vec& x, double alpha, std::source_location loc) {
  (void)state_of(x, "dist::scale", loc);
  for (int l = 0; l < x.local_count(); ++l) la::scale(x.local(l), alpha, loc);
}
void axpy(Vec& y, double alpha, const Vec& x, std::source_location loc) {
  check_pair(x, y, "dist::axpy", loc);
  for (int l = 0; l < x.local_count(); ++l) la::axpy(y.local(l), alpha, x.local(l), loc);
}
void aypx(Vec& y, double beta, const Vec& x, std::source_location loc) {
  check_pair(x, y, "dist::aypx", loc);
  for (int l = 0; l < x.local_count(); ++l) la::aypx(y.local(l), beta, x.local(l), loc);
}
void axpby(Vec& y, double alpha, double beta, const Vec& x, std::source_location loc) {
  check_pair(x, y, "dist::axpby", loc);
  for (int l = 0; l < x.local_count(); ++l) la::axpby(y.local(l), alpha, beta, x.local(l), loc);
}
void waxpy(Vec& w, double alpha, const Vec& x, const Vec& y, std::source_location loc) {
  check_pair(x, y, "dist::waxpy", loc);
  check_pair(x, w, "dist::waxpy", loc);
  for (int l = 0; l < x.local_count(); ++l)
    la::waxpy(w.local(l), alpha, x.local(l), y.local(l), loc);
}
void pointwise_mult(Vec& w, const Vec& x, const Vec& y, std::source_location loc) {
  check_pair(x, y, "dist::pointwise_mult", loc);
  check_pair(x, w, "dist::pointwise_mult", loc);
  for (int l = 0; l < x.local_count(); ++l) {
    la::pointwise_mult(w.local(l), x.local(l), y.local(l), loc);
  }
}
void pointwise_divide(Vec& w, const Vec& x, const Vec& y, std::source_location loc) {
  check_pair(x, y, "dist::pointwise_divide", loc);
  check_pair(x, w, "dist::pointwise_divide", loc);
  for (int l = 0; l < x.local_count(); ++l) {
    la::pointwise_divide(w.local(l), x.local(l), y.local(l), loc);
  }
}

namespace {
void check_values(const Vec& x, std::span<const Managed<double>> v, std::string_view what,
                  std::source_location loc) {
  if (v.size() != static_cast<std::size_t>(x.local_count())) {
    throw Error(Errc::invalid_argument,
                std::string(what) + ": give one Managed value per local rank (" +
                    std::to_string(x.local_count()) + "), got " + std::to_string(v.size()),
                loc);
  }
}
}  // namespace

void axpy(Vec& y, std::span<const Managed<double>> alpha, const Vec& x, std::source_location loc) {
  check_pair(x, y, "dist::axpy", loc);
  check_values(x, alpha, "dist::axpy", loc);
  for (int l = 0; l < x.local_count(); ++l) {
    la::axpy(y.local(l), alpha[static_cast<std::size_t>(l)], x.local(l), y.local(l).context(), loc);
  }
}
void scale(Vec& x, std::span<const Managed<double>> alpha, std::source_location loc) {
  (void)state_of(x, "dist::scale", loc);
  check_values(x, alpha, "dist::scale", loc);
  for (int l = 0; l < x.local_count(); ++l) {
    la::scale(x.local(l), alpha[static_cast<std::size_t>(l)], x.local(l).context(), loc);
  }
}

// ---- reductions ---------------------------------------------------------------------------------

void dot(const Vec& x, const Vec& y, std::span<Managed<double>> out, std::source_location loc) {
  check_pair(x, y, "dist::dot", loc);
  reduce_values(
      x, out, DistOp::sum,
      [&](int l, Managed<double>& v, const Context& ctx) {
        la::dot(x.local(l), y.local(l), v, ctx, loc);
      },
      "dist::dot", loc);
}

void norm(const Vec& x, la::NormType type, std::span<Managed<double>> out,
          std::source_location loc) {
  if (type == la::NormType::two) {
    reduce_values(
        x, out, DistOp::sum,
        [&](int l, Managed<double>& v, const Context& ctx) {
          la::dot(x.local(l), x.local(l), v, ctx, loc);
        },
        "dist::norm", loc);
    for (int l = 0; l < x.local_count(); ++l) {
      auto& v = out[static_cast<std::size_t>(l)];
      v = eval(sqrt(v), x.local(l).context(), {}, loc);
    }
    return;
  }
  reduce_values(
      x, out, type == la::NormType::one ? DistOp::sum : DistOp::max,
      [&](int l, Managed<double>& v, const Context& ctx) {
        la::norm(x.local(l), type, v, ctx, loc);
      },
      "dist::norm", loc);
}

void sum(const Vec& x, std::span<Managed<double>> out, std::source_location loc) {
  reduce_values(
      x, out, DistOp::sum,
      [&](int l, Managed<double>& v, const Context& ctx) { la::sum(x.local(l), v, ctx, loc); },
      "dist::sum", loc);
}

double dot(const Vec& x, const Vec& y, std::source_location loc) {
  std::vector<Managed<double>> out(static_cast<std::size_t>(x.local_count()));
  dot(x, y, out, loc);
  return out.front().value(loc);
}

double norm(const Vec& x, la::NormType type, std::source_location loc) {
  std::vector<Managed<double>> out(static_cast<std::size_t>(x.local_count()));
  norm(x, type, out, loc);
  return out.front().value(loc);
}

double sum(const Vec& x, std::source_location loc) {
  return reduce_value(
      x, DistOp::sum,
      [&](int l, Managed<double>& v, const Context& ctx) { la::sum(x.local(l), v, ctx, loc); },
      "dist::sum", loc);
}

double max(const Vec& x, std::source_location loc) {
  return reduce_value(
      x, DistOp::max,
      [&](int l, Managed<double>& v, const Context& ctx) { la::max(x.local(l), v, ctx, loc); },
      "dist::max", loc);
}

double min(const Vec& x, std::source_location loc) {
  return reduce_value(
      x, DistOp::min,
      [&](int l, Managed<double>& v, const Context& ctx) { la::min(x.local(l), v, ctx, loc); },
      "dist::min", loc);
}

// ---- the product --------------------------------------------------------------------------------

void mult(const Mat& A, const Vec& x, Vec& y, std::source_location loc) {
  if (!A.valid()) throw Error(Errc::invalid_state, "dist::mult: the Mat is empty", loc);
  check_pair(x, y, "dist::mult", loc);
  if (!(A.comm() == x.comm()) || !A.layout().same_rows(x.layout())) {
    throw Error(Errc::invalid_argument,
                "dist::mult: the vectors do not split their rows as the matrix does; make them "
                "with A.create_vec()",
                loc);
  }
  const auto& impl = *A.impl();
  const CommState& st = impl.state();
  st.each([&](int l) {
    const la::Vec& xl = x.local(l);
    la::Vec& yl = y.local(l);
    const Context& ctx = yl.context();
    LaMatvecArgs m;
    m.x = xl.data();
    m.epilogue = LaEpilogue::store;
    // Issued as the host goes: overlap the exchange.
    m.spare_sms = st.engine->exchange_sms(ctx.impl().capturing());
    sluice::detail::AccessList acc;
    m.y = acc.write(yl.buffer(), yl.elements()) + yl.offset();
    detail::product(impl, l, ctx, m, {&xl, nullptr, nullptr}, acc, nullptr, "dist::mult", loc);
  });
}

}  // namespace sluice::dist
