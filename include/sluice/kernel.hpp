#pragma once
/// @file
/// Typed kernels, loader specs and the fluent stream API (reference 003, StreamExecutor).
///
/// A `KernelSpec` says where a kernel's code is and in what format: PTX, cubin or fatbin (in
/// memory or on disk), CUDA C++ source compiled at run time by NVRTC (cached in memory and on
/// disk), and a host implementation for the host backend. `TypedKernel<Args...>` loads a spec
/// for one device, checking the kernel's name and parameters against the module and against
/// `Args...`; every mismatch is an `Error` at load time. Launching checks the arguments at
/// compile time; arguments wrapped as `read(x)`, `write(y)`, `read_write(z)` join the
/// dependency tracker (sluice/deps.hpp), raw pointers stay untracked.
///
/// Plain C++20: no CUDA header is needed to load or launch a kernel.
///
/// @code
/// sluice::KernelSpec spec("add_mystery_value", 2);
/// spec.add_ptx_in_memory(kPtx)
///     .add_cuda_source(R"(extern "C" __global__ void add_mystery_value(float x, float* y)
///                         { *y = x + 123.0f; })")
///     .add_host<float, float*>([](std::size_t, float x, float* y) { *y = x + 123.0f; });
/// sluice::Context ctx;
/// sluice::TypedKernel<float, float*> kernel(ctx, spec);  // picks what fits ctx's device
/// sluice::DeviceBuffer<float> result(ctx, 1);
/// ctx.then_launch(kernel, 1, 1, 42.5f, sluice::write(result)).block_host_until_done();
/// @endcode

#include <array>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <source_location>
#include <span>
#include <string>
#include <string_view>
#include <tuple>
#include <type_traits>
#include <typeindex>
#include <utility>
#include <vector>

#include "sluice/context.hpp"
#include "sluice/deps.hpp"
#include "sluice/event.hpp"
#include "sluice/memory.hpp"
#include "sluice/rng.hpp"

