#pragma once
// Walks over element expressions (templates of ir.hpp).

#include <memory>
#include <unordered_map>
#include <unordered_set>
#include <utility>

#include "lazy/ir.hpp"

namespace sluice::lazy::detail {

template <class F>
void for_each_load(const ExPtr& root, F&& f) {
  std::unordered_set<const Ex*> seen;
  std::vector<const Ex*> stack{root.get()};
  while (!stack.empty()) {
    const Ex* e = stack.back();
    stack.pop_back();
    if (e == nullptr || !seen.insert(e).second) continue;
    if (e->kind == ExKind::load) f(*e);
    for (const auto& a : e->args) stack.push_back(a.get());
  }
}

ExPtr rebuild(const Ex& e, std::vector<ExPtr> args);

template <class F>
ExPtr rewrite_loads(const ExPtr& root, F&& replace) {
  std::unordered_map<const Ex*, ExPtr> memo;
  auto go = [&](auto& self, const ExPtr& e) -> ExPtr {
    if (auto it = memo.find(e.get()); it != memo.end()) return it->second;
    std::vector<ExPtr> args;
    bool changed = false;
    args.reserve(e->args.size());
    for (const auto& a : e->args) {
      args.push_back(self(self, a));
      changed = changed || args.back() != a;
    }
    ExPtr out;
    if (e->kind == ExKind::load) {
      out = replace(*e, args);
    } else {
      out = changed ? rebuild(*e, std::move(args)) : e;
    }
    memo.emplace(e.get(), out);
    return out;
  };
  return go(go, root);
}

}  // namespace sluice::lazy::detail
