// The dependency tracker's debug graph (SLUICE_DEBUG_DEPS, DOT output) and its counters
// (deps/tracker.hpp).

#include "deps/tracker.hpp"

#include <ostream>
#include <string>
#include <utility>

namespace sluice::detail {
namespace {

const char* mode_name(Access m) {
  switch (m) {
    case Access::read:
      return "read";
    case Access::write:
      return "write";
    case Access::read_write:
      return "read_write";
  }
  return "?";
}

std::string where(std::source_location loc) {
  return std::string(loc.file_name()) + ":" + std::to_string(loc.line());
}

}  // namespace

std::uint32_t Tracker::add_node(ContextImpl& ctx, std::span<const Use> accesses,
                                std::string_view what, std::source_location loc) {
  std::string label =
      ctx.name() + " #" + std::to_string(ctx.issued() + 1) + "\\n" + std::string(what);
  for (const auto& a : accesses) {
    label += "\\n" + std::string(mode_name(a.mode)) + " obj" + std::to_string(a.id);
    if (a.range.size != ByteRange::whole().size) {
      label += "[" + std::to_string(a.range.offset) + ",+" + std::to_string(a.range.size) + ")";
    }
  }
  label += "\\n" + where(loc);
  nodes_.push_back({std::move(label)});
  return static_cast<std::uint32_t>(nodes_.size());  // ids start at 1; 0 means none
}

void Tracker::set_debug(bool on) {
  debug_.store(on);
  set_host_tasks_note_completion(on);
}

void Tracker::write_dot(std::ostream& out) {
  std::lock_guard lock(mutex_);
  out << "digraph sluice_deps {\n  node [shape=box, fontname=\"monospace\"];\n";
  for (std::size_t i = 0; i < nodes_.size(); ++i) {
    out << "  n" << i + 1 << " [label=\"" << nodes_[i].label << "\"];\n";
  }
  for (const auto& [from, to, elided] : edges_) {
    out << "  n" << from << " -> n" << to;
    if (elided) out << " [style=dashed, label=\"implied\"]";
    out << ";\n";
  }
  out << "}\n";
}

void Tracker::clear_graph() {
  std::lock_guard lock(mutex_);
  nodes_.clear();
  edges_.clear();
  open_nodes_.clear();
}

deps::Stats Tracker::stats() {
  std::lock_guard lock(mutex_);
  return stats_;
}

deps::Footprint Tracker::footprint() {
  std::lock_guard lock(mutex_);
  deps::Footprint f;
  f.objects = objects_.size();
  for (const auto& [id, obj] : objects_) {
    f.segments += obj.segments.size();
    for (const auto& [start, s] : obj.segments) f.records += (s.writer ? 1 : 0) + s.readers.size();
  }
  return f;
}

}  // namespace sluice::detail
