// The host backend's lazy kernels: the generated C++ is compiled at run time by the C++ compiler
// sluice was built with (SLUICE_LAZY_CXX overrides it), into a shared object that is loaded with
// dlopen and cached on disk beside the NVRTC cache (kernel_cache::directory()/lazy-host). Kernels
// run as kernel nodes over chunks of their output on the host pool; matrix products run through
// OpenBLAS, the host's BLAS.
//
// Measured against a chunked interpreter of the same expressions (docs/lazy.md): compiled code is
// plain loops, so it stays within a few percent of the same program written by hand; the cost is
// a compile of about 0.3 s per new program (none for a new shape or a later process).

#include "lazy/host/lazy_kernels.hpp"

#include <cblas.h>
#include <dlfcn.h>
#include <fcntl.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <random>
#include <sstream>
#include <unordered_map>

#include "sluice/error.hpp"
#include "sluice/kernel.hpp"

extern char** environ;

namespace sluice::detail::host {
namespace {

namespace fs = std::filesystem;
using KernelFn = void (*)(const void*, long long, long long);

class HostModule final : public LazyModule {
 public:
  HostModule(void* handle, std::vector<KernelFn> fns) : handle_(handle), fns_(std::move(fns)) {}
  ~HostModule() override {
    if (handle_ != nullptr) dlclose(handle_);
  }
  HostModule(const HostModule&) = delete;
  HostModule& operator=(const HostModule&) = delete;
  [[nodiscard]] KernelFn fn(std::size_t i) const { return fns_.at(i); }

