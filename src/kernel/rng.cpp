// The canned RNG (sluice/rng.hpp): checks, tracking, and the built-in Rng extensions.

#include "sluice/rng.hpp"

#include <string>

#include "sluice/error.hpp"

#include "kernel/canned_common.hpp"
#include "kernel/host/canned.hpp"
#include "kernel/philox_math.hpp"
#include "sluice/extension.hpp"

namespace sluice {

void Rng::register_builtins() {
  register_extension<Rng>("host", {std::shared_ptr<void>(), &detail::host::canned_rng()});
}

namespace rng {

std::array<std::uint32_t, 4> philox4x32_10(std::array<std::uint32_t, 4> counter,
                                           std::array<std::uint32_t, 2> key) noexcept {
  const auto w =
      detail::philox_math::philox(counter[0], counter[1], counter[2], counter[3], key[0], key[1]);
  return {w.v[0], w.v[1], w.v[2], w.v[3]};
}

Philox Philox::from_seed_bytes(std::span<const std::uint8_t> seed, std::source_location loc) {
  if (seed.size() < 16) {
    throw Error(Errc::invalid_argument,
                "Philox::from_seed_bytes: " + std::to_string(seed.size()) +
                    " bytes; a Philox seed takes 16 (an 8-byte key and an 8-byte subsequence)",
                loc);
  }
  auto word = [&](std::size_t at) {
    std::uint64_t v = 0;
    for (std::size_t i = 0; i < 8; ++i) v |= std::uint64_t{seed[at + i]} << (8 * i);
    return v;
  };
  return Philox(word(0), word(8), 0);
}

namespace {

template <class T>
void fill(std::string_view what, const Context& ctx, DeviceBuffer<T>& out, Philox& gen,
          RngDistribution distribution, T mean, T stddev, std::source_location loc) {
  const auto o = detail::canned::operand("out", out, Access::write);
  detail::canned::check_devices(ctx, what, {o}, loc);
  if (out.empty()) return;
  constexpr std::size_t per_block = detail::philox_math::kValuesPerBlock<T>;
  const std::uint64_t blocks = (out.size() + per_block - 1) / per_block;
  RngFillArgs args{detail::canned::precision_of<T>(),
                   distribution,
                   out.data(),
                   static_cast<std::int64_t>(out.size()),
                   gen.seed(),
                   gen.counter(),
                   static_cast<double>(mean),
                   static_cast<double>(stddev),
                   gen.subsequence()};
  auto& impl = extension<Rng>(ctx, loc);
  detail::canned::issue(ctx, {o}, what, loc,
                        [&](Stream& s, const OpInfo& op) { impl.fill(s, args, op); });
  gen.skip(blocks);  // only once issued: a throw above leaves the generator where it was
}

}  // namespace

template <CannedReal T>
void uniform(const Context& ctx, DeviceBuffer<T>& out, Philox& gen, std::source_location loc) {
  fill<T>("rng::uniform", ctx, out, gen, RngDistribution::uniform, T(0), T(1), loc);
}

template <CannedReal T>
void normal(const Context& ctx, DeviceBuffer<T>& out, Philox& gen, T mean, T stddev,
            std::source_location loc) {
  fill<T>("rng::normal", ctx, out, gen, RngDistribution::normal, mean, stddev, loc);
}

template void uniform<float>(const Context&, DeviceBuffer<float>&, Philox&, std::source_location);
template void uniform<double>(const Context&, DeviceBuffer<double>&, Philox&, std::source_location);
template void normal<float>(const Context&, DeviceBuffer<float>&, Philox&, float, float,
                            std::source_location);
template void normal<double>(const Context&, DeviceBuffer<double>&, Philox&, double, double,
                             std::source_location);

}  // namespace rng
}  // namespace sluice
