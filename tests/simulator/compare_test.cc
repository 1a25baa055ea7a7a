// Putting replay summaries side by side: directions, ties, missing values.
#include "simulator/compare.h"

#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ringmaster::simulator {
namespace {

using ::testing::HasSubstr;

RunSummary Summary(const std::string& name, const std::string& json) {
  auto r = ParseRunSummary(json, name + "/summary.json", name);
  EXPECT_TRUE(r.ok()) << r.status();
  return r.ok() ? *r : RunSummary{};
}

TEST(Compare, MarksTheBestValueOfEachMetricByItsDirection) {
  const Comparison c = Compare({
      Summary("fifo", R"({"avg_jct_s": 300.5, "gpu_alloc_ratio": 0.61, "jobs_completed": 10, "shrinks": 0})"),
      Summary("las", R"({"avg_jct_s": 120.25, "gpu_alloc_ratio": 0.61, "jobs_completed": 10, "shrinks": 4})"),
  });
  ASSERT_EQ(c.runs, (std::vector<std::string>{"fifo", "las"}));
  auto row = [&](const std::string& key) {
    for (const auto& m : c.metrics) {
      if (m.key == key) return m;
    }
    ADD_FAILURE() << key;
    return ComparedMetric{};
  };
  EXPECT_EQ(row("avg_jct_s").best, (std::vector<bool>{false, true}));       // lower is better
  EXPECT_EQ(row("gpu_alloc_ratio").best, (std::vector<bool>{true, true}));  // a tie marks both
  EXPECT_EQ(row("shrinks").best, (std::vector<bool>{false, false}));        // no direction
  const std::string table = ComparisonTable(c);
  EXPECT_THAT(table, HasSubstr("avg_jct_s"));
  EXPECT_THAT(table, HasSubstr("120.2*"));
  EXPECT_THAT(ComparisonJson(c), HasSubstr("\"best\": [\n        \"las\"\n      ]"));
}

TEST(Compare, ARunWithoutAMetricShowsADash) {
  const Comparison c = Compare({Summary("a", R"({"avg_jct_s": 1})"), Summary("b", R"({"avg_jct_s": 2, "p99_jct_s": 5})")});
  EXPECT_THAT(ComparisonTable(c), HasSubstr("p99_jct_s"));
  EXPECT_THAT(ComparisonTable(c), HasSubstr("-"));
}

TEST(Compare, RejectsWhatIsNotAReplaySummary) {
  EXPECT_THAT(std::string(ParseRunSummary("[1, 2]", "x/summary.json", "x").status().message()),
              HasSubstr("x/summary.json: not a JSON object"));
  EXPECT_THAT(std::string(ParseRunSummary(R"({"protocol": "fgd"})", "y/summary.json", "y").status().message()),
              HasSubstr("no replay metrics"));
}

}  // namespace
}  // namespace ringmaster::simulator