namespace sluice {

class LoadedKernel;

/// The formats a `KernelSpec` can hold, in the order loading prefers them on a GPU (a cubin of
/// the device's architecture first, then a fatbin, then PTX, then source), plus `host`.
enum class KernelFormat : std::uint8_t { cubin, fatbin, ptx, cuda_source, host };

/// "cubin", "fatbin", "ptx", "cuda_source" or "host".
[[nodiscard]] const char* to_string(KernelFormat format) noexcept;

/// Launch dimensions.
struct Dims {
  unsigned x = 1, y = 1, z = 1;
  constexpr Dims() = default;
  constexpr Dims(unsigned x_, unsigned y_ = 1, unsigned z_ = 1) : x(x_), y(y_), z(z_) {}
  [[nodiscard]] constexpr std::size_t count() const noexcept {
    return std::size_t{x} * std::size_t{y} * std::size_t{z};
  }
};

/// Where one thread of a launch is, as CUDA names it: what a host implementation that takes
/// coordinates receives (`KernelSpec::add_host`). Thread `linear` of the flat form is thread
/// `linear % T` (T threads per block) of block `linear / T`; within a block (and within the
/// grid) x varies fastest: linear thread = x + blockDim.x * (y + blockDim.y * z), likewise for
/// blocks, as on a GPU.
struct ThreadIndex {
  Dims block_idx;          ///< blockIdx
  Dims thread_idx;         ///< threadIdx
  Dims grid_dim;           ///< gridDim
  Dims block_dim;          ///< blockDim
  std::size_t linear = 0;  ///< blockIdx (linear) * threads per block + threadIdx (linear)
};

namespace detail {
/// A host implementation, type-erased: `run(fn, begin, end, args, grid, block)` calls the
/// callable for every flat index in [begin, end) with the argument values that `args` points at.
struct HostKernelFn {
  std::type_index signature = typeid(void);  ///< typeid(std::tuple<Args...>)
  std::size_t arity = 0;
  std::shared_ptr<const void> fn;
  void (*run)(const void* fn, std::size_t begin, std::size_t end, void* const* args,
              const Dims& grid, const Dims& block) = nullptr;
};

/// The coordinates of flat index `i` of a launch of `grid` blocks of `block` threads.
constexpr ThreadIndex thread_index(std::size_t i, const Dims& grid, const Dims& block) noexcept {
  const std::size_t per_block = block.count();
  const std::size_t t = i % per_block, b = i / per_block;
  ThreadIndex idx;
  idx.grid_dim = grid;
  idx.block_dim = block;
  idx.linear = i;
  idx.thread_idx =
      Dims(static_cast<unsigned>(t % block.x), static_cast<unsigned>((t / block.x) % block.y),
           static_cast<unsigned>(t / (std::size_t{block.x} * block.y)));
  idx.block_idx =
      Dims(static_cast<unsigned>(b % grid.x), static_cast<unsigned>((b / grid.x) % grid.y),
           static_cast<unsigned>(b / (std::size_t{grid.x} * grid.y)));
  return idx;
}

template <class F, class... Args, std::size_t... I>
void run_host_range(const F& f, std::size_t begin, std::size_t end, void* const* args,
                    const Dims& grid, const Dims& block, std::index_sequence<I...>) {
  if constexpr (std::is_invocable_v<const F&, const ThreadIndex&, const Args&...>) {
    for (std::size_t i = begin; i < end; ++i) {
      f(thread_index(i, grid, block), *static_cast<const Args*>(args[I])...);
    }
  } else {
    (void)grid;
    (void)block;
    for (std::size_t i = begin; i < end; ++i) f(i, *static_cast<const Args*>(args[I])...);
  }
}
}  // namespace detail

/// Where a kernel's code is and in what format (the reference's MultiKernelLoaderSpec). One spec
/// may hold code for several formats and architectures; `TypedKernel` picks what fits the device.
///
/// The setters only record; files are read and code is compiled when a kernel is loaded, so a
/// missing file or bad code is reported by the load, naming the kernel and the format.
class KernelSpec {
 public:
  /// One piece of device code.
  struct Code {
    KernelFormat format;
    std::string bytes;                 ///< the code, when in memory
    std::filesystem::path path;        ///< the file, when on disk (then `bytes` is empty)
    int arch = 0;                      ///< cubin: the SM architecture it was built for (90: sm_90)
    std::vector<std::string> options;  ///< cuda_source: NVRTC options
  };

  /// A spec for the kernel `name` (for CUDA C++ source: the name as written, which may be a
  /// templated or namespaced expression such as "ns::scale<float>"). `arity`, if given, is also
  /// checked against the module and the `TypedKernel`.
  explicit KernelSpec(std::string name, std::optional<std::size_t> arity = std::nullopt);

  KernelSpec& add_ptx_in_memory(std::string ptx);
  KernelSpec& add_ptx_on_disk(std::filesystem::path path);
  /// A cubin built for `arch` (e.g. 90 for sm_90); it runs on devices of the same major
  /// compute capability and a minor one at least as large.
  KernelSpec& add_cubin_in_memory(std::string cubin, int arch);
  KernelSpec& add_cubin_on_disk(std::filesystem::path path, int arch);
  /// A fatbin (several cubins and/or PTX); the driver picks the image for the device.
  KernelSpec& add_fatbin_in_memory(std::string fatbin);
  KernelSpec& add_fatbin_on_disk(std::filesystem::path path);
  /// CUDA C++ source compiled by NVRTC for the device's architecture at load time, cached in
  /// memory and on disk (see `kernel_cache::directory()`). `options` go to NVRTC as given.
  KernelSpec& add_cuda_source(std::string source, std::vector<std::string> options = {});

