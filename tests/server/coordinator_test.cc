// Tests for server/coordinator/coordinator.h: generations, membership changes, the
// generation-scoped key-value store and bad input. A fake clock drives
// heartbeat timeouts; Tick() is called by hand.
#include "server/coordinator/coordinator.h"

#include <cmath>
#include <thread>

#include <gtest/gtest.h>

namespace ringmaster::server {
namespace {

class CoordinatorTest : public ::testing::Test {
 protected:
  CoordinatorTest() : coord_(Options()) {}

  CoordinatorOptions Options() {
    CoordinatorOptions o;
    o.heartbeat_timeout = absl::Seconds(5);
    o.adoption_grace = absl::Seconds(5);
    o.max_value_bytes = 64;
    o.max_keys_per_generation = 4;
    o.failure_report_grace = absl::Seconds(1);
    o.now = [this] { return now_; };
    return o;
  }

  Subscription Join(const std::string& worker, int desired = 0,
                    int64_t last_gen = 0, int last_rank = -1,
                    int last_world = 0) {
    api::JoinRequest r;
    r.set_job("j");
    r.set_worker_id(worker);
    r.set_desired_workers(desired);
    r.set_last_generation(last_gen);
    r.set_last_rank(last_rank);
    r.set_last_world_size(last_world);
    auto sub = coord_.Join(r);
    EXPECT_TRUE(sub.ok()) << sub.status();
    return *sub;
  }

  // The update waiting for `sub`, if any.
  std::optional<api::MembershipUpdate> Next(const Subscription& sub) {
    auto u = coord_.NextUpdate(sub, absl::ZeroDuration());
    EXPECT_TRUE(u.ok()) << u.status();
    return u.ok() ? *u : std::nullopt;
  }

  static std::vector<std::string> Members(const api::MembershipUpdate& u) {
    std::vector<std::string> out;
    for (const auto& m : u.members()) out.push_back(m.worker_id());
    return out;
  }

