// Misuse of the lazy layer: each mistake is an Error at the call that makes it, naming the
// operation and the shapes, and nothing is left half-done.

#include <gtest/gtest.h>

#include <string>

#include "sluice/lazy.hpp"

namespace sluice::test {
namespace {

namespace L = sluice::lazy;

/// Runs f, expects an Error whose message holds every one of `parts`.
template <class F>
void expect_error(F&& f, std::initializer_list<const char*> parts) {
  try {
    f();
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    const std::string what = e.what();
    for (const char* p : parts) EXPECT_NE(what.find(p), std::string::npos) << what;
  }
}

L::Options host() {
  L::Options o;
  o.device = Device{"host", 0};
  return o;
}

TEST(LazyErrors, ShapesThatDoNotBroadcastNameTheOperationAndBothShapes) {
  auto x = L::placeholder<double>("x", {3, 4});
  auto y = L::placeholder<double>("y", {5});
  expect_error([&] { (void)(x + y); }, {"add", "(3, 4)", "(5,)", "do not broadcast"});
  expect_error([&] { (void)L::where(x > 0.0, x, y); }, {"where", "(5,)"});
  expect_error([&] { (void)L::reshape(x, {5, -1}); }, {"reshape", "(3, 4)", "(5, -1)"});
  expect_error([&] { (void)L::sum(x, 2); }, {"sum", "axis 2", "rank 2"});
  expect_error([&] { (void)L::transpose(x, {0, 0}); }, {"transpose", "repeated"});
  expect_error([&] { (void)L::concatenate(std::vector{x, y}, 0); }, {"concatenate", "(3, 4)"});
  expect_error([&] { (void)L::broadcast_to(x, {4, 3}); }, {"broadcast_to", "(3, 4)", "(4, 3)"});
  expect_error([&] { (void)L::index(x, {1, 2, 3}); }, {"index", "too many indices"});
  expect_error([&] { (void)L::index(x, {7}); }, {"index", "7 is out of range"});
}

TEST(LazyErrors, EinsumSpecsAreChecked) {
  auto a = L::placeholder<double>("a", {3, 4});
  auto b = L::placeholder<double>("b", {5, 6});
  expect_error([&] { (void)L::einsum("ij,jk", a, b); }, {"einsum 'ij,jk'", "->"});
  expect_error([&] { (void)L::einsum("ij,jk->ik", a, b); },
               {"einsum 'ij,jk->ik'", "letter 'j'", "extent 4", "5"});
  expect_error([&] { (void)L::einsum("ijk,jk->i", a, b); }, {"operand 0", "(3, 4)", "3 axes"});
  expect_error([&] { (void)L::einsum("ij->iz", a); }, {"output letter 'z'"});
  expect_error([&] { (void)L::einsum("ij->ii", a); }, {"appears twice"});
  expect_error([&] { (void)L::einsum("i.j->i", a); }, {"not an index letter"});
  expect_error([&] { (void)L::einsum("ij,jk->ik", a); }, {"2 operands but 1"});
}

TEST(LazyErrors, BindingMistakesAreNamed) {
  auto x = L::placeholder<double>("x", {4});
  auto i = L::placeholder<std::int32_t>("i", {2});
  L::Program p = L::compile({L::take(x, i) * 2.0}, host());
  Context ctx(Device{"host", 0});
  DeviceBuffer<double> dx(ctx, 4), d3(ctx, 3), out(ctx, 2), out3(ctx, 3);
  DeviceBuffer<std::int32_t> di(ctx, 2);
  DeviceBuffer<std::int64_t> di64(ctx, 2);
  expect_error([&] { p.run(ctx, {{"x", dx}}, {out}); }, {"input 'i' is not bound"});
  expect_error(
      [&] {
        p.run(ctx, {{"x", dx}, {"i", di}, {"z", dx}}, {out});
      },
      {"no placeholder 'z'", "x, i"});
  expect_error(
      [&] {
        p.run(ctx, {{"x", dx}, {"i", di64}}, {out});
      },
      {"input 'i' is int32", "int64"});
  expect_error([&] { p.run(ctx, {{"x", d3}, {"i", di}}, {out}); }, {"input 'x'", "(4,)", "3"});
  expect_error([&] { p.run(ctx, {{"x", dx}, {"i", di}}, {out3}); }, {"output 0", "(2,)", "3"});
  expect_error([&] { p.run(ctx, {{"x", dx}, {"i", di}}, {}); }, {"1 output(s) but 0"});
  L::Program q = L::compile({x + 1.0}, host());
  expect_error(
      [&] {
        q.run(ctx, {{"x", dx}}, {dx});
      },
      {"output 0 is the buffer bound to input 'x'"});
  // Another shape through the binding: shapes are derived again and checked.
  auto w = L::placeholder<double>("w", {4});
  L::Program r = L::compile({x * w}, host());
  expect_error(
      [&] {
        r.run(ctx, {{"x", {d3, {3}}}, {"w", dx}}, {out3});
      },
      {"multiply", "(3,)", "(4,)", "program 'lazy'"});
  ctx.synchronize();
  EXPECT_EQ(p.stats().launches, 0u);  // nothing was issued
}

TEST(LazyErrors, EmptyHandlesAndPrograms) {
  L::Array<double> empty;
  auto x = L::placeholder<double>("x", {2});
  expect_error([&] { (void)(empty + x); }, {"empty Array handle"});
  expect_error([&] { (void)L::compile({empty}, host()); }, {"empty Array handle"});
  L::Program none;
  Context ctx(Device{"host", 0});
  expect_error([&] { none.run(ctx, {}, {}); }, {"Program is empty"});
  auto y = L::placeholder<double>("x", {2});
  expect_error([&] { (void)L::compile({x + y}, host()); }, {"two different placeholders", "'x'"});
  expect_error([&] { (void)L::placeholder<double>("", {1}); }, {"name is empty"});
  expect_error([&] { (void)L::placeholder<double>("n", {-2}); }, {"negative extent"});
  expect_error([&] { (void)L::min(L::placeholder<double>("e", {0, 3})); }, {"min", "no identity"});
  expect_error(
      [&] {
        (void)L::index_lambda<double>({2},
                                      [&](std::span<const L::Index> i) { return x(i[0], i[0]); });
      },
      {"2 indices"});
}

}  // namespace
}  // namespace sluice::test