  /// The host backend's implementation, called once per thread of the launch, in no particular
  /// order and from several threads at once (there are no barriers and no shared memory between
  /// threads): `f(const ThreadIndex& t, args...)` receives the thread's block and thread
  /// coordinates as a CUDA kernel would (`t.block_idx`, `t.thread_idx`, `t.grid_dim`,
  /// `t.block_dim`), so one body can serve both backends; `f(std::size_t i, args...)` receives
  /// the flat index `t.linear` alone. `Args...` must be the `TypedKernel`'s parameter types.
  template <class... Args, class F>
  KernelSpec& add_host(F f) {
    static_assert(std::is_invocable_v<const F&, const ThreadIndex&, const Args&...> ||
                      std::is_invocable_v<const F&, std::size_t, const Args&...>,
                  "KernelSpec::add_host<Args...>(f): f must be callable as f(const "
                  "sluice::ThreadIndex& t, Args... args) or f(std::size_t index, Args... args)");
    auto fn = std::make_shared<const F>(std::move(f));
    host_ = detail::HostKernelFn{typeid(std::tuple<Args...>), sizeof...(Args), fn,
                                 [](const void* p, std::size_t begin, std::size_t end,
                                    void* const* args, const Dims& grid, const Dims& block) {
                                   detail::run_host_range<F, Args...>(
                                       *static_cast<const F*>(p), begin, end, args, grid, block,
                                       std::index_sequence_for<Args...>{});
                                 }};
    return *this;
  }

  [[nodiscard]] const std::string& name() const noexcept { return name_; }
  [[nodiscard]] std::optional<std::size_t> arity() const noexcept { return arity_; }
  [[nodiscard]] const std::vector<Code>& code() const noexcept { return code_; }
  [[nodiscard]] const std::optional<detail::HostKernelFn>& host() const noexcept { return host_; }

