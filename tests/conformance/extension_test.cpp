// The extension registry (sluice/extension.hpp): per-backend implementations found by type, a
// clear error for a missing one, registration once per backend, built-ins registered by the
// layer that defines the interface.

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <string_view>

#include "sluice/context.hpp"
#include "sluice/error.hpp"
#include "sluice/ext/la_kernels.hpp"
#include "sluice/ext/scalar_kernels.hpp"
#include "sluice/extension.hpp"

namespace {

struct Greeter {
  static constexpr std::string_view extension_name = "Greeter";
  virtual ~Greeter() = default;
  [[nodiscard]] virtual std::string greet() const = 0;
};

struct HostGreeter final : Greeter {
  [[nodiscard]] std::string greet() const override { return "hello from host"; }
};

// An interface whose built-ins are registered by the interface itself, on first lookup.
struct Counter {
  static constexpr std::string_view extension_name = "Counter";
  static inline int builtin_registrations = 0;
  static void register_builtins() {
    ++builtin_registrations;
    sluice::register_extension<Counter>("host", std::make_shared<Counter>());
  }
  int value = 7;
};

TEST(ExtensionTest, MissingExtensionNamesBackendAndInterface) {
  sluice::Context ctx(sluice::Device{"host", 0});
  try {
    (void)sluice::extension<Greeter>(ctx);
    FAIL() << "expected Error";
  } catch (const sluice::Error& e) {
    EXPECT_EQ(e.code(), sluice::Errc::unsupported);
    const std::string what = e.what();
    EXPECT_NE(what.find("host has no Greeter"), std::string::npos) << what;
    EXPECT_NE(what.find("register_extension<Greeter>"), std::string::npos) << what;
  }
  EXPECT_EQ(sluice::find_extension<Greeter>("host"), nullptr);
}

TEST(ExtensionTest, RegisteredOnceAndFoundByTypeAndBackend) {
  sluice::register_extension<Greeter>("host", std::make_shared<HostGreeter>());
  EXPECT_EQ(sluice::extension<Greeter>("host").greet(), "hello from host");
  EXPECT_EQ(sluice::find_extension<Greeter>("cuda-like"), nullptr);
  EXPECT_THROW(sluice::register_extension<Greeter>("host", std::make_shared<HostGreeter>()),
               sluice::Error);
  EXPECT_THROW(sluice::register_extension<Greeter>("other", nullptr), sluice::Error);
  // A context caches the answer; a second lookup returns the same object.
  sluice::Context ctx(sluice::Device{"host", 0});
  Greeter& a = sluice::extension<Greeter>(ctx);
  Greeter& b = sluice::extension<Greeter>(ctx);
  EXPECT_EQ(&a, &b);
  EXPECT_EQ(&a, sluice::find_extension<Greeter>("host"));
}

TEST(ExtensionTest, BuiltinsRegisteredOnceOnFirstLookup) {
  EXPECT_EQ(Counter::builtin_registrations, 0);
  EXPECT_EQ(sluice::extension<Counter>("host").value, 7);
  EXPECT_EQ(sluice::extension<Counter>("host").value, 7);
  EXPECT_EQ(Counter::builtin_registrations, 1);
  // A user's registration for a backend that has a built-in one is refused, clearly.
  EXPECT_THROW(sluice::register_extension<Counter>("host", std::make_shared<Counter>()),
               sluice::Error);
  EXPECT_EQ(Counter::builtin_registrations, 1);
}

TEST(ExtensionTest, LayersRegisterTheirKernelsForEveryBuiltBackend) {
  EXPECT_NE(sluice::find_extension<sluice::LaKernels>("host"), nullptr);
  EXPECT_NE(sluice::find_extension<sluice::ScalarKernels>("host"), nullptr);
#ifdef SLUICE_TEST_CUDA
  EXPECT_NE(sluice::find_extension<sluice::LaKernels>("cuda"), nullptr);
  EXPECT_NE(sluice::find_extension<sluice::ScalarKernels>("cuda"), nullptr);
#endif
}

}  // namespace
