// Shape rules: broadcasting, axes, slices, NumPy indexing, einsum specs.

#include "lazy/shapes.hpp"

#include <algorithm>

#include "sluice/error.hpp"

namespace sluice::lazy::detail {

void shape_error(const std::string& what, const std::string& message, std::source_location where) {
  throw Error(Errc::invalid_argument, "sluice::lazy " + what + ": " + message, where);
}

Shape broadcast_shapes(std::span<const Shape> shapes, const std::string& what,
                       std::source_location where) {
  std::size_t rank = 0;
  for (const auto& s : shapes) rank = std::max(rank, s.size());
  Shape out(rank, 1);
  for (std::size_t k = 0; k < rank; ++k) {
    for (const auto& s : shapes) {
      if (k + s.size() < rank) continue;
      const auto d = s[k + s.size() - rank];
      auto& o = out[k];
      if (d == o || d == 1) continue;
      if (o == 1) {
        o = d;
        continue;
      }
      std::string list;
      for (const auto& x : shapes) list += (list.empty() ? "" : " and ") + to_string(x);
      shape_error(what,
                  "shapes " + list + " do not broadcast (axis " +
                      std::to_string(static_cast<long>(k) - static_cast<long>(rank)) + ": " +
                      std::to_string(o) + " against " + std::to_string(d) +
                      "); extents must be equal or 1",
                  where);
    }
  }
  return out;
}

int normalize_axis(int axis, std::size_t rank, const std::string& what,
                   std::source_location where) {
  const int r = static_cast<int>(rank);
  if (axis < -r || axis >= r) {
    shape_error(
        what,
        "axis " + std::to_string(axis) + " is out of range for an array of rank " +
            std::to_string(rank) +
            (rank == 0 ? ""
                       : " (valid: " + std::to_string(-r) + " to " + std::to_string(r - 1) + ")"),
        where);
  }
  return axis < 0 ? axis + r : axis;
}

ResolvedSlice resolve_slice(const Slice& s, std::int64_t n, const std::string& what,
                            std::source_location where) {
  if (s.step == 0) shape_error(what, "a slice step of 0", where);
  ResolvedSlice r;
  r.step = s.step;
  auto fix = [&](std::int64_t v, std::int64_t lo, std::int64_t hi) {
    if (v < 0) v += n;
    return std::clamp(v, lo, hi);
  };
  std::int64_t start, stop;
  if (s.step > 0) {
    start = s.start ? fix(*s.start, 0, n) : 0;
    stop = s.stop ? fix(*s.stop, 0, n) : n;
    r.length = stop > start ? (stop - start + s.step - 1) / s.step : 0;
  } else {
    start = s.start ? fix(*s.start, -1, n - 1) : n - 1;
    stop = s.stop ? fix(*s.stop, -1, n - 1) : -1;
    r.length = start > stop ? (start - stop + (-s.step) - 1) / (-s.step) : 0;
  }
  r.start = r.length > 0 ? start : 0;
  return r;
}

IndexPlan plan_index(const Shape& a, std::span<const IndexItem> items_in,
                     std::span<const Shape> array_shapes, const std::string& what,
                     std::source_location where) {
  using K = IndexItem::Kind;
  std::vector<IndexItem> items(items_in.begin(), items_in.end());
  std::size_t consuming = 0, ellipses = 0;
  bool any_array = false;
  for (const auto& it : items) {
    if (it.kind == K::slice || it.kind == K::integer || it.kind == K::array) ++consuming;
    if (it.kind == K::ellipsis) ++ellipses;
    if (it.kind == K::array) any_array = true;
  }
  if (ellipses > 1) shape_error(what, "an index can have only one ellipsis", where);
  if (consuming > a.size()) {
    shape_error(what,
                "too many indices (" + std::to_string(consuming) + ") for an array of shape " +
                    to_string(a),
                where);
  }
  // Expand the ellipsis (or append one) into full slices.
  {
    std::vector<IndexItem> full;
    bool expanded = false;
    for (const auto& it : items) {
      if (it.kind == K::ellipsis) {
        for (std::size_t k = 0; k < a.size() - consuming; ++k) full.push_back(IndexItem{});
        expanded = true;
      } else {
        full.push_back(it);
      }
    }
    if (!expanded) {
      for (std::size_t k = 0; k < a.size() - consuming; ++k) full.push_back(IndexItem{});
    }
    items = std::move(full);
  }
  IndexPlan p;
  p.axes.resize(a.size());
  // Advanced indices (index arrays, and integers when there is an array) and whether they stand
  // next to each other.
  std::vector<Shape> adv_shapes;
  int first_adv = -1, last_adv = -1, adv_count = 0;
  for (std::size_t k = 0; k < items.size(); ++k) {
    const bool adv = items[k].kind == K::array || (any_array && items[k].kind == K::integer);
    if (!adv) continue;
    if (first_adv < 0) first_adv = static_cast<int>(k);
    last_adv = static_cast<int>(k);
    ++adv_count;
  }
  const bool adjacent = adv_count > 0 && last_adv - first_adv + 1 == adv_count;
  std::size_t array_no = 0;
  for (const auto& it : items) {
    if (it.kind == K::array) {
      if (array_no >= array_shapes.size()) shape_error(what, "index arrays missing", where);
      adv_shapes.push_back(array_shapes[array_no++]);
    }
  }
  if (any_array) p.advanced = broadcast_shapes(adv_shapes, what + " (index arrays)", where);

  // Output axes in order: basic ones, with the advanced block placed first or where it stands.
  std::size_t axis = 0;
  array_no = 0;
  bool block_placed = false;
  auto place_block = [&] {
    p.advanced_first = static_cast<int>(p.out.size());
    for (auto d : p.advanced) p.out.push_back(d);
    block_placed = true;
  };
  if (any_array && !adjacent) place_block();
  for (std::size_t k = 0; k < items.size(); ++k) {
    const auto& it = items[k];
    if (any_array && adjacent && static_cast<int>(k) == first_adv && !block_placed) place_block();
    switch (it.kind) {
      case K::newaxis:
        p.out.push_back(1);
        break;
      case K::slice: {
        auto& ax = p.axes[axis];
        ax.kind = IndexPlan::Axis::Kind::slice;
        ax.slice = resolve_slice(it.slice, a[axis], what, where);
        ax.out_axis = static_cast<int>(p.out.size());
        p.out.push_back(ax.slice.length);
        ++axis;
        break;
      }
      case K::integer: {
        auto& ax = p.axes[axis];
        std::int64_t v = it.integer;
        if (v < 0) v += a[axis];
        if (v < 0 || v >= a[axis]) {
          shape_error(what,
                      "index " + std::to_string(it.integer) + " is out of range for axis " +
                          std::to_string(axis) + " of extent " + std::to_string(a[axis]),
                      where);
        }
        ax.kind = any_array ? IndexPlan::Axis::Kind::advanced : IndexPlan::Axis::Kind::integer;
        ax.value = v;
        ax.array = -1;
        ++axis;
        break;
      }
      case K::array: {
        auto& ax = p.axes[axis];
        ax.kind = IndexPlan::Axis::Kind::advanced;
        ax.array = static_cast<int>(array_no++);
        ++axis;
        break;
      }
      case K::ellipsis:
        break;
    }
  }
  return p;
}

int letter_index(char c) noexcept {
  if (c >= 'a' && c <= 'z') return c - 'a';
  if (c >= 'A' && c <= 'Z') return 26 + (c - 'A');
  return -1;
}

EinsumSpec parse_einsum(std::string_view text, std::span<const Shape> shapes,
                        std::source_location where) {
  const std::string what = "einsum '" + std::string(text) + "'";
  std::string s;
  for (char c : text) {
    if (c != ' ') s += c;
  }
  const auto arrow = s.find("->");
  if (arrow == std::string::npos) {
    shape_error(what, "give the output explicitly after '->' (e.g. \"ij,jk->ik\")", where);
  }
  EinsumSpec spec;
  spec.output = s.substr(arrow + 2);
  std::string lhs = s.substr(0, arrow);
  std::size_t start = 0;
  for (;;) {
    auto comma = lhs.find(',', start);
    spec.inputs.push_back(
        lhs.substr(start, comma == std::string::npos ? std::string::npos : comma - start));
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  if (spec.inputs.size() != shapes.size()) {
    shape_error(what,
                "the spec names " + std::to_string(spec.inputs.size()) + " operands but " +
                    std::to_string(shapes.size()) + " were given",
                where);
  }
  auto check_letters = [&](const std::string& t) {
    for (char c : t) {
      if (letter_index(c) < 0) {
        shape_error(what, std::string("'") + c + "' is not an index letter (a-z, A-Z; no ellipsis)",
                    where);
      }
    }
  };
  for (std::size_t k = 0; k < shapes.size(); ++k) {
    check_letters(spec.inputs[k]);
    if (spec.inputs[k].size() != shapes[k].size()) {
      shape_error(what,
                  "operand " + std::to_string(k) + " has shape " + to_string(shapes[k]) +
                      " (rank " + std::to_string(shapes[k].size()) + ") but '" + spec.inputs[k] +
                      "' names " + std::to_string(spec.inputs[k].size()) + " axes",
                  where);
    }
  }
  check_letters(spec.output);
  for (std::size_t k = 0; k < spec.output.size(); ++k) {
    const char c = spec.output[k];
    if (spec.output.find(c) != k) {
      shape_error(what, std::string("output letter '") + c + "' appears twice", where);
    }
    bool found = false;
    for (const auto& in : spec.inputs) found = found || in.find(c) != std::string::npos;
    if (!found) {
      shape_error(what, std::string("output letter '") + c + "' names no axis of an operand",
                  where);
    }
  }
  return spec;
}

std::vector<std::int64_t> einsum_extents(const EinsumSpec& spec, std::span<const Shape> shapes,
                                         const std::string& what, std::source_location where) {
  std::vector<std::int64_t> ext(52, -1);
  for (std::size_t k = 0; k < spec.inputs.size(); ++k) {
    for (std::size_t a = 0; a < spec.inputs[k].size(); ++a) {
      const char c = spec.inputs[k][a];
      auto& e = ext[static_cast<std::size_t>(letter_index(c))];
      // An extent of 1 broadcasts against the letter's other extents (as NumPy's arrays do).
      if (e >= 0 && (e == 1 || shapes[k][a] == 1)) {
        e = std::max(e, shapes[k][a]);
        continue;
      }
      if (e >= 0 && e != shapes[k][a]) {
        shape_error(what,
                    std::string("letter '") + c + "' has extent " + std::to_string(e) +
                        " in one operand and " + std::to_string(shapes[k][a]) + " in operand " +
                        std::to_string(k) + " (shape " + to_string(shapes[k]) + ")",
                    where);
      }
      e = shapes[k][a];
    }
  }
  return ext;
}

}  // namespace sluice::lazy::detail
