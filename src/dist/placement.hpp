#pragma once
// Where a communicator's ranks run, and the check that no two of them share a device. NCCL runs
// one rank per GPU: two ranks on one GPU fail inside ncclCommInitRank with "Duplicate GPU
// detected" (or, worse, deadlock), naming a PCI bus but not the ranks or what to change. The
// dist layer gathers every rank's placement when a communicator is made and refuses such a
// placement first, on every process alike, with the ranks, the device and the remedy.

#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "sluice/platform.hpp"

namespace sluice::dist::detail {

/// One rank of a communicator: the process and node it lives on and its device.
struct RankPlacement {
  int rank = 0;
  int process = 0;
  std::string node;    ///< the node's host name
  std::string device;  ///< as the process names it (e.g. "cuda:1")
  /// What identifies the physical device on its node: the PCI address where the backend reports
  /// one (CUDA_VISIBLE_DEVICES may number one GPU differently in two processes), else `device`.
  std::string key;
};

/// The identity of `d` on this node (RankPlacement::key).
[[nodiscard]] std::string device_key(const Device& d);
/// This node's host name.
[[nodiscard]] std::string node_name();

/// Empty if every rank of `ranks` has a device of its own (ranks of the host backend may
/// share: the host engine serves several ranks per device), else the error text naming the
/// first two ranks that share one, the device, and what to do.
[[nodiscard]] std::string shared_device_error(std::span<const RankPlacement> ranks,
                                              std::string_view backend, std::string_view comm);

/// Flat bytes of a process's placements (for an allgatherv) and back.
[[nodiscard]] std::vector<std::byte> pack(std::span<const RankPlacement> ranks);
[[nodiscard]] std::vector<RankPlacement> unpack(std::span<const std::byte> bytes);

}  // namespace sluice::dist::detail
