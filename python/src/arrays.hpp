#pragma once
// `sluice.Array`: a typed, shaped view of tracked memory — a sluice buffer, or memory imported
// from another library without a copy — and the access marks Python code passes to kernels and
// host tasks (`sluice.read(a)`, `write(a)`, `read_write(a)`).

#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "common.hpp"
#include "sluice/deps.hpp"

namespace sluice::python {

/// Where an array's memory lies, as far as who may touch it goes.
enum class Memory : std::uint8_t {
  device,  ///< device memory (on the host backend: host memory, see host_accessible)
  pinned,  ///< page-locked host memory
  host,    ///< ordinary (pageable) host memory of another library
};

struct Array {
  Array() = default;
  Array(const Array&) = default;
  Array& operator=(const Array&) = default;
  virtual ~Array() = default;

  void* data = nullptr;
  std::size_t nbytes = 0;
  ObjectId id = 0;         ///< the tracker's id of the region holding the memory (0: untracked)
  std::size_t offset = 0;  ///< byte offset of `data` in that region
  Device device;           ///< the device whose backend allocated or holds the memory
  Memory memory = Memory::device;
  DType dtype = kFloat64;
  std::vector<std::int64_t> shape;
  bool readonly = false;
  std::shared_ptr<void> keep;   ///< owns the memory (a buffer, an import)
  std::optional<Context> home;  ///< the context it was allocated on, if sluice allocated it

  [[nodiscard]] std::size_t size() const noexcept;  ///< elements
  [[nodiscard]] ByteRange range() const noexcept { return {offset, nbytes}; }
  /// The host may read and write it directly (pinned and host memory, and device memory of the
  /// host backend).
  [[nodiscard]] bool host_accessible() const noexcept {
    return memory != Memory::device || device.backend == "host";
  }
  /// Throws Error(invalid_state) for an array whose memory was released.
  void check_live(std::source_location loc) const;
};

/// An access mark of an array: what `sluice.read(a)` and friends return.
struct Marked {
  std::shared_ptr<Array> array;
  Access mode = Access::read;
};

/// Any Python object as an Array: a sluice array as is, else an import (DLPack, CUDA array
/// interface, buffer protocol) ordered for work on `ctx`'s device.
[[nodiscard]] std::shared_ptr<Array> as_array(const py::handle& obj,
                                              const std::optional<Context>& ctx,
                                              std::source_location loc);

/// A NumPy view of host-accessible memory (after a host wait for the pending work on it).
[[nodiscard]] py::object numpy_view(const std::shared_ptr<Array>& a, Access mode,
                                    std::source_location loc);
/// A NumPy array over the bytes, with no wait: for host tasks that already run in order.
[[nodiscard]] py::object numpy_over(const std::shared_ptr<Array>& a);

/// Runs `fn(*args)` as a host task of `ctx` whose accesses to the arrays are tracked: arguments
/// made with sluice.read / write / read_write arrive as NumPy arrays over the memory; the task
/// starts after the work it conflicts with, and later work waits for it.
void tracked_host_task(const Context& ctx, const py::function& fn, const py::tuple& args,
                       const std::string& what, std::source_location loc);

/// Installs sluice.Array's buffer protocol (host wait for the pending work, then the memory) on a
/// class made with py::buffer_protocol().
void enable_buffer(const py::handle& cls);

/// A Python object of an Array made here (keeps `a` alive).
[[nodiscard]] py::object wrap_array(std::shared_ptr<Array> a);

}  // namespace sluice::python
