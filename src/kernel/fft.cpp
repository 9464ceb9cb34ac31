// The canned FFT (sluice/fft.hpp): checks, tracking, and the built-in Fft extensions.

#include "sluice/fft.hpp"

#include <string>

#include "kernel/canned_common.hpp"
#include "kernel/host/canned.hpp"
#include "sluice/extension.hpp"

namespace sluice {

void Fft::register_builtins() {
  register_extension<Fft>("host", {std::shared_ptr<void>(), &detail::host::canned_fft()});
}

namespace fft {
namespace {

using detail::canned::Operand;

// One slot per process for the Fft extension's per-context state (its plan cache).
std::size_t state_slot() {
  static const std::size_t slot = detail::next_extension_slot();
  return slot;
}

struct Sizes {
  std::size_t real = 0;     // values on the real (or complex, for c2c) side
  std::size_t complex = 0;  // values on the complex side of r2c / c2r
};

Sizes sizes_of(std::string_view what, const Shape& shape, std::size_t batch,
               std::source_location loc) {
  if (shape.rank != 1 && shape.rank != 2) {
    throw Error(Errc::invalid_argument,
                std::string(what) + ": only 1D and 2D transforms are supported", loc);
  }
  for (int d = 0; d < shape.rank; ++d) {
    if (shape.dims[d] == 0) {
      throw Error(Errc::invalid_argument,
                  std::string(what) + ": a transform of size 0; every dimension must be >= 1", loc);
    }
    detail::canned::checked_int(what, d == 0 ? "dims[0]" : "dims[1]", shape.dims[d], loc);
  }
  detail::canned::checked_int(what, "batch", batch, loc);
  const std::size_t last = shape.dims[shape.rank - 1];
  const std::size_t outer = shape.rank == 2 ? shape.dims[0] : 1;
  Sizes s;
  s.real = detail::canned::checked_mul(what, detail::canned::checked_mul(what, outer, last, loc),
                                       batch, loc);
  s.complex = detail::canned::checked_mul(
      what, detail::canned::checked_mul(what, outer, last / 2 + 1, loc), batch, loc);
  return s;
}

void check_exact(std::string_view what, const Operand& o, std::size_t needed,
                 std::source_location loc) {
  if (o.elements == needed) return;
  throw Error(Errc::invalid_argument,
              std::string(what) + ": buffer " + std::string(o.name) + " has " +
                  std::to_string(o.elements) + " elements but the shape and batch need exactly " +
                  std::to_string(needed) + "; pass a buffer of that size",
              loc);
}

template <class T>
void run(std::string_view what, const Context& ctx, FftKind kind, const Operand& in,
         const Operand& out, const void* in_data, void* out_data, const Shape& shape,
         std::size_t batch, std::source_location loc) {
  FftArgs args;
  args.precision = detail::canned::precision_of<T>();
  args.kind = kind;
  args.rank = shape.rank;
  args.dims[0] = static_cast<std::int64_t>(shape.dims[0]);
  args.dims[1] = static_cast<std::int64_t>(shape.rank == 2 ? shape.dims[1] : 1);
  args.batch = static_cast<std::int64_t>(batch);
  args.in = in_data;
  args.out = out_data;
  auto& impl = extension<Fft>(ctx, loc);
  auto* plans = ctx.impl().extension_state_slot(state_slot());
  if (plans == nullptr) {
    throw Error(Errc::invalid_state, std::string(what) + ": no per-context slot left for plans",
                loc);
  }
  detail::canned::issue(ctx, {in, out}, what, loc,
                        [&](Stream& s, const OpInfo& op) { impl.execute(s, *plans, args, op); });
}

}  // namespace

template <CannedReal T>
void c2c(const Context& ctx, const DeviceBuffer<std::complex<T>>& in,
         DeviceBuffer<std::complex<T>>& out, Shape shape, Direction direction, std::size_t batch,
         std::source_location loc) {
  constexpr std::string_view what = "fft::c2c";
  const auto I = detail::canned::operand("in", in, Access::read);
  const auto O = detail::canned::operand("out", out, Access::write);
  detail::canned::check_devices(ctx, what, {I, O}, loc);
  const auto sizes = sizes_of(what, shape, batch, loc);
  if (batch == 0) return;
  check_exact(what, I, sizes.real, loc);
  check_exact(what, O, sizes.real, loc);
  run<T>(what, ctx, direction == Direction::forward ? FftKind::c2c_forward : FftKind::c2c_inverse,
         I, O, in.data(), out.data(), shape, batch, loc);
}

template <CannedReal T>
void r2c(const Context& ctx, const DeviceBuffer<T>& in, DeviceBuffer<std::complex<T>>& out,
         Shape shape, std::size_t batch, std::source_location loc) {
  constexpr std::string_view what = "fft::r2c";
  const auto I = detail::canned::operand("in", in, Access::read);
  const auto O = detail::canned::operand("out", out, Access::write);
  detail::canned::check_devices(ctx, what, {I, O}, loc);
  const auto sizes = sizes_of(what, shape, batch, loc);
  if (batch == 0) return;
  check_exact(what, I, sizes.real, loc);
  check_exact(what, O, sizes.complex, loc);
  run<T>(what, ctx, FftKind::r2c, I, O, in.data(), out.data(), shape, batch, loc);
}

template <CannedReal T>
void c2r(const Context& ctx, DeviceBuffer<std::complex<T>>& in, DeviceBuffer<T>& out, Shape shape,
         std::size_t batch, std::source_location loc) {
  constexpr std::string_view what = "fft::c2r";
  const auto I = detail::canned::operand("in", in, Access::read_write);
  const auto O = detail::canned::operand("out", out, Access::write);
  detail::canned::check_devices(ctx, what, {I, O}, loc);
  const auto sizes = sizes_of(what, shape, batch, loc);
  if (batch == 0) return;
  check_exact(what, I, sizes.complex, loc);
  check_exact(what, O, sizes.real, loc);
  run<T>(what, ctx, FftKind::c2r, I, O, in.data(), out.data(), shape, batch, loc);
}

#define SLUICE_FFT_INSTANTIATE(T)                                                               \
  template void c2c<T>(const Context&, const DeviceBuffer<std::complex<T>>&,                    \
                       DeviceBuffer<std::complex<T>>&, Shape, Direction, std::size_t,           \
                       std::source_location);                                                   \
  template void r2c<T>(const Context&, const DeviceBuffer<T>&, DeviceBuffer<std::complex<T>>&,  \
                       Shape, std::size_t, std::source_location);                               \
  template void c2r<T>(const Context&, DeviceBuffer<std::complex<T>>&, DeviceBuffer<T>&, Shape, \
                       std::size_t, std::source_location);
SLUICE_FFT_INSTANTIATE(float)
SLUICE_FFT_INSTANTIATE(double)
#undef SLUICE_FFT_INSTANTIATE

}  // namespace fft
}  // namespace sluice
