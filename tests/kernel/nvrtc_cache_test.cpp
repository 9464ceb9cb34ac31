// NVRTC and its cache (no GPU needed: NVRTC compiles without a driver). A second process loads
// what the first compiled from disk: the test binary runs itself as the child.

#include <gtest/gtest.h>

#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "kernel_test_util.hpp"
#include "sluice/error.hpp"
#include "sluice/kernel.hpp"

namespace sluice::test {
namespace {

namespace kc = kernel_cache;

constexpr const char* kChildEnv = "SLUICE_KERNEL_CACHE_TEST_CHILD_DIR";

// A fresh cache directory per test, restored afterwards.
class KernelCacheTest : public ::testing::Test {
 protected:
  void SetUp() override {
#ifndef SLUICE_TEST_CUDA
    GTEST_SKIP() << "built without the cuda backend: no NVRTC";
#endif
    dir_ = std::filesystem::temp_directory_path() /
           ("sluice-kcache-" + std::to_string(::getpid()) + "-" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::remove_all(dir_);
    kc::set_directory(dir_);
    kc::clear_memory();
  }
  void TearDown() override {
    kc::set_directory({});
    kc::clear_memory();
    if (!dir_.empty()) std::filesystem::remove_all(dir_);
  }
  std::filesystem::path dir_;
};

TEST_F(KernelCacheTest, CompilesOnceThenMemoryThenDisk) {
  const auto before = kc::stats();
  auto a = kc::compile(kMysterySource, "add_mystery_value", {}, 90);
  EXPECT_EQ(a.origin, kc::Origin::compiled);
  EXPECT_EQ(a.lowered_name, "add_mystery_value");
  EXPECT_GT(a.image.size(), 0u);
  auto b = kc::compile(kMysterySource, "add_mystery_value", {}, 90);
  EXPECT_EQ(b.origin, kc::Origin::memory);
  kc::clear_memory();
  auto c = kc::compile(kMysterySource, "add_mystery_value", {}, 90);
  EXPECT_EQ(c.origin, kc::Origin::disk);
  EXPECT_EQ(c.image, a.image);
  const auto after = kc::stats();
  EXPECT_EQ(after.compiles - before.compiles, 1u);
  EXPECT_EQ(after.disk_hits - before.disk_hits, 1u);
  EXPECT_EQ(after.disk_writes - before.disk_writes, 1u);
  // Another architecture, other options or another source: another entry.
  EXPECT_EQ(kc::compile(kMysterySource, "add_mystery_value", {}, 80).origin, kc::Origin::compiled);
  const std::string opt[] = {"-DUNUSED=1"};
  EXPECT_EQ(kc::compile(kMysterySource, "add_mystery_value", opt, 90).origin, kc::Origin::compiled);
}

TEST_F(KernelCacheTest, TemplatedKernelsGetTheirMangledName) {
  const char* src = R"(
namespace ns { template <class T> __global__ void scale(T* x, T a) { x[threadIdx.x] *= a; } })";
  auto c = kc::compile(src, "ns::scale<float>", {}, 90);
  EXPECT_NE(c.lowered_name, "ns::scale<float>");
  EXPECT_NE(c.lowered_name.find("scale"), std::string::npos) << c.lowered_name;
}

TEST_F(KernelCacheTest, CompileErrorCarriesTheLog) {
  try {
    (void)kc::compile("__global__ void k(int* x) { *x = missing_name; }", "k", {}, 90);
    FAIL() << "expected Error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), Errc::invalid_argument);
    const std::string what = e.what();
    EXPECT_NE(what.find("NVRTC could not compile"), std::string::npos) << what;
    EXPECT_NE(what.find("missing_name"), std::string::npos) << what;
  }
  EXPECT_THROW((void)kc::compile(kMysterySource, "add_mystery_value", {}, 0), Error);
}

TEST_F(KernelCacheTest, CorruptEntryIsRecompiled) {
  (void)kc::compile(kMysterySource, "add_mystery_value", {}, 90);
  kc::clear_memory();
  for (const auto& f : std::filesystem::directory_iterator(dir_)) {
    std::ofstream(f.path(), std::ios::binary | std::ios::trunc) << "garbage";
  }
  EXPECT_EQ(kc::compile(kMysterySource, "add_mystery_value", {}, 90).origin, kc::Origin::compiled);
}

TEST_F(KernelCacheTest, SecondProcessLoadsFromDisk) {
  (void)kc::compile(kMysterySource, "add_mystery_value", {}, 90);
  const std::string self = std::filesystem::read_symlink("/proc/self/exe");
  const pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    ::setenv(kChildEnv, dir_.c_str(), 1);
    ::execl(self.c_str(), self.c_str(), "--gtest_filter=KernelCacheChild.LoadsFromDisk",
            static_cast<char*>(nullptr));
    ::_exit(127);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0) << "the child process did not find the entry on disk";
}

// Runs only as the child of SecondProcessLoadsFromDisk.
TEST(KernelCacheChild, LoadsFromDisk) {
  const char* dir = std::getenv(kChildEnv);
  if (dir == nullptr) GTEST_SKIP() << "runs only as the child of SecondProcessLoadsFromDisk";
  kc::set_directory(dir);
  auto c = kc::compile(kMysterySource, "add_mystery_value", {}, 90);
  EXPECT_EQ(c.origin, kc::Origin::disk);
  EXPECT_EQ(kc::stats().compiles, 0u);
}

}  // namespace
}  // namespace sluice::test