 private:
  void* handle_;
  std::vector<KernelFn> fns_;
};

std::uint64_t fnv1a(std::string_view s, std::uint64_t h = 14695981039346656037ull) {
  for (unsigned char c : s) {
    h ^= c;
    h *= 1099511628211ull;
  }
  return h;
}

std::string hex(std::uint64_t v) {
  static constexpr char digits[] = "0123456789abcdef";
  std::string s(16, '0');
  for (int i = 15; i >= 0; --i, v >>= 4) s[static_cast<std::size_t>(i)] = digits[v & 15];
  return s;
}

std::string compiler() {
  if (const char* c = std::getenv("SLUICE_LAZY_CXX"); c != nullptr && *c != '\0') return c;
  return SLUICE_LAZY_CXX_DEFAULT;
}

std::vector<std::string> flags() {
  std::vector<std::string> f{"-std=c++17",
                             "-O3",
                             "-fPIC",
                             "-shared",
                             "-fno-math-errno",
                             "-fno-exceptions",
                             "-fno-rtti",
                             "-w",
                             "-fno-semantic-interposition"};
#if defined(__x86_64__)
  // The instruction set of this machine (the cache key holds it, so a cache shared by other
  // machines never hands out code they cannot run).
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) {
    f.push_back("-mavx2");
    f.push_back("-mfma");
  }
#endif
  return f;
}

/// The compiler's identity: its path, size and modification time (cheaper than running it).
std::string compiler_identity(const std::string& cxx) {
  std::string path = cxx;
  if (path.find('/') == std::string::npos) {
    if (const char* p = std::getenv("PATH")) {
      std::stringstream ss(p);
      std::string dir;
      while (std::getline(ss, dir, ':')) {
        if (fs::exists(fs::path(dir) / cxx)) {
          path = (fs::path(dir) / cxx).string();
          break;
        }
      }
    }
  }
  struct stat st {};
  if (stat(path.c_str(), &st) != 0) return path;
  return path + ":" + std::to_string(st.st_size) + ":" + std::to_string(st.st_mtime);
}

std::string random_suffix() {
  static std::atomic<std::uint64_t> counter{0};
  std::random_device rd;
  return std::to_string(getpid()) + "-" + std::to_string(counter.fetch_add(1)) + "-" +
         std::to_string(rd());
}

/// Runs the compiler; returns its exit status and writes its output to `log`.
int run_compiler(const std::string& cxx, const std::vector<std::string>& args,
                 const fs::path& log) {
  std::vector<std::string> all{cxx};
  all.insert(all.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (auto& a : all) argv.push_back(a.data());
  argv.push_back(nullptr);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 1, log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_adddup2(&actions, 1, 2);
  posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
  pid_t pid = 0;
  const int rc = posix_spawnp(&pid, cxx.c_str(), &actions, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  if (rc != 0) return -1000 - rc;
  int status = 0;
  while (waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR) return -1;
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : -2;
}

std::string read_text(const fs::path& p) {
  std::ifstream in(p);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

class HostLazyKernels final : public LazyKernels {
 public:
  [[nodiscard]] LazyDialect dialect() const noexcept override { return LazyDialect::cpp; }

  std::shared_ptr<const LazyModule> build(const Device& device, const std::string& source,
                                          std::span<const std::string> names, LazyBuildInfo& info,
                                          std::source_location loc) override {
    (void)device;
    const auto start = std::chrono::steady_clock::now();
    const std::string cxx = compiler();
    const auto opts = flags();
    std::string id = compiler_identity(cxx);
    for (const auto& o : opts) id += " " + o;
    const std::string key = hex(fnv1a(source)) + hex(fnv1a(id, fnv1a(source, 1469598103ull)));
    auto finish = [&](std::shared_ptr<const LazyModule> m, const char* origin) {
      info.origin = origin;
      info.ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
                    .count();
      return m;
    };
    std::lock_guard lock(mutex_);
    if (auto it = memory_.find(key); it != memory_.end()) {
      if (auto m = it->second.lock()) return finish(m, "memory");
    }
    fs::path dir = kernel_cache::directory() / "lazy-host";
    std::error_code ec;
    fs::create_directories(dir, ec);
    bool cache = !ec && access(dir.c_str(), W_OK) == 0;
    if (!cache) dir = fs::temp_directory_path();
    const fs::path so = dir / (key + ".so");
    const char* origin = "disk";
    if (!cache || !fs::exists(so)) {
      origin = "compiled";
      compile(cxx, opts, source, dir, so, key, loc);
    }
    void* handle = dlopen(so.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!cache) fs::remove(so, ec);
    if (handle == nullptr) {
      const char* why = dlerror();
      throw Error(Errc::backend_failure,
                  "sluice::lazy: cannot load the generated kernels " + so.string() + ": " +
                      (why ? why : "?") + "; delete the file to rebuild it",
                  loc);
    }
    std::vector<KernelFn> fns;
    for (const auto& n : names) {
      void* f = dlsym(handle, n.c_str());
      if (f == nullptr) {
        dlclose(handle);
        throw Error(Errc::backend_failure,
                    "sluice::lazy: the generated module " + so.string() + " has no kernel " + n +
                        "; delete the file to rebuild it",
                    loc);
      }
      fns.push_back(reinterpret_cast<KernelFn>(f));
    }
    auto m = std::make_shared<const HostModule>(handle, std::move(fns));
    memory_[key] = m;
    return finish(m, origin);
  }

  KernelWork work(const std::shared_ptr<const LazyModule>& module, std::size_t index,
                  std::int64_t elements, double weight, std::int64_t max_blocks,
                  std::span<const std::byte> args) override {
    (void)max_blocks;  // cuda's
    auto m = std::static_pointer_cast<const HostModule>(module);
    const KernelFn fn = m->fn(index);
    // Chunks of the graph's kernel nodes are a fixed number of range units: an element of a
    // kernel that does more work per element spans more units, so its chunks stay balanced.
    const auto w = static_cast<std::size_t>(std::max(1.0, std::round(weight)));
    KernelWork k;
    k.range = static_cast<std::size_t>(elements) * w;
    k.host = [m, fn, w, bytes = std::vector<std::byte>(args.begin(), args.end())](std::size_t lo,
                                                                                  std::size_t hi) {
      fn(bytes.data(), static_cast<long long>((lo + w - 1) / w),
         static_cast<long long>((hi + w - 1) / w));
    };
    return k;
  }

  std::optional<KernelWork> gemm(const BlasGemmArgs& args) override {
    KernelWork k;
    k.range = 1;
    k.host = [a = args](std::size_t, std::size_t) { run_gemm(a); };
    return k;
  }

 private:
  static void run_gemm(const BlasGemmArgs& a) {
    const auto ta = a.trans_a ? CblasTrans : CblasNoTrans;
    const auto tb = a.trans_b ? CblasTrans : CblasNoTrans;
    const auto i = [](std::int64_t v) { return static_cast<int>(v); };
    for (std::int64_t q = 0; q < a.batch; ++q) {
      if (a.precision == Precision::f32) {
        cblas_sgemm(CblasColMajor, ta, tb, i(a.m), i(a.n), i(a.k), static_cast<float>(a.alpha),
                    static_cast<const float*>(a.a) + q * a.stride_a, i(a.lda),
                    static_cast<const float*>(a.b) + q * a.stride_b, i(a.ldb),
                    static_cast<float>(a.beta), static_cast<float*>(a.c) + q * a.stride_c,
                    i(a.ldc));
      } else {
        cblas_dgemm(CblasColMajor, ta, tb, i(a.m), i(a.n), i(a.k), a.alpha,
                    static_cast<const double*>(a.a) + q * a.stride_a, i(a.lda),
                    static_cast<const double*>(a.b) + q * a.stride_b, i(a.ldb), a.beta,
                    static_cast<double*>(a.c) + q * a.stride_c, i(a.ldc));
      }
    }
  }

 public:
  [[nodiscard]] bool has_gemm() const noexcept override { return true; }

  /// The batch's products spread over the pool (as the graph runs independent products), the
  /// operands read from the table when the node runs.
  std::optional<KernelWork> gemm_table(const BlasGemmArgs& args, const void* table) override {
    KernelWork k;
    k.range = static_cast<std::size_t>(args.batch);
    k.host = [a = args, table](std::size_t lo, std::size_t hi) {
      const auto* t = static_cast<void* const*>(table);
      BlasGemmArgs one = a;
      one.batch = 1;
      const auto n = static_cast<std::size_t>(a.batch);
      for (std::size_t q = lo; q < hi; ++q) {
        one.a = t[q];
        one.b = t[n + q];
        one.c = t[2 * n + q];
        run_gemm(one);
      }
    };
    return k;
  }
  [[nodiscard]] bool has_gemm_table() const noexcept override { return true; }

 private:
  static void compile(const std::string& cxx, const std::vector<std::string>& opts,
                      const std::string& source, const fs::path& dir, const fs::path& so,
                      const std::string& key, std::source_location loc) {
    const std::string tag = random_suffix();
    const fs::path src = dir / (key + "." + tag + ".cpp");
    const fs::path tmp = dir / (key + "." + tag + ".so");
    const fs::path log = dir / (key + "." + tag + ".log");
    {
      std::ofstream out(src);
      out << source;
      if (!out) {
        throw Error(Errc::backend_failure,
                    "sluice::lazy: cannot write the generated source to " + src.string(), loc);
      }
    }
    std::vector<std::string> args = opts;
    args.insert(args.end(), {"-o", tmp.string(), src.string()});
    const int rc = run_compiler(cxx, args, log);
    std::error_code ec;
    if (rc != 0) {
      const std::string text = read_text(log);
      fs::remove(tmp, ec);
      fs::remove(log, ec);
      throw Error(Errc::backend_failure,
                  "sluice::lazy: the host compiler '" + cxx + "' failed on the generated kernels " +
                      (rc <= -1000 ? "(it could not be started; set SLUICE_LAZY_CXX to a C++ "
                                     "compiler)"
                                   : "(exit status " + std::to_string(rc) + "); source kept at " +
                                         src.string() + "; its output:\n" + text),
                  loc);
    }
    fs::remove(src, ec);
    fs::remove(log, ec);
    fs::rename(tmp, so, ec);  // atomic: a concurrent process never loads half a file
    if (ec) {
      throw Error(
          Errc::backend_failure,
          "sluice::lazy: cannot move the compiled kernels to " + so.string() + ": " + ec.message(),
          loc);
    }
  }

  void forget_memory() override {
    std::lock_guard lock(mutex_);
    memory_.clear();
  }

  std::mutex mutex_;
  std::unordered_map<std::string, std::weak_ptr<const LazyModule>> memory_;
};

}  // namespace

LazyKernels& lazy_kernels() {
  static HostLazyKernels k;
  return k;
}

}  // namespace sluice::detail::host