 private:
  std::string name_;
  std::optional<std::size_t> arity_;
  std::vector<Code> code_;
  std::optional<detail::HostKernelFn> host_;
};

/// The grid of a launch (blocks). It also records the line the launch was written on, so that a
/// failing launch is named with it (a default argument after the argument pack is impossible).
struct Grid : Dims {
  std::source_location where;
  Grid(unsigned x_, unsigned y_ = 1, unsigned z_ = 1,
       std::source_location w = std::source_location::current())
      : Dims(x_, y_, z_), where(w) {}
  Grid(Dims d, std::source_location w = std::source_location::current()) : Dims(d), where(w) {}
};

/// The threads of one block, and the dynamic shared memory each block gets.
struct Block : Dims {
  std::size_t shared_bytes = 0;
  constexpr Block(unsigned x_, unsigned y_ = 1, unsigned z_ = 1, std::size_t shared = 0)
      : Dims(x_, y_, z_), shared_bytes(shared) {}
  constexpr Block(Dims d, std::size_t shared = 0) : Dims(d), shared_bytes(shared) {}
};

/// A kernel argument whose memory is tracked: the pointer the kernel receives and the access it
/// marks. Made by `read`, `write` and `read_write`.
template <class T, Access Mode>
struct TrackedArg {
  T* ptr;
  ObjectId id;
  ByteRange range;
};

namespace detail {
template <class B>
using buffer_element_t = std::remove_pointer_t<decltype(std::declval<const B&>().data())>;
template <class B>
concept TrackedBuffer = requires(const B& b) {
  {b.data()};
  { b.object_id() } -> std::convertible_to<ObjectId>;
  { b.size() } -> std::convertible_to<std::size_t>;
};
std::size_t checked_range(std::size_t size, std::size_t first, std::size_t count,
                          std::source_location loc);
template <Access M, class B>
TrackedArg<buffer_element_t<B>, M> tracked(const B& b, std::size_t first, std::size_t count,
                                           std::source_location loc) {
  using T = buffer_element_t<B>;
  checked_range(b.size(), first, count, loc);
  return {b.data() + first, b.object_id(), {first * sizeof(T), count * sizeof(T)}};
}
}  // namespace detail

/// The kernel reads all of `buffer` (a DeviceBuffer or PinnedBuffer). It binds to a `T*` or
/// `const T*` parameter.
template <detail::TrackedBuffer B>
[[nodiscard]] auto read(const B& buffer) {
  return detail::tracked<Access::read>(buffer, 0, buffer.size(), {});
}
/// The kernel reads elements [first, first + count); it receives a pointer to element `first`.
template <detail::TrackedBuffer B>
[[nodiscard]] auto read(const B& buffer, std::size_t first, std::size_t count,
                        std::source_location loc = std::source_location::current()) {
  return detail::tracked<Access::read>(buffer, first, count, loc);
}
/// The kernel writes all of `buffer` (earlier readers and writers on other contexts go first).
template <detail::TrackedBuffer B>
[[nodiscard]] auto write(const B& buffer) {
  return detail::tracked<Access::write>(buffer, 0, buffer.size(), {});
}
/// The kernel writes elements [first, first + count); it receives a pointer to element `first`.
template <detail::TrackedBuffer B>
[[nodiscard]] auto write(const B& buffer, std::size_t first, std::size_t count,
                         std::source_location loc = std::source_location::current()) {
  return detail::tracked<Access::write>(buffer, first, count, loc);
}
/// The kernel reads and writes all of `buffer`.
template <detail::TrackedBuffer B>
[[nodiscard]] auto read_write(const B& buffer) {
  return detail::tracked<Access::read_write>(buffer, 0, buffer.size(), {});
}
/// The kernel reads and writes elements [first, first + count).
template <detail::TrackedBuffer B>
[[nodiscard]] auto read_write(const B& buffer, std::size_t first, std::size_t count,
                              std::source_location loc = std::source_location::current()) {
  return detail::tracked<Access::read_write>(buffer, first, count, loc);
}

namespace detail {
/// What a `TypedKernel` expects of the module: its parameter types and sizes.
struct KernelSignature {
  std::type_index args;  ///< typeid(std::tuple<Args...>)
  std::span<const std::size_t> sizes;
};

[[nodiscard]] std::shared_ptr<const LoadedKernel> load_kernel(const Device& device,
                                                              const KernelSpec& spec,
                                                              const KernelSignature& signature,
                                                              std::source_location loc);
void launch_kernel(const Context& ctx, const LoadedKernel* kernel, const Grid& grid,
                   const Block& block, void** args, std::span<const Use> accesses);
[[nodiscard]] const Device& kernel_device(const LoadedKernel& k) noexcept;
[[nodiscard]] const std::string& kernel_name(const LoadedKernel& k) noexcept;
[[nodiscard]] KernelFormat kernel_format(const LoadedKernel& k) noexcept;

template <class A>
struct tracked_traits : std::false_type {};
template <class T, Access M>
struct tracked_traits<TrackedArg<T, M>> : std::true_type {
  using element = T;
  static constexpr Access mode = M;
};

/// Whether an argument of type `A` may be passed for parameter type `P`: the same type, a
/// pointer that converts without a cast (T* to const T*), nullptr for a pointer, or a tracked
/// buffer of T for a T* or const T* parameter.
template <class P, class A>
constexpr bool argument_fits() {
  using D = std::remove_cvref_t<A>;
  if constexpr (tracked_traits<D>::value) {
    using T = typename tracked_traits<D>::element;
    return std::is_same_v<P, T*> || std::is_same_v<P, const T*>;
  } else if constexpr (std::is_pointer_v<P>) {
    return std::is_null_pointer_v<D> || (std::is_pointer_v<D> && std::is_convertible_v<D, P>);
  } else {
    return std::is_same_v<D, P>;
  }
}

/// One argument's compile-time check; the instantiation names its position and both types.
template <std::size_t Position, class Parameter, class Argument>
constexpr bool check_argument() {
  static_assert(!TrackedBuffer<std::remove_cvref_t<Argument>>,
                "sluice kernel launch: pass a sluice buffer as sluice::read(buf), "
                "sluice::write(buf) or sluice::read_write(buf) (or buf.data() untracked)");
  static_assert(argument_fits<Parameter, Argument>(),
                "sluice kernel launch: argument type differs from the kernel's parameter type "
                "(see Position, Parameter and Argument in this instantiation); convert it "
                "explicitly, e.g. 1.0f for a float parameter");
  return true;
}

template <class P, class A>
P argument_value(A&& a) {
  using D = std::remove_cvref_t<A>;
  if constexpr (tracked_traits<D>::value) {
    return static_cast<P>(a.ptr);
  } else {
    return static_cast<P>(std::forward<A>(a));
  }
}

template <class A>
constexpr std::size_t tracked_count() {
  return tracked_traits<std::remove_cvref_t<A>>::value ? 1 : 0;
}

template <class A>
void collect_access(Use*& out, const A& a) {
  using D = std::remove_cvref_t<A>;
  if constexpr (tracked_traits<D>::value) {
    if (a.id != 0) *out++ = {a.id, tracked_traits<D>::mode, a.range};
  } else {
    (void)out;
    (void)a;
  }
}
}  // namespace detail

/// A kernel loaded for one device whose parameters are `Params...` (each trivially copyable,
/// passed by value as `cudaLaunchKernel` copies them). Cheap to copy: copies share the module.
///
/// Thread safety: a loaded kernel may be launched from any number of threads at once.
template <class... Params>
class TypedKernel {
  static_assert((std::is_trivially_copyable_v<Params> && ...),
                "TypedKernel<Params...>: kernel parameters must be trivially copyable");
  static_assert((!std::is_reference_v<Params> && ...),
                "TypedKernel<Params...>: kernel parameters are passed by value, not by reference");

