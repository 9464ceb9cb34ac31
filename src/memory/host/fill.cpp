// The host backend's typed fill (sluice/ext/fill.hpp): one host task setting the region's rows on
// the CPU pool, a row's first element copied from the pattern and the rest doubled from it.

#include <algorithm>
#include <cstddef>
#include <cstring>

#include "backends/host/host_parallel.hpp"
#include "memory/fill_impl.hpp"

namespace sluice::detail::host {
namespace {

// Bytes per chunk of the pool: enough to pay for handing the chunk out.
constexpr std::size_t kChunkBytes = std::size_t{1} << 18;

/// `count` elements of `elem` bytes at `dst` set to `pattern`.
void fill_row(unsigned char* dst, const unsigned char* pattern, std::size_t elem,
              std::size_t count) {
  if (count == 0) return;
  std::memcpy(dst, pattern, elem);
  // Doubling copies: each memcpy is long and contiguous, whatever the element size.
  std::size_t done = 1;
  while (done < count) {
    const std::size_t n = std::min(done, count - done);
    std::memcpy(dst + done * elem, dst, n * elem);
    done += n;
  }
}

void run(const FillArgs& a) {
  const std::size_t rows = a.count[1] * a.count[2];
  const std::size_t row_bytes = a.count[0] * a.elem;
  if (rows == 0 || row_bytes == 0) return;
  auto* base = static_cast<unsigned char*>(a.dst);
  // Long rows are split into chunks of whole elements; short rows are grouped.
  const std::size_t per_row = std::max<std::size_t>(1, row_bytes / kChunkBytes);
  const std::size_t row_elems = (a.count[0] + per_row - 1) / per_row;
  const std::size_t rows_per_chunk =
      per_row > 1 ? 1 : std::max<std::size_t>(1, kChunkBytes / std::max<std::size_t>(row_bytes, 1));
  const std::size_t chunks =
      per_row > 1 ? rows * per_row : (rows + rows_per_chunk - 1) / rows_per_chunk;
  auto body = [&](std::size_t c) {
    if (per_row > 1) {
      const std::size_t r = c / per_row, part = c % per_row;
      const std::size_t first = part * row_elems;
      const std::size_t n = std::min(row_elems, a.count[0] - std::min(first, a.count[0]));
      unsigned char* row = base + (r / a.count[1]) * a.pitch[2] + (r % a.count[1]) * a.pitch[1];
      fill_row(row + first * a.elem, a.pattern, a.elem, n);
      return;
    }
    const std::size_t lo = c * rows_per_chunk, hi = std::min(rows, lo + rows_per_chunk);
    for (std::size_t r = lo; r < hi; ++r) {
      unsigned char* row = base + (r / a.count[1]) * a.pitch[2] + (r % a.count[1]) * a.pitch[1];
      fill_row(row, a.pattern, a.elem, a.count[0]);
    }
  };
  parallel_chunks(chunks, body);
}

class HostFill final : public Fill {
 public:
  void fill(Stream& stream, const FillArgs& args, const OpInfo& op) override {
    stream.host_task([a = args] { run(a); }, op);
  }
};

}  // namespace

Fill& memory_fill() {
  static HostFill f;
  return f;
}

}  // namespace sluice::detail::host