  absl::Time now_ = absl::FromUnixSeconds(1000);
  Coordinator coord_;
};

TEST_F(CoordinatorTest, FirstGenerationWaitsForTheWholeGang) {
  auto a = Join("a", /*desired=*/3);
  auto b = Join("b");
  EXPECT_FALSE(Next(a).has_value());  // 2 of 3 joined: nothing yet
  auto c = Join("c");
  auto u = Next(b);
  ASSERT_TRUE(u.has_value());
  EXPECT_EQ(u->generation(), 1);
  EXPECT_EQ(u->reason(), api::REASON_INITIAL);
  EXPECT_EQ(Members(*u), (std::vector<std::string>{"a", "b", "c"}));
  EXPECT_EQ(u->rank(), 1);
  EXPECT_EQ(u->world_size(), 3);
  EXPECT_FALSE(u->members(0).has_state());  // nobody holds state yet
  EXPECT_FALSE(Next(b).has_value());        // delivered once
}

TEST_F(CoordinatorTest, ResizeShrinksKeepingRankOrderThenGrowsFromStandby) {
  auto a = Join("a", 4);
  auto b = Join("b");
  auto c = Join("c");
  auto d = Join("d");
  ASSERT_EQ(Next(a)->generation(), 1);
  api::ResizeRequest r;
  r.set_job("j");
  r.set_workers(2);
  ASSERT_EQ(*coord_.Resize(r), 2);
  auto u = Next(d);
  EXPECT_EQ(u->reason(), api::REASON_PLANNED_SHRINK);
  EXPECT_EQ(Members(*u), (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(u->rank(), -1);  // d was shrunk away
  EXPECT_TRUE(u->members(1).has_state());
  // c and d leave; e and f wait as standby; a resize to 4 takes them.
  for (const char* w : {"c", "d"}) {
    api::LeaveRequest l;
    l.set_job("j");
    l.set_worker_id(w);
    ASSERT_TRUE(coord_.Leave(l).ok());
  }
  auto e = Join("e");
  auto f = Join("f");
  EXPECT_EQ(coord_.GetJob("j")->generation(), 2);  // no slot for them yet
  r.set_workers(4);
  ASSERT_EQ(*coord_.Resize(r), 3);
  u = Next(f);
  EXPECT_EQ(u->reason(), api::REASON_GROW);
  EXPECT_EQ(Members(*u), (std::vector<std::string>{"a", "b", "e", "f"}));
  EXPECT_EQ(u->rank(), 3);
  EXPECT_TRUE(u->members(0).has_state());
  EXPECT_FALSE(u->members(2).has_state());  // newcomer gets state by sync
}

TEST_F(CoordinatorTest, NewcomersAFewMsApartEnterOneGrowGeneration) {
  auto a = Join("a", 2);
  auto b = Join("b");
  ASSERT_EQ(Next(a)->generation(), 1);
  api::ResizeRequest r;
  r.set_job("j");
  r.set_workers(4);
  ASSERT_EQ(*coord_.Resize(r), 1);  // nobody to grow with yet
  // c leaves a free slot: it waits out the settle window...
  auto c = Join("c");
  EXPECT_EQ(coord_.GetJob("j")->generation(), 1);
  now_ += absl::Milliseconds(5);
  coord_.Tick();
  EXPECT_FALSE(Next(a).has_value());
  Next(c);  // generation 1, as a standby
  // ...and d, 5 ms later, fills the last one: both enter at once, in one
  // generation (not one each, which made the members skip c's).
  auto d = Join("d");
  auto u = Next(c);
  ASSERT_TRUE(u.has_value());
  EXPECT_EQ(u->generation(), 2);
  EXPECT_EQ(u->reason(), api::REASON_GROW);
  EXPECT_EQ(Members(*u), (std::vector<std::string>{"a", "b", "c", "d"}));
  now_ += absl::Seconds(1);
  coord_.Tick();
  EXPECT_EQ(coord_.GetJob("j")->generation(), 2);
}

TEST_F(CoordinatorTest, LoneNewcomerEntersAfterTheSettleWindow) {
  auto a = Join("a", 2);
  Join("b");
  ASSERT_EQ(Next(a)->generation(), 1);
  api::ResizeRequest r;
  r.set_job("j");
  r.set_workers(4);
  ASSERT_TRUE(coord_.Resize(r).ok());
  auto c = Join("c");
  now_ += Options().grow_settle - absl::Milliseconds(1);
  coord_.Tick();
  EXPECT_EQ(coord_.GetJob("j")->generation(), 1);
  now_ += absl::Milliseconds(1);
  coord_.Tick();
  auto u = Next(c);
  ASSERT_TRUE(u.has_value());
  EXPECT_EQ(u->generation(), 2);
  EXPECT_EQ(u->reason(), api::REASON_GROW);
  EXPECT_EQ(Members(*u), (std::vector<std::string>{"a", "b", "c"}));
  // A failure meanwhile lets a waiting newcomer in with it, at once.
  r.set_workers(5);
  ASSERT_EQ(*coord_.Resize(r), 2);
  auto d = Join("d");  // 1 of 2 free slots: waits
  EXPECT_EQ(coord_.GetJob("j")->generation(), 2);
  coord_.Disconnect(c);
  u = Next(d);
  ASSERT_TRUE(u.has_value());
  EXPECT_EQ(u->reason(), api::REASON_FAILURE);
  EXPECT_EQ(Members(*u), (std::vector<std::string>{"a", "b", "d"}));
}

TEST_F(CoordinatorTest, RingOrderDecidesRanks) {
  Join("a", 3);
  Join("b");
  auto c = Join("c");
  api::ResizeRequest r;
  r.set_job("j");
  r.set_workers(3);
  for (const char* w : {"c", "a", "b"}) r.add_ring_order(w);
  coord_.Resize(r).IgnoreError();
  auto u = Next(c);
  ASSERT_TRUE(u.has_value());
  EXPECT_EQ(u->generation(), 2);  // order changed: a new generation
  EXPECT_EQ(Members(*u), (std::vector<std::string>{"c", "a", "b"}));
  EXPECT_EQ(u->rank(), 0);
}

TEST_F(CoordinatorTest, DroppedStreamIsAFailureGeneration) {
  auto a = Join("a", 3);
  auto b = Join("b");
  auto c = Join("c");
  Next(a);
  coord_.Disconnect(b);
  auto u = Next(a);
  ASSERT_TRUE(u.has_value());
  EXPECT_EQ(u->generation(), 2);
  EXPECT_EQ(u->reason(), api::REASON_FAILURE);
  EXPECT_EQ(u->last_failure_generation(), 2);
  EXPECT_EQ(Members(*u), (std::vector<std::string>{"a", "c"}));
}

TEST_F(CoordinatorTest, MissedHeartbeatsAreAFailureGeneration) {
  auto a = Join("a", 2);
  auto b = Join("b");
  Next(a);
  now_ += absl::Seconds(3);
  api::HeartbeatRequest hb;
  hb.set_job("j");
  hb.set_worker_id("a");
  ASSERT_TRUE(coord_.Heartbeat(hb).ok());
  now_ += absl::Seconds(3);  // b silent for 6 s > 5 s, a for 3 s
  coord_.Tick();
  auto u = Next(a);
  ASSERT_TRUE(u.has_value());
  EXPECT_EQ(u->reason(), api::REASON_FAILURE);
  EXPECT_EQ(Members(*u), (std::vector<std::string>{"a"}));
  // b's stream is over: its subscription is gone.
  EXPECT_EQ(coord_.NextUpdate(b, absl::ZeroDuration()).status().code(),
            absl::StatusCode::kCancelled);
}

TEST_F(CoordinatorTest, FailureReportForcesReformAndStaleReportsAreIgnored) {
  auto a = Join("a", 2);
  Join("b");
  Next(a);
  api::ReportFailureRequest f;
  f.set_job("j");
  f.set_reporter("a");
  f.set_generation(1);
  // Nobody is known dead: the report waits out its grace period first.
  EXPECT_EQ(*coord_.ReportFailure(f), 1);
  coord_.Tick();
  EXPECT_FALSE(Next(a).has_value());
  now_ += absl::Seconds(1);
  coord_.Tick();  // still nobody dead: everyone re-forms
  EXPECT_EQ(coord_.GetJob("j")->generation(), 2);
  EXPECT_EQ(Members(*Next(a)), (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(*coord_.ReportFailure(f), 2);  // about generation 1: ignored
  f.set_generation(2);
  f.set_suspect("b");
  EXPECT_EQ(*coord_.ReportFailure(f), 3);
  EXPECT_EQ(Members(*Next(a)), (std::vector<std::string>{"a"}));
}

TEST_F(CoordinatorTest, FailureReportThenDroppedStreamMakesOneGeneration) {
  auto a = Join("a", 3);
  auto b = Join("b");
  Join("c");
  Next(a);
  api::ReportFailureRequest f;
  f.set_job("j");
  f.set_reporter("a");
  f.set_generation(1);
  EXPECT_EQ(*coord_.ReportFailure(f), 1);  // c's death not seen yet
  coord_.Disconnect(b);                    // now it is (b died)
  now_ += absl::Seconds(2);
  coord_.Tick();  // the pending report is about generation 1: done with
  auto u = Next(a);
  ASSERT_TRUE(u.has_value());
  EXPECT_EQ(u->generation(), 2);
  EXPECT_EQ(Members(*u), (std::vector<std::string>{"a", "c"}));
  EXPECT_FALSE(Next(a).has_value());  // no second, useless generation
}

TEST_F(CoordinatorTest, KvIsScopedByGeneration) {
  auto a = Join("a", 2);
  Join("b");
  Next(a);
  api::KvSetRequest set;
  set.set_job("j");
  set.set_generation(1);
  set.set_key("k");
  set.set_value("v1");
  ASSERT_TRUE(coord_.KvSet(set).ok());
  api::KvGetRequest get;
  get.set_job("j");
  get.set_generation(1);
  get.set_key("k");
  EXPECT_EQ(**coord_.KvGet(get), "v1");
  api::ResizeRequest r;
  r.set_job("j");
  r.set_workers(1);
  coord_.Resize(r).IgnoreError();  // generation 2
  EXPECT_EQ(coord_.KvGet(get).status().code(),
            absl::StatusCode::kFailedPrecondition);  // stale generation
  EXPECT_EQ(coord_.KvSet(set).code(), absl::StatusCode::kFailedPrecondition);
  get.set_generation(2);
  EXPECT_FALSE(coord_.KvGet(get)->has_value());  // not carried over
  get.set_generation(3);
  EXPECT_EQ(coord_.KvGet(get).status().code(),
            absl::StatusCode::kInvalidArgument);  // future generation
}

TEST_F(CoordinatorTest, BadInputGetsClearErrors) {
  auto a = Join("a", 1);
  Next(a);
  api::KvSetRequest set;
  set.set_job("nope");
  set.set_generation(1);
  set.set_key("k");
  auto s = coord_.KvSet(set);
  EXPECT_EQ(s.code(), absl::StatusCode::kNotFound);
  EXPECT_NE(s.message().find("unknown job 'nope'"), std::string::npos);
  set.set_job("j");
  set.set_value(std::string(65, 'x'));  // limit is 64 bytes
  s = coord_.KvSet(set);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("exceeds the limit"), std::string::npos);
  set.set_value("ok");
  for (int i = 0; i < 4; ++i) {
    set.set_key("k" + std::to_string(i));
    ASSERT_TRUE(coord_.KvSet(set).ok());
  }
  set.set_key("k5");  // a fifth key; limit is 4
  EXPECT_EQ(coord_.KvSet(set).code(), absl::StatusCode::kResourceExhausted);
  set.set_key("");
  EXPECT_EQ(coord_.KvSet(set).code(), absl::StatusCode::kInvalidArgument);
  api::ResizeRequest r;
  r.set_job("j");
  r.set_workers(0);
  EXPECT_EQ(coord_.Resize(r).status().code(),
            absl::StatusCode::kInvalidArgument);
  r.set_job("nope");
  r.set_workers(2);
  EXPECT_EQ(coord_.Resize(r).status().code(), absl::StatusCode::kNotFound);
  api::JoinRequest j;
  j.set_job("j");
  EXPECT_EQ(coord_.Join(j).status().code(),
            absl::StatusCode::kInvalidArgument);  // no worker id
  api::HeartbeatRequest hb;
  hb.set_job("j");
  hb.set_worker_id("ghost");
  EXPECT_EQ(coord_.Heartbeat(hb).status().code(), absl::StatusCode::kNotFound);
  api::CommitProgressRequest cp;
  cp.set_job("j");
  cp.set_generation(1);
  cp.set_position(-1);
  EXPECT_EQ(coord_.CommitProgress(cp).code(),
            absl::StatusCode::kInvalidArgument);
}

TEST_F(CoordinatorTest, KvWaitEndsOnKeysTimeoutOrNewGeneration) {
  auto a = Join("a", 1);
  Next(a);
  api::KvWaitRequest w;
  w.set_job("j");
  w.set_generation(1);
  w.add_keys("x");
  w.set_timeout_ms(20);
  EXPECT_EQ(coord_.KvWait(w).status().code(),
            absl::StatusCode::kDeadlineExceeded);
  w.set_timeout_ms(10000);
  std::thread writer([&] {
    absl::SleepFor(absl::Milliseconds(20));
    api::KvSetRequest set;
    set.set_job("j");
    set.set_generation(1);
    set.set_key("x");
    set.set_value("x-value");
    coord_.KvSet(set).IgnoreError();
  });
  w.set_return_values(true);
  auto values = coord_.KvWait(w);
  ASSERT_TRUE(values.ok());
  EXPECT_EQ(*values, std::vector<std::string>{"x-value"});
  writer.join();
  w.clear_keys();
  w.add_keys("never");
  std::thread resizer([&] {
    absl::SleepFor(absl::Milliseconds(20));
    Join("b");  // target 1: b is standby until the job grows
    api::ResizeRequest r;
    r.set_job("j");
    r.set_workers(2);
    coord_.Resize(r).IgnoreError();
  });
  EXPECT_EQ(coord_.KvWait(w).status().code(), absl::StatusCode::kAborted);
  resizer.join();
}

TEST_F(CoordinatorTest, RestartedCoordinatorReadoptsJobWithLargerGeneration) {
  // A fresh coordinator; the workers report generation 7 of a 2-member job.
  auto b = Join("b", 0, /*last_gen=*/7, /*last_rank=*/1, /*last_world=*/2);
  EXPECT_FALSE(Next(b).has_value());  // waits for the other member
  auto a = Join("a", 0, 7, 0, 2);
  auto u = Next(b);
  ASSERT_TRUE(u.has_value());
  EXPECT_EQ(u->generation(), 8);
  EXPECT_EQ(u->reason(), api::REASON_RECOVERY);
  EXPECT_EQ(Members(*u), (std::vector<std::string>{"a", "b"}));  // old ranks
  EXPECT_TRUE(u->members(0).has_state());
}

TEST_F(CoordinatorTest, ReadoptionGivesUpOnMissingMembersAfterGrace) {
  auto a = Join("a", 0, 4, 0, 3);
  Join("b", 0, 4, 1, 3);  // c never comes back
  coord_.Tick();
  EXPECT_FALSE(Next(a).has_value());
  now_ += absl::Seconds(6);
  coord_.Tick();
  auto u = Next(a);
  ASSERT_TRUE(u.has_value());
  EXPECT_EQ(u->generation(), 5);
  EXPECT_EQ(u->reason(), api::REASON_FAILURE);
  EXPECT_EQ(Members(*u), (std::vector<std::string>{"a", "b"}));
}

TEST_F(CoordinatorTest, FinishedJobPublishesNothingAndRefusesJoins) {
  auto a = Join("a", 2);
  auto b = Join("b");
  Next(a);
  api::LeaveRequest l;
  l.set_job("j");
  l.set_worker_id("a");
  l.set_finished(true);
  ASSERT_TRUE(coord_.Leave(l).ok());
  coord_.Disconnect(b);
  EXPECT_EQ(coord_.GetJob("j")->generation(), 1);
  api::JoinRequest j;
  j.set_job("j");
  j.set_worker_id("c");
  EXPECT_EQ(coord_.Join(j).status().code(),
            absl::StatusCode::kFailedPrecondition);
}

}  // namespace
}  // namespace ringmaster::server

namespace ringmaster::server {
namespace {

// Speed reports (docs/SHIM.md, "Speed reports"): rank 0's measured speed at
// a commit counts for the size of the generation it was made in: its GPUs
// (the members' GPUs) and nodes (their distinct hosts); a report of an older
// generation, or from a worker that is not rank 0, is dropped; bad values are
// refused.
TEST(CoordinatorSpeed, ReportsAreKeptByTheGenerationsSizeAndOldOnesDropped) {
  CoordinatorOptions o;
  absl::Time now = absl::FromUnixSeconds(1000);
  o.now = [&] { return now; };
  Coordinator coord(o);
  auto join = [&](const std::string& id, const std::string& host, std::vector<int32_t> gpus, int desired) {
    api::JoinRequest r;
    r.set_job("j");
    r.set_worker_id(id);
    r.set_host(host);
    for (int32_t g : gpus) r.add_gpus(g);
    r.set_desired_workers(desired);
    auto sub = coord.Join(r);
    EXPECT_TRUE(sub.ok()) << sub.status();
    return *sub;
  };
  auto a = join("a", "h1", {0, 1}, 2);
  auto b = join("b", "h2", {0, 1}, 0);
  ASSERT_TRUE(coord.NextUpdate(a, absl::ZeroDuration()).ok());
  auto commit = [&](int64_t gen, double seconds, double samples) {
    api::CommitProgressRequest cp;
    cp.set_job("j");
    cp.set_worker_id("a");
    cp.set_generation(gen);
    cp.set_step(10);
    cp.set_position(100);
    cp.set_step_seconds(seconds);
    cp.set_step_samples(samples);
    return coord.CommitProgress(cp);
  };
  ASSERT_TRUE(commit(1, 0.5, 256).ok());
  ASSERT_TRUE(commit(1, 0.7, 0).ok());  // samples unknown: counted for seconds only
  ASSERT_TRUE(commit(1, 0, 0).ok());    // not measured: nothing kept
  api::CommitProgressRequest other;  // from rank 1: not the reporter, dropped
  other.set_job("j");
  other.set_worker_id("b");
  other.set_generation(1);
  other.set_step_seconds(50);
  ASSERT_TRUE(coord.CommitProgress(other).ok());
  auto st = coord.GetJob("j");
  ASSERT_TRUE(st.ok());
  ASSERT_EQ(st->speed_size(), 1);
  EXPECT_EQ(st->speed(0).gpus(), 4) << "two members of two GPUs";
  EXPECT_EQ(st->speed(0).nodes(), 2) << "on hosts h1 and h2";
  EXPECT_DOUBLE_EQ(st->speed(0).step_seconds(), 0.6) << "the mean of 0.5 and 0.7";
  EXPECT_DOUBLE_EQ(st->speed(0).step_samples(), 256) << "over the reports that gave samples";
  EXPECT_EQ(st->speed(0).reports(), 2);
  // Shrunk to one member: a late report of generation 1 is dropped, one of
  // generation 2 counts for 2 GPUs on 1 node.
  api::ResizeRequest r;
  r.set_job("j");
  r.set_workers(1);
  ASSERT_TRUE(coord.Resize(r).ok());
  auto g = coord.GetJob("j");
  ASSERT_TRUE(g.ok());
  ASSERT_EQ(g->generation(), 2);
  ASSERT_EQ(g->members_size(), 1);
  ASSERT_TRUE(commit(1, 9.0, 0).ok());
  ASSERT_TRUE(commit(2, 0.4, 128).ok());
  st = coord.GetJob("j");
  ASSERT_TRUE(st.ok());
  ASSERT_EQ(st->speed_size(), 2);
  EXPECT_EQ(st->speed(0).gpus(), 2);
  EXPECT_EQ(st->speed(0).nodes(), 1);
  EXPECT_DOUBLE_EQ(st->speed(0).step_seconds(), 0.4);
  EXPECT_DOUBLE_EQ(st->speed(1).step_seconds(), 0.6) << "generation 1's mean unchanged by its late report";
  // The daemon's reader (SpeedLearner) gets the same means, and a count of
  // every report so far.
  const std::vector<Coordinator::SpeedReports> all = coord.AllSpeedReports();
  ASSERT_EQ(all.size(), 1u);
  EXPECT_EQ(all[0].job, "j");
  EXPECT_EQ(all[0].reports, 3);
  ASSERT_EQ(all[0].sizes.size(), 2u);
  EXPECT_EQ(all[0].sizes[1].gpus, 4);
  EXPECT_EQ(all[0].sizes[1].nodes, 2);
  EXPECT_DOUBLE_EQ(all[0].sizes[1].step_seconds, 0.6);
  EXPECT_DOUBLE_EQ(all[0].sizes[1].step_samples, 256);
  EXPECT_EQ(all[0].sizes[1].reports, 2);
  // Refused: what no clock measures.
  absl::Status bad = commit(2, -1, 0);
  EXPECT_EQ(bad.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(bad.message().find("step_seconds must be a number of seconds"), std::string::npos) << bad;
  bad = commit(2, std::nan(""), 0);
  EXPECT_EQ(bad.code(), absl::StatusCode::kInvalidArgument);
  bad = commit(2, 0.4, -5);
  EXPECT_EQ(bad.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(bad.message().find("step_samples must be"), std::string::npos) << bad;
}

}  // namespace
}  // namespace ringmaster::server
