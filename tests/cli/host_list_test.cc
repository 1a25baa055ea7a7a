// The launchers' host-list formats of `ringmaster hosts` (cli/host_list.h).
#include "cli/host_list.h"

#include <gtest/gtest.h>

namespace ringmaster::cli {
namespace {

TEST(HostList, RunsOfOneNodeBecomeItsSlotsInRingOrder) {
  const auto hosts = HostSlots({"gpu07", "gpu07", "gpu02", "gpu02", "gpu02", "gpu11"});
  ASSERT_EQ(hosts.size(), 3u);
  EXPECT_EQ(hosts[0], (std::pair<std::string, int>{"gpu07", 2}));
  EXPECT_EQ(hosts[1], (std::pair<std::string, int>{"gpu02", 3}));
  EXPECT_EQ(FormatHosts(hosts, HostFormat::kOpenMpi), "gpu07 slots=2\ngpu02 slots=3\ngpu11 slots=1\n");
  EXPECT_EQ(FormatHosts(hosts, HostFormat::kMpich), "gpu07:2\ngpu02:3\ngpu11:1\n");
  EXPECT_EQ(FormatHosts(hosts, HostFormat::kHorovod), "gpu07:2\ngpu02:3\ngpu11:1\n");
  EXPECT_EQ(FormatHosts(hosts, HostFormat::kSlurm), "gpu07,gpu02,gpu11\n");
  EXPECT_EQ(FormatHosts({}, HostFormat::kOpenMpi), "");
}

TEST(HostList, SlurmCompressesOnlyRunsThatKeepTheOrder) {
  EXPECT_EQ(SlurmHostList({"gpu01", "gpu02", "gpu03", "login"}), "gpu[01-03],login");
  // Out of order: each run separately, the order kept.
  EXPECT_EQ(SlurmHostList({"n3", "n4", "n1", "n2"}), "n[3-4],n[1-2]");
  // A different width or prefix breaks a run.
  EXPECT_EQ(SlurmHostList({"gpu09", "gpu010", "cpu11"}), "gpu09,gpu010,cpu11");
  EXPECT_EQ(SlurmHostList({"a", "b"}), "a,b");
  EXPECT_EQ(SlurmHostList({"rack1-node8", "rack1-node9", "rack1-node10"}), "rack1-node[8-9],rack1-node10");
}

TEST(HostList, FormatNames) {
  EXPECT_EQ(ParseHostFormat("openmpi"), HostFormat::kOpenMpi);
  EXPECT_EQ(ParseHostFormat("slurm"), HostFormat::kSlurm);
  EXPECT_FALSE(ParseHostFormat("pbs").has_value());
}

}  // namespace
}  // namespace ringmaster::cli