 public:
  /// Not loaded; assign a loaded one before launching.
  TypedKernel() = default;
  /// Loads `spec` for `device`: picks the code that fits, compiles source if that is what fits,
  /// and checks the kernel's name, parameter count and sizes. Throws Error on any mismatch.
  TypedKernel(const Device& device, const KernelSpec& spec,
              std::source_location loc = std::source_location::current())
      : impl_(detail::load_kernel(device, spec, signature(), loc)) {}
  /// Loads `spec` for the device of `ctx`.
  TypedKernel(const Context& ctx, const KernelSpec& spec,
              std::source_location loc = std::source_location::current())
      : TypedKernel(ctx.device(), spec, loc) {}

  [[nodiscard]] bool loaded() const noexcept { return impl_ != nullptr; }
  /// The device it was loaded for (only valid when loaded).
  [[nodiscard]] const Device& device() const noexcept { return detail::kernel_device(*impl_); }
  [[nodiscard]] const std::string& name() const noexcept { return detail::kernel_name(*impl_); }
  /// The format loading picked (only valid when loaded).
  [[nodiscard]] KernelFormat format() const noexcept { return detail::kernel_format(*impl_); }

  /// Launches on `ctx` as one operation of it (numbered, in issue order, attributed to the line
  /// that built `grid`). Tracked arguments order the launch after conflicting work on other
  /// contexts. Throws Error if the kernel is not loaded or was loaded for another device.
  template <class... Args>
  void launch(const Context& ctx, Grid grid, Block block, Args&&... args) const {
    static_assert(sizeof...(Args) == sizeof...(Params),
                  "sluice kernel launch: pass exactly one argument per kernel parameter");
    check_all(std::index_sequence_for<Args...>{}, static_cast<std::tuple<Args...>*>(nullptr));
    std::tuple<Params...> values(detail::argument_value<Params>(std::forward<Args>(args))...);
    constexpr std::size_t tracked = (detail::tracked_count<Args>() + ... + 0);
    std::array<Use, tracked == 0 ? 1 : tracked> accesses{};
    Use* end = accesses.data();
    (detail::collect_access(end, args), ...);
    std::apply(
        [&](auto&... v) {
          std::array<void*, sizeof...(Params) == 0 ? 1 : sizeof...(Params)> pointers{
              static_cast<void*>(&v)...};
          detail::launch_kernel(ctx, impl_.get(), grid, block, pointers.data(),
                                std::span<const Use>(accesses.data(), end));
        },
        values);
  }

 private:
  static detail::KernelSignature signature() {
    static constexpr std::array<std::size_t, sizeof...(Params) == 0 ? 1 : sizeof...(Params)> sizes{
        sizeof(Params)...};
    return {typeid(std::tuple<Params...>), std::span(sizes.data(), sizeof...(Params))};
  }
  template <std::size_t... I, class... Args>
  static constexpr void check_all(std::index_sequence<I...>, std::tuple<Args...>*) {
    static_assert(
        (detail::check_argument<I, std::tuple_element_t<I, std::tuple<Params...>>, Args>() && ...));
  }

