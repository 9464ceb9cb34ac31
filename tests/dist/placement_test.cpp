// The check that refuses two ranks of one communicator on one GPU (src/dist/placement.hpp),
// on made-up placements: what a 4-GPU node's processes would announce.

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "dist/placement.hpp"
#include "sluice/error.hpp"

namespace sluice::dist::detail {
namespace {

RankPlacement on(int rank, int process, const std::string& node, int gpu,
                 const std::string& pci = {}) {
  const std::string device = "cuda:" + std::to_string(gpu);
  return {rank, process, node, device, pci.empty() ? device : "cuda@" + pci};
}

TEST(DistPlacement, EveryRankOnItsOwnGpuPasses) {
  const std::vector<RankPlacement> ranks{on(0, 0, "a", 0), on(1, 1, "a", 1), on(2, 2, "a", 2),
                                         on(3, 3, "a", 3)};
  EXPECT_EQ(shared_device_error(ranks, "cuda", "w"), "");
}

TEST(DistPlacement, OneGpuNumberOnTwoNodesPasses) {
  const std::vector<RankPlacement> ranks{on(0, 0, "a", 0), on(1, 1, "b", 0)};
  EXPECT_EQ(shared_device_error(ranks, "cuda", "w"), "");
}

TEST(DistPlacement, HostRanksMayShareTheirDevice) {
  const std::vector<RankPlacement> ranks{{0, 0, "a", "host:0", "host:0"},
                                         {1, 0, "a", "host:0", "host:0"}};
  EXPECT_EQ(shared_device_error(ranks, "host", "w"), "");
}

TEST(DistPlacement, TwoProcessesOnOneGpuAreRefusedNamingBoth) {
  // Every process of a node on cuda:0 (the processes did not pick their device by local rank).
  const std::vector<RankPlacement> ranks{on(0, 0, "a", 0), on(1, 1, "a", 1), on(2, 2, "a", 1)};
  const std::string e = shared_device_error(ranks, "cuda", "solve");
  EXPECT_NE(e.find("'solve'"), std::string::npos) << e;
  EXPECT_NE(e.find("ranks 1 and 2 (processes 1 and 2) are both on cuda:1 of node a"),
            std::string::npos)
      << e;
  EXPECT_NE(e.find("cuda:<local rank>"), std::string::npos) << e;
}

TEST(DistPlacement, TwoRanksOfOneProcessOnOneGpuAreRefused) {
  const std::vector<RankPlacement> ranks{on(0, 0, "a", 0), on(1, 0, "a", 0)};
  const std::string e = shared_device_error(ranks, "cuda", "w");
  EXPECT_NE(e.find("ranks 0 and 1 of process 0 are both on cuda:0"), std::string::npos) << e;
}

TEST(DistPlacement, OneGpuUnderTwoNumbersIsRefused) {
  // CUDA_VISIBLE_DEVICES differing per process: cuda:0 and cuda:1 are one PCI device.
  const std::vector<RankPlacement> ranks{on(0, 0, "a", 0, "0000:18:00.0"),
                                         on(1, 1, "a", 1, "0000:18:00.0")};
  const std::string e = shared_device_error(ranks, "cuda", "w");
  EXPECT_NE(e.find("cuda:0 in process 0, cuda:1 in process 1"), std::string::npos) << e;
  EXPECT_NE(e.find("0000:18:00.0"), std::string::npos) << e;
}

TEST(DistPlacement, PlacementsCrossProcessesWhole) {
  const std::vector<RankPlacement> ranks{on(3, 1, "node-7", 2, "0000:3a:00.0"), on(4, 1, "", 0)};
  const auto back = unpack(pack(ranks));
  ASSERT_EQ(back.size(), 2u);
  for (std::size_t i = 0; i < 2; ++i) {
    EXPECT_EQ(back[i].rank, ranks[i].rank);
    EXPECT_EQ(back[i].process, ranks[i].process);
    EXPECT_EQ(back[i].node, ranks[i].node);
    EXPECT_EQ(back[i].device, ranks[i].device);
    EXPECT_EQ(back[i].key, ranks[i].key);
  }
  auto bytes = pack(ranks);
  bytes.pop_back();
  EXPECT_THROW((void)unpack(bytes), Error);
}

TEST(DistPlacement, TheHostDeviceIsItsOwnKey) {
  EXPECT_EQ(device_key(Device{"host", 0}), "host:0");
  EXPECT_FALSE(node_name().empty());
}

}  // namespace
}  // namespace sluice::dist::detail
