// Tests for the C API (worker_shim/ringmaster_shim.h) against an in-process
// coordinator; ranks are threads.
#include "worker_shim/ringmaster_shim.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <string>
#include <thread>

#include "server/coordinator/coordinator_service.h"
#include "tests/worker_shim/test_world.h"

namespace {

TEST(CApi, TwoWorkersAllReduceCommitAndLeave) {
  auto server = *ringmaster::server::CoordinatorServer::Start(
      "127.0.0.1:0", ringmaster::server::CoordinatorOptions());
  const std::string addr = server->address();
  std::vector<std::function<void()>> fns;
  for (int i = 0; i < 2; ++i) {
    fns.push_back([&, i] {
      const std::string worker = "c" + std::to_string(i);
      rm_shim* s = rm_shim_create(addr.c_str(), "capi", worker.c_str(), 2,
                                  "gloo");
      ASSERT_NE(s, nullptr);
      double state[2] = {0, 0};
      ASSERT_EQ(rm_shim_register(s, "state", state, sizeof(state)), RM_OK)
          << rm_shim_last_error(s);
      ASSERT_EQ(rm_shim_start(s), RM_OK) << rm_shim_last_error(s);
      EXPECT_EQ(rm_shim_world_size(s), 2);
      EXPECT_EQ(rm_shim_generation(s), 1);
      int64_t v[2] = {rm_shim_rank(s) + 1, 10};
      ASSERT_EQ(rm_shim_allreduce(s, v, 2, RM_INT64, RM_SUM), RM_OK);
      EXPECT_EQ(v[0], 3);  // 1 + 2
      EXPECT_EQ(v[1], 20);
      EXPECT_EQ(rm_shim_allreduce(s, v, 2, static_cast<rm_dtype>(9), RM_SUM),
                RM_ERROR);
      EXPECT_NE(std::string(rm_shim_last_error(s)).find("dtype"),
                std::string::npos);
      EXPECT_EQ(rm_shim_report_step(s, -1, 0), RM_ERROR);
      EXPECT_NE(std::string(rm_shim_last_error(s)).find("report_step: seconds (-1)"), std::string::npos)
          << rm_shim_last_error(s);
      EXPECT_EQ(rm_shim_report_step(s, 0.25, 64), RM_OK);
      EXPECT_EQ(rm_shim_commit(s, 1, 64), RM_OK);
      EXPECT_EQ(rm_shim_step_boundary(s), RM_OK);
      EXPECT_EQ(rm_shim_barrier(s), RM_OK);
      EXPECT_EQ(rm_shim_leave(s, 1), RM_OK);
      rm_shim_destroy(s);
    });
  }
  ringmaster::shim::testing::RunRanks(fns);
  auto job = server->core().GetJob("capi");
  EXPECT_EQ(job->committed_position(), 64);
  // Rank 0's report went with its commit: 2 workers without GPUs on one host.
  ASSERT_EQ(job->speed_size(), 1);
  EXPECT_EQ(job->speed(0).gpus(), 2);
  EXPECT_DOUBLE_EQ(job->speed(0).step_seconds(), 0.25);
  EXPECT_DOUBLE_EQ(job->speed(0).step_samples(), 64);
}

TEST(CApi, KeyValueStoreAndLastReformation) {
  auto server = *ringmaster::server::CoordinatorServer::Start(
      "127.0.0.1:0", ringmaster::server::CoordinatorOptions());
  const std::string addr = server->address();
  std::vector<std::function<void()>> fns;
  for (int i = 0; i < 2; ++i) {
    fns.push_back([&, i] {
      const std::string worker = "k" + std::to_string(i);
      rm_shim* s = rm_shim_create(addr.c_str(), "kv", worker.c_str(), 2,
                                  "gloo");
      ASSERT_EQ(rm_shim_set_reform_delay(s, 0), RM_OK);
      rm_reform_info info;
      EXPECT_EQ(rm_shim_last_reform(s, &info), RM_ERROR);  // not formed yet
      ASSERT_EQ(rm_shim_start(s), RM_OK) << rm_shim_last_error(s);
      ASSERT_EQ(rm_shim_last_reform(s, &info), RM_OK);
      EXPECT_EQ(info.generation, 1);
      EXPECT_EQ(info.world_size, 2);
      EXPECT_EQ(info.rank, rm_shim_rank(s));
      EXPECT_EQ(info.reason, 1);  // initial
      EXPECT_EQ(info.sync_root, -1);  // nobody held state
      EXPECT_EQ(info.rolled_back, 0);
      EXPECT_LE(info.published_unix_us, info.formed_unix_us);
      EXPECT_EQ(rm_shim_latest_generation(s), 1);
      EXPECT_EQ(rm_shim_latest_failure_generation(s), 0);
      const void* value = nullptr;
      size_t bytes = 0;
      // No wait: an absent key is RM_OK with no value.
      ASSERT_EQ(rm_shim_kv_get(s, 1, "absent", -1, &value, &bytes), RM_OK);
      EXPECT_EQ(value, nullptr);
      const std::string key = "from" + std::to_string(rm_shim_rank(s));
      const std::string mine = "v" + std::to_string(rm_shim_rank(s));
      ASSERT_EQ(rm_shim_kv_set(s, 1, key.c_str(), mine.data(), mine.size()),
                RM_OK);
      const std::string other = "from" + std::to_string(1 - rm_shim_rank(s));
      const char* keys[] = {other.c_str()};
      ASSERT_EQ(rm_shim_kv_wait(s, 1, keys, 1, 10000), RM_OK)
          << rm_shim_last_error(s);
      ASSERT_EQ(rm_shim_kv_get(s, 1, other.c_str(), 10000, &value, &bytes),
                RM_OK);
      EXPECT_EQ(std::string(static_cast<const char*>(value), bytes),
                "v" + std::to_string(1 - rm_shim_rank(s)));
      // A key that never comes: the wait ends at its timeout.
      EXPECT_EQ(rm_shim_kv_get(s, 1, "never", 50, &value, &bytes), RM_ERROR);
      EXPECT_NE(std::string(rm_shim_last_error(s)).find("DEADLINE_EXCEEDED"),
                std::string::npos);
      // A generation that does not exist yet is refused.
      EXPECT_EQ(rm_shim_kv_set(s, 7, "k", "x", 1), RM_ERROR);
      EXPECT_EQ(rm_shim_barrier(s), RM_OK);
      EXPECT_EQ(rm_shim_leave(s, 1), RM_OK);
      rm_shim_destroy(s);
    });
  }
  ringmaster::shim::testing::RunRanks(fns);
}

// A worker that vanishes (destroyed without leaving: its stream drops) makes
// the coordinator publish a failure generation, which the survivor's
// rm_shim_latest_failure_generation names; a planned change would not.
TEST(CApi, LatestFailureGenerationNamesTheGenerationAPeerFailureMade) {
  auto server = *ringmaster::server::CoordinatorServer::Start(
      "127.0.0.1:0", ringmaster::server::CoordinatorOptions());
  const std::string addr = server->address();
  std::vector<std::function<void()>> fns;
  for (int i = 0; i < 2; ++i) {
    fns.push_back([&, i] {
      const std::string worker = "f" + std::to_string(i);
      rm_shim* s = rm_shim_create(addr.c_str(), "capi-fail", worker.c_str(),
                                  2, "gloo");
      ASSERT_NE(s, nullptr);
      ASSERT_EQ(rm_shim_start(s), RM_OK) << rm_shim_last_error(s);
      EXPECT_EQ(rm_shim_latest_failure_generation(s), 0);
      ASSERT_EQ(rm_shim_barrier(s), RM_OK) << rm_shim_last_error(s);
      if (i == 1) {  // gone without a word
        rm_shim_destroy(s);
        return;
      }
      const auto deadline =
          std::chrono::steady_clock::now() + std::chrono::seconds(20);
      while (rm_shim_latest_failure_generation(s) == 0 &&
             std::chrono::steady_clock::now() < deadline) {
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
      }
      const int64_t failed = rm_shim_latest_failure_generation(s);
      EXPECT_GT(failed, rm_shim_generation(s));
      EXPECT_EQ(failed, rm_shim_latest_generation(s));
      rm_shim_destroy(s);
    });
  }
  ringmaster::shim::testing::RunRanks(fns);
}

TEST(CApi, MissingSettingsGiveAHandleThatReportsTheError) {
  ::unsetenv("RINGMASTER_JOB");
  rm_shim* s = rm_shim_create("127.0.0.1:1", nullptr, "w", 1, "gloo");
  ASSERT_NE(s, nullptr);
  EXPECT_NE(std::string(rm_shim_last_error(s)).find("job"), std::string::npos);
  EXPECT_EQ(rm_shim_start(s), RM_ERROR);
  EXPECT_EQ(rm_shim_rank(s), -1);
  rm_shim_destroy(s);
  rm_shim* bad = rm_shim_create("127.0.0.1:1", "j", "w", 1, "carrier-pigeon");
  EXPECT_NE(std::string(rm_shim_last_error(bad)).find("unknown backend"),
            std::string::npos);
  rm_shim_destroy(bad);
}

}  // namespace