  std::shared_ptr<const LoadedKernel> impl_;
};

/// Records elapsed time between two points of a context's work (reference 003's Timer).
class Timer {
 public:
  Timer() = default;
  /// Records the start on `ctx`.
  void start(const Context& ctx, std::source_location loc = std::source_location::current());
  /// Records the stop on `ctx` (the context of the start, or one ordered after it).
  void stop(const Context& ctx, std::source_location loc = std::source_location::current());
  /// Milliseconds from start to stop; waits for the stop. Throws Error(invalid_state) if the
  /// timer was not started and stopped.
  [[nodiscard]] double elapsed_ms(std::source_location loc = std::source_location::current()) const;

 private:
  Event start_{Event::Options{.timing = true}};
  Event stop_{Event::Options{.timing = true}};
};

/// A fluent handle on a context (reference 003's `Stream::ThenX` chain): each `then_*` issues
/// one operation on the context and returns the handle. Operations are the context's ordinary
/// ones: numbered, tracked, their failures reported by the next wait naming the line of the
/// failing step. Returned by `Context::then()` and `Context::then_launch`.
///
/// @code
/// sluice::Timer t;
/// ctx.then()
///     .then_start_timer(t)
///     .then_launch(kernel, grid, block, sluice::read(x), sluice::write(y))
///     .then_copy(host, y)
///     .then_stop_timer(t)
///     .block_host_until_done();
/// double ms = t.elapsed_ms();
/// @endcode
class Fluent {
 public:
  explicit Fluent(Context ctx) : ctx_(std::move(ctx)) {}

  template <class... Params, class... Args>
  Fluent& then_launch(const TypedKernel<Params...>& kernel, Grid grid, Block block,
                      Args&&... args) {
    kernel.launch(ctx_, grid, block, std::forward<Args>(args)...);
    return *this;
  }
  /// `sluice::copy(ctx, dst, src)`.
  template <class Dst, class Src>
  Fluent& then_copy(Dst&& dst, Src&& src,
                    std::source_location loc = std::source_location::current()) {
    copy(ctx_, std::forward<Dst>(dst), std::forward<Src>(src), loc);
    return *this;
  }
  /// `sluice::memset(ctx, dst, value)`.
  template <class Dst>
  Fluent& then_memset(Dst&& dst, int value,
                      std::source_location loc = std::source_location::current()) {
    memset(ctx_, std::forward<Dst>(dst), value, loc);
    return *this;
  }
  Fluent& then_record(Event& event, std::source_location loc = std::source_location::current());
  /// `ctx.wait_for(other)`.
  Fluent& then_wait_for(const Context& other,
                        std::source_location loc = std::source_location::current());
  Fluent& then_start_timer(Timer& timer,
                           std::source_location loc = std::source_location::current());
  Fluent& then_stop_timer(Timer& timer, std::source_location loc = std::source_location::current());
  /// `ctx.host_task(fn, what)`.
  Fluent& then_host_task(std::function<void()> fn, std::string_view what = "host_task",
                         std::source_location loc = std::source_location::current());

