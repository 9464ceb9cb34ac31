// Where a communicator's ranks run (placement.hpp).

#include "dist/placement.hpp"

#include <unistd.h>

#include <cstdint>
#include <cstring>

#include "sluice/error.hpp"

namespace sluice::dist::detail {

std::string device_key(const Device& d) {
  if (d.backend == "host") return d.to_string();
  try {
    // The cuda backend names the PCI address in its details ("..., PCI 0000:18:00.0, ...").
    const std::string details = device_info(d).details;
    if (const auto at = details.find("PCI "); at != std::string::npos) {
      const auto end = details.find(',', at);
      return d.backend + "@" +
             details.substr(at + 4, end == std::string::npos ? end : end - at - 4);
    }
  } catch (const Error&) {
  }
  return d.to_string();
}

std::string node_name() {
  char name[256] = {};
  if (gethostname(name, sizeof name - 1) != 0) return "?";
  return name;
}

std::string shared_device_error(std::span<const RankPlacement> ranks, std::string_view backend,
                                std::string_view comm) {
  if (backend == "host") return {};
  for (std::size_t j = 1; j < ranks.size(); ++j) {
    for (std::size_t i = 0; i < j; ++i) {
      const RankPlacement &a = ranks[i], &b = ranks[j];
      if (a.node != b.node || a.key != b.key) continue;
      const std::string where = a.process == b.process
                                    ? "of process " + std::to_string(a.process)
                                    : "(processes " + std::to_string(a.process) + " and " +
                                          std::to_string(b.process) + ")";
      std::string device = a.device;
      if (b.device != a.device)
        device += " in process " + std::to_string(a.process) + ", " + b.device + " in process " +
                  std::to_string(b.process);
      return "dist::Comm '" + std::string(comm) + "': ranks " + std::to_string(a.rank) + " and " +
             std::to_string(b.rank) + " " + where + " are both on " + device + " of node " +
             a.node + (a.key != a.device ? " (" + a.key + ")" : "") +
             "; NCCL runs one rank per GPU: give each rank of a node its own device (one process "
             "per GPU: cuda:<local rank>, as pick_device() does; one process for several GPUs: "
             "rank i on cuda:i), and run no more ranks on a node than it has GPUs";
    }
  }
  return {};
}

namespace {

void put(std::vector<std::byte>& out, const void* p, std::size_t n) {
  const auto* b = static_cast<const std::byte*>(p);
  out.insert(out.end(), b, b + n);
}

void put_string(std::vector<std::byte>& out, const std::string& s) {
  const auto n = static_cast<std::uint32_t>(s.size());
  put(out, &n, sizeof n);
  put(out, s.data(), s.size());
}

struct Reader {
  std::span<const std::byte> in;
  std::size_t at = 0;
  void get(void* p, std::size_t n) {
    if (at + n > in.size())
      throw Error(Errc::invalid_state, "dist: a process's rank placements arrived truncated");
    std::memcpy(p, in.data() + at, n);
    at += n;
  }
  std::string get_string() {
    std::uint32_t n = 0;
    get(&n, sizeof n);
    std::string s(n, '\0');
    get(s.data(), n);
    return s;
  }
};

}  // namespace

std::vector<std::byte> pack(std::span<const RankPlacement> ranks) {
  std::vector<std::byte> out;
  for (const auto& r : ranks) {
    const std::int32_t ints[2] = {r.rank, r.process};
    put(out, ints, sizeof ints);
    put_string(out, r.node);
    put_string(out, r.device);
    put_string(out, r.key);
  }
  return out;
}

std::vector<RankPlacement> unpack(std::span<const std::byte> bytes) {
  std::vector<RankPlacement> out;
  Reader in{bytes};
  while (in.at < bytes.size()) {
    RankPlacement r;
    std::int32_t ints[2] = {};
    in.get(ints, sizeof ints);
    r.rank = ints[0];
    r.process = ints[1];
    r.node = in.get_string();
    r.device = in.get_string();
    r.key = in.get_string();
    out.push_back(std::move(r));
  }
  return out;
}

}  // namespace sluice::dist::detail
