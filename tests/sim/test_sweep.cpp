// The sweep library (sim/sweep.hpp): shards and the CSV rows.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "psw/common/error.hpp"
#include "psw/sim/sweep.hpp"

namespace {

TEST(SweepShard, ParsesKOfNAndRefusesTheRest) {
  const psw::sim::Shard s = psw::sim::parse_shard("3/8");
  EXPECT_EQ(s.index, 3);
  EXPECT_EQ(s.count, 8);
  for (const char* bad : {"0/8", "9/8", "1/0", "8", "/8", "1/", "a/2", "1/2/3", "1 /2", "-1/2"}) {
    EXPECT_THROW(psw::sim::parse_shard(bad), psw::InputError) << bad;
  }
}

// Note [Sweep shards]: the shards of N partition the points, round robin.
TEST(SweepShard, ShardsPartitionThePointsRoundRobin) {
  for (int n = 1; n <= 5; ++n) {
    for (std::size_t point = 0; point < 23; ++point) {
      int owners = 0;
      for (int k = 1; k <= n; ++k) {
        const bool has = psw::sim::Shard{k, n}.contains(point);
        owners += has ? 1 : 0;
        if (has) {
          EXPECT_EQ(static_cast<int>(point % static_cast<std::size_t>(n)), k - 1);
        }
      }
      EXPECT_EQ(owners, 1) << "point " << point << " of " << n << " shards";
    }
  }
}

TEST(SweepCsv, RowKeepsTheJsonNumberFormatAndQuotesValues) {
  psw::sim::SweepRow r;
  r.point = 4;
  r.values = {"pipeswitch", "[resnet152, bert_base]"};
  r.seed = 2;
  r.mechanism = "pipeswitch";
  r.hardware = "v100";
  r.requests = 6;
  r.mean_ms = 28.427559;
  r.slo_attainment = 1.0;
  r.throughput_rps = 1.9812261918463145;
  r.switches = 3;
  r.training_switch_ins = 2;
  EXPECT_EQ(psw::sim::sweep_csv_row(r),
            "4,pipeswitch,\"[resnet152, bert_base]\",2,pipeswitch,v100,6,28.427559,0.0,0.0,0.0,0.0,0.0,0.0,1.0,"
            "1.9812261918463145,0.0,0.0,3,2,0.0,0.0\n");
  EXPECT_EQ(psw::sim::sweep_csv_name(std::nullopt), "sweep.csv");
  EXPECT_EQ(psw::sim::sweep_csv_name(psw::sim::Shard{2, 3}), "sweep.shard-2-of-3.csv");
  EXPECT_EQ(psw::sim::point_folder_name(7), "point-0007");
}

}  // namespace
