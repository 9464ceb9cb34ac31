#pragma once
// Where another library's pending work on an imported array is: the producer's current stream,
// found without the DLPack handshake, so that sluice orders itself after that stream in C++ (an
// event recorded there, waited for by the importing context) and asks the producer for no
// synchronization (`__dlpack__(stream=-1)`, the protocol's opt-out). The handshake makes the
// producer do the same in its own Python code (PyTorch builds an Event and an ExternalStream per
// call), which costs several times sluice's whole import.
//
// Which library an object belongs to is decided once per Python type, by the top-level module of
// the type or of one of its bases: PyTorch ("torch": torch._C._cuda_getCurrentRawStream), CuPy
// ("cupy": cupy.cuda.get_current_stream().ptr), or a module registered with
// `sluice._sluice._stream_source(module, fn)` (fn(obj, (device_type, device_id)) returns the
// stream: a cudaStream_t as an int, a sluice Context, or None for the handshake). Every other
// type takes the handshake, as before.

#include <Python.h>

#include <cstdint>
#include <optional>

#include "common.hpp"
#include "interop.hpp"

namespace sluice::python::producers {

/// The current stream of `obj`'s producer for its memory on DLPack device (`device_type`,
/// `device_id`): nullopt where sluice does not know it (the caller then takes the handshake).
/// Needs the GIL. Throws what a registered source raised.
[[nodiscard]] std::optional<interop::Producer> current_stream(PyObject* obj, int device_type,
                                                              int device_id);

/// True for the libraries whose DLPack device sluice reads from the capsule instead of asking
/// `__dlpack_device__` (PyTorch, CuPy: their current stream needs only the device index).
[[nodiscard]] bool device_in_capsule(PyObject* obj);

/// `obj`'s type refused `__dlpack__(stream=-1)`: objects of that type take the handshake from now
/// on.
void refuse_opt_out(PyObject* obj);

/// How an import was ordered after its producer (counted for tests and benchmarks).
enum class Path : std::uint8_t {
  known_stream,  ///< by sluice, after the producer's current stream (no handshake)
  handshake,     ///< by the producer, through `__dlpack__(stream=...)`
};
void count(Path path) noexcept;

/// `_stream_source(module, fn)` and `_import_paths()` (counts of each Path).
void bind(py::module_& m);

}  // namespace sluice::python::producers