  /// The generator later `then_populate_rand_*` steps draw from and advance (reference 003's
  /// `ThenSetRngSeed`); from seed bytes, as StreamExecutor takes them
  /// (rng::Philox::from_seed_bytes).
  Fluent& then_set_rng_seed(const rng::Philox& gen) {
    rng_ = gen;
    return *this;
  }
  Fluent& then_set_rng_seed(std::span<const std::uint8_t> seed,
                            std::source_location loc = std::source_location::current()) {
    rng_ = rng::Philox::from_seed_bytes(seed, loc);
    return *this;
  }
  /// `rng::uniform(ctx, out, gen)` with the generator set by `then_set_rng_seed`; Error if none.
  template <CannedReal T>
  Fluent& then_populate_rand_uniform(DeviceBuffer<T>& out,
                                     std::source_location loc = std::source_location::current()) {
    rng::uniform(ctx_, out, generator(loc), loc);
    return *this;
  }
  /// `rng::normal(ctx, out, gen, mean, stddev)` with the generator set by `then_set_rng_seed`.
  template <CannedReal T>
  Fluent& then_populate_rand_gaussian(DeviceBuffer<T>& out, T mean = 0, T stddev = 1,
                                      std::source_location loc = std::source_location::current()) {
    rng::normal(ctx_, out, generator(loc), mean, stddev, loc);
    return *this;
  }
  /// The fills above with an explicit generator (advanced like theirs).
  template <CannedReal T>
  Fluent& then_uniform(DeviceBuffer<T>& out, rng::Philox& gen,
                       std::source_location loc = std::source_location::current()) {
    rng::uniform(ctx_, out, gen, loc);
    return *this;
  }
  template <CannedReal T>
  Fluent& then_normal(DeviceBuffer<T>& out, rng::Philox& gen, T mean = 0, T stddev = 1,
                      std::source_location loc = std::source_location::current()) {
    rng::normal(ctx_, out, gen, mean, stddev, loc);
    return *this;
  }
  /// The generator set by `then_set_rng_seed`, advanced by the fills since (empty if none).
  [[nodiscard]] const std::optional<rng::Philox>& rng_state() const noexcept { return rng_; }
  /// `ctx.synchronize()`: blocks until everything issued on the context completed and throws
  /// the first unreported failure, naming the failing step and its line.
  void block_host_until_done(std::source_location loc = std::source_location::current());

  [[nodiscard]] const Context& context() const noexcept { return ctx_; }

 private:
  rng::Philox& generator(std::source_location loc);

  Context ctx_;
  std::optional<rng::Philox> rng_;
};

template <class Kernel, class... Args>
Fluent Context::then_launch(const Kernel& kernel, Grid grid, Block block, Args&&... args) const {
  Fluent f(*this);
  f.then_launch(kernel, grid, block, std::forward<Args>(args)...);
  return f;
}

/// NVRTC and its cache (what `KernelSpec::add_cuda_source` uses).
///
/// A compiled image is cached in memory for the process and on disk for later processes, keyed by
/// the source, the kernel name, the options, the architecture and the NVRTC version. The disk
/// cache lives in `kernel_cache::directory()`: the environment variable SLUICE_KERNEL_CACHE_DIR if
/// set, else $XDG_CACHE_HOME/sluice/kernels, else ~/.cache/sluice/kernels. Writing is
/// best-effort (an unwritable directory only costs the next process a compile); an entry is
/// written to a temporary file and renamed, so concurrent processes never read half of one.
namespace kernel_cache {

/// Where a compiled image came from.
enum class Origin : std::uint8_t { compiled, memory, disk };

/// An NVRTC result: a cubin for `arch` and the kernel's mangled (lowered) name in it.
struct Compiled {
  std::string image;
  std::string lowered_name;
  Origin origin = Origin::compiled;
};

/// Compiles `source` for sm_`arch` (e.g. 90) with NVRTC, or takes it from the cache. Needs no
/// GPU. Throws Error(invalid_argument) with NVRTC's log if the source does not compile, and
/// Error(unsupported) where the cuda module (which brings NVRTC) is not available, with the
/// reason.
[[nodiscard]] Compiled compile(std::string_view source, std::string_view kernel_name,
                               std::span<const std::string> options, int arch,
                               std::source_location loc = std::source_location::current());

/// The disk cache's directory (see above).
[[nodiscard]] std::filesystem::path directory();
/// Uses `dir` from now on (created when first written); an empty path restores the default.
void set_directory(std::filesystem::path dir);
/// Forgets the in-memory cache (the next load reads the disk cache, as a new process would).
void clear_memory();

/// Process-wide counters.
struct Stats {
  std::uint64_t compiles = 0;
  std::uint64_t memory_hits = 0;
  std::uint64_t disk_hits = 0;
  std::uint64_t disk_writes = 0;
};
[[nodiscard]] Stats stats();

}  // namespace kernel_cache

}  // namespace sluice
