// The extender's records in serve's journal, byte for byte (issue 26 §6: the
// gang records' format moved to server/extender/gang_store.h): a scenario
// that uses every field writes exactly the records that the code before the
// move wrote, and a journal written then restores now. The expected records
// below were captured from that code (commit 732e2fe). Then the reader's
// own cases: optional fields, and errors that name the record.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <string>
#include <vector>

#include "plugins/registry.h"
#include "scheduler/policy.h"
#include "server/extender/extender.h"
#include "server/loop/cycle_loop.h"
#include "tests/server/extender_fixtures.h"

namespace ringmaster::server {
namespace {

using nlohmann::json;

using extender_fixtures::MemoryStore;
using extender_fixtures::Pod;
// Node objects here carry a uid (the pinned records have it).
json Node(const std::string& name, int gpus, const std::string& rack) {
  return extender_fixtures::Node(name, gpus, rack, /*uid=*/true);
}

// The records as C++, to paste when the format changes on purpose.
std::string AsCode(const std::vector<StoredRecord>& records) {
  std::string out = "{\n";
  for (const StoredRecord& r : records) {
    out += "    {\"" + r.kind + "\", \"" + r.name + "\",\n     R\"(" + r.value + ")\"},\n";
  }
  return out + "}";
}

void ExpectRecords(const std::vector<StoredRecord>& got, const std::vector<StoredRecord>& want) {
  EXPECT_EQ(got.size(), want.size());
  bool same = got.size() == want.size();
  for (size_t i = 0; i < std::min(got.size(), want.size()); ++i) {
    EXPECT_EQ(got[i].kind + " " + got[i].name, want[i].kind + " " + want[i].name) << "record " << i;
    EXPECT_EQ(got[i].value, want[i].value) << got[i].kind << " " << got[i].name;
    same = same && got[i].kind == want[i].kind && got[i].name == want[i].name && got[i].value == want[i].value;
  }
  EXPECT_TRUE(same) << "the records written, as code:\n" << AsCode(got);
}

// What the scenario below leaves in the store.
const std::vector<StoredRecord> kWritten = {
    {"node", "n1",
     R"({"metadata":{"labels":{"nvidia.com/gpu.product":"H100","topology.ringmaster.io/rack":"r1"},"name":"n1","uid":"uid-n1"},"status":{"allocatable":{"cpu":"96","memory":"1Ti","nvidia.com/gpu":"8"}}})"},
    {"node", "n2",
     R"({"metadata":{"labels":{"nvidia.com/gpu.product":"H100","topology.ringmaster.io/rack":"r1"},"name":"n2","uid":"uid-n2"},"status":{"allocatable":{"cpu":"96","memory":"1Ti","nvidia.com/gpu":"8"}}})"},
    {"node", "n3",
     R"({"metadata":{"labels":{"nvidia.com/gpu.product":"H100","topology.ringmaster.io/rack":"r2"},"name":"n3","uid":"uid-n3"},"status":{"allocatable":{"cpu":"96","memory":"1Ti","nvidia.com/gpu":"8"}}})"},
    {"pod", "ml/s",
     R"({"metadata":{"annotations":{},"labels":{},"name":"s","namespace":"ml","uid":"uid-s"},"spec":{"containers":[{"name":"trainer","resources":{"limits":{"nvidia.com/gpu":"1"},"requests":{"cpu":"4","memory":"32Gi"}}}]}})"},
    {"gang", "ml/s",
     R"({"attempt":2,"created":31000,"deadline":61000,"generation":1,"job":"ml/s#1","members":[{"bound":false,"gpus":[0],"node":"n3","pod":"ml/s","stopping":false,"task":0}],"min_member":1,"unresolvable":""})"},
    {"pod", "ml/w-0",
     R"({"metadata":{"annotations":{"scheduling.volcano.sh/group-min-member":"3"},"labels":{"scheduling.x-k8s.io/pod-group":"bert"},"name":"w-0","namespace":"ml","uid":"uid-w-0"},"spec":{"containers":[{"name":"trainer","resources":{"limits":{"nvidia.com/gpu":"2"},"requests":{"cpu":"4","memory":"32Gi"}}}]}})"},
    {"gang", "ml/bert",
     R"({"attempt":1,"created":31000,"deadline":61000,"generation":1,"job":"ml/bert","members":[{"bound":true,"gpus":[1,2],"node":"n3","pod":"ml/w-0","stopping":false,"task":0},{"bound":false,"gpus":[3,4],"node":"n3","pod":"ml/w-1","stopping":false,"task":1},{"bound":false,"gpus":[5,6],"node":"n3","pod":"ml/w-2","stopping":false,"task":2}],"min_member":3,"unresolvable":""})"},
    {"pod", "ml/w-1",
     R"({"metadata":{"annotations":{"scheduling.volcano.sh/group-min-member":"3"},"labels":{"scheduling.x-k8s.io/pod-group":"bert"},"name":"w-1","namespace":"ml","uid":"uid-w-1"},"spec":{"containers":[{"name":"trainer","resources":{"limits":{"nvidia.com/gpu":"2"},"requests":{"cpu":"4","memory":"32Gi"}}}]}})"},
    {"pod", "ml/w-2",
     R"({"metadata":{"annotations":{"scheduling.volcano.sh/group-min-member":"3"},"labels":{"scheduling.x-k8s.io/pod-group":"bert"},"name":"w-2","namespace":"ml","uid":"uid-w-2"},"spec":{"containers":[{"name":"trainer","resources":{"limits":{"nvidia.com/gpu":"2"},"requests":{"cpu":"4","memory":"32Gi"}}}]}})"},
    {"pod", "ml/x-0",
     R"({"metadata":{"annotations":{"scheduling.volcano.sh/group-min-member":"2"},"labels":{"scheduling.x-k8s.io/pod-group":"half"},"name":"x-0","namespace":"ml","uid":"uid-x-0"},"spec":{"containers":[{"name":"trainer","resources":{"limits":{"nvidia.com/gpu":"2"},"requests":{"cpu":"4","memory":"32Gi"}}}]}})"},
    {"gang", "ml/half",
     R"({"attempt":0,"deadline":-1,"members":[{"bound":false,"gpus":[],"node":"","pod":"ml/x-0","stopping":false,"task":-1}],"min_member":2,"unresolvable":""})"},
    {"pod", "ml/u-0",
     R"({"metadata":{"annotations":{},"labels":{"scheduling.x-k8s.io/pod-group":"nomin"},"name":"u-0","namespace":"ml","uid":"uid-u-0"},"spec":{"containers":[{"name":"trainer","resources":{"limits":{"nvidia.com/gpu":"1"},"requests":{"cpu":"4","memory":"32Gi"}}}]}})"},
    {"gang", "ml/nomin",
     R"({"attempt":0,"deadline":-1,"members":[{"bound":false,"gpus":[],"node":"","pod":"ml/u-0","stopping":false,"task":-1}],"min_member":0,"unresolvable":"gang ml/nomin: min member unknown: annotate its pods with scheduling.volcano.sh/group-min-member or give the PodGroup's minMember"})"},
    {"pod", "ml/c-0",
     R"({"metadata":{"annotations":{"scheduling.volcano.sh/group-min-member":"2"},"labels":{"scheduling.x-k8s.io/pod-group":"c"},"name":"c-0","namespace":"ml","uid":"uid-c-0"},"spec":{"containers":[{"name":"trainer","resources":{"limits":{"nvidia.com/gpu":"1"},"requests":{"cpu":"4","memory":"32Gi"}}}]}})"},
    {"gang", "ml/c",
     R"({"attempt":1,"cancel_deadline":41000,"cancelled":true,"created":31000,"deadline":-1,"generation":1,"job":"ml/c","members":[{"bound":false,"gpus":[7],"node":"n3","pod":"ml/c-0","stopping":true,"task":0},{"bound":false,"gpus":[0],"node":"n1","pod":"ml/c-1","stopping":true,"task":1}],"min_member":2,"unresolvable":""})"},
    {"pod", "ml/c-1",
     R"({"metadata":{"annotations":{"scheduling.volcano.sh/group-min-member":"2"},"labels":{"scheduling.x-k8s.io/pod-group":"c"},"name":"c-1","namespace":"ml","uid":"uid-c-1"},"spec":{"containers":[{"name":"trainer","resources":{"limits":{"nvidia.com/gpu":"1"},"requests":{"cpu":"4","memory":"32Gi"}}}]}})"},
};

// What the store holds once kWritten is restored, 2 s later (every gang's
// record is written again).
const std::vector<StoredRecord> kRestored = {
    {"gang", "ml/s",
     R"({"attempt":2,"created":31000,"deadline":61000,"generation":1,"job":"ml/s#1","members":[{"bound":false,"gpus":[0],"node":"n3","pod":"ml/s","stopping":false,"task":0}],"min_member":1,"unresolvable":""})"},
    {"gang", "ml/bert",
     R"({"attempt":1,"created":31000,"deadline":61000,"generation":1,"job":"ml/bert","members":[{"bound":true,"gpus":[1,2],"node":"n3","pod":"ml/w-0","stopping":false,"task":0},{"bound":false,"gpus":[3,4],"node":"n3","pod":"ml/w-1","stopping":false,"task":1},{"bound":false,"gpus":[5,6],"node":"n3","pod":"ml/w-2","stopping":false,"task":2}],"min_member":3,"unresolvable":""})"},
    {"gang", "ml/half",
     R"({"attempt":0,"deadline":-1,"members":[{"bound":false,"gpus":[],"node":"","pod":"ml/x-0","stopping":false,"task":-1}],"min_member":2,"unresolvable":""})"},
    {"gang", "ml/nomin",
     R"({"attempt":0,"deadline":-1,"members":[{"bound":false,"gpus":[],"node":"","pod":"ml/u-0","stopping":false,"task":-1}],"min_member":0,"unresolvable":"gang ml/nomin: min member unknown: annotate its pods with scheduling.volcano.sh/group-min-member or give the PodGroup's minMember"})"},
    {"gang", "ml/c",
     R"({"attempt":1,"cancel_deadline":41000,"cancelled":true,"created":31000,"deadline":-1,"generation":1,"job":"ml/c","members":[{"bound":false,"gpus":[7],"node":"n3","pod":"ml/c-0","stopping":true,"task":0},{"bound":false,"gpus":[0],"node":"n1","pod":"ml/c-1","stopping":true,"task":1}],"min_member":2,"unresolvable":""})"},
};

class ExtenderJournalFormat : public ::testing::Test {
 protected:
  void TearDown() override {
    extender_.reset();  // before its loop and engine
    loop_.reset();
  }
  void Make() {
    extender_.reset();
    loop_.reset();
    scheduler::EngineOptions opts;
    opts.auto_confirm_binds = false;
    opts.cancel_grace_ms = 10'000;
    engine_ = *scheduler::Engine::Create(*topology::Cluster::Build(TierSpecs(DefaultTopologyLabels()), {}), policy_,
                                         registry_, clock_, opts);
    loop_ = std::make_unique<CycleLoop>(*engine_, engine_mu_);
    ExtenderOptions o;
    o.reservation_timeout_ms = 30'000;
    o.store = &store_;
    extender_ = std::make_unique<Extender>(*engine_, clock_, o, nullptr, loop_.get());
  }
  ExtenderArgs Args(const json& pod) const {
    ExtenderArgs a;
    a.pod = pod;
    a.nodes = NodeObjects({Node("n1", 8, "r1"), Node("n2", 8, "r1"), Node("n3", 8, "r2")});
    return a;
  }
  void BindAll(const std::string& prefix, int n) {
    for (int i = 0; i < n; ++i) {
      const std::string name = prefix + std::to_string(i);
      const std::optional<std::string> node = extender_->ReservedNode("ml/" + name);
      ASSERT_TRUE(node.has_value()) << name;
      ASSERT_TRUE(extender_->Bind({name, "ml", "uid-" + name, *node}).error.empty()) << name;
    }
  }
  // Every field of a gang record: a gang of one formed again after its
  // reservation expired (attempt 1), a gang reserved with one member bound
  // (deadline, task, node, gpus, bound), one still forming, one whose min
  // member is unknown (unresolvable), one cancelled while bound (stopping,
  // cancel_deadline).
  void Scenario() {
    Make();
    extender_->Filter(Args(Pod("s", "", 0, 1)));
    ASSERT_TRUE(extender_->ReservedNode("ml/s").has_value());
    clock_.Advance(30'000);
    extender_->Tick();  // expired: forgotten, its records removed
    ASSERT_FALSE(extender_->ReservedNode("ml/s").has_value());
    extender_->Filter(Args(Pod("s", "", 0, 1)));  // ml/s#1
    ASSERT_TRUE(engine_->FindJob("ml/s#1").valid());
    for (int i = 0; i < 3; ++i) extender_->Filter(Args(Pod("w-" + std::to_string(i), "bert", 3, 2)));
    BindAll("w-", 1);
    extender_->Filter(Args(Pod("x-0", "half", 2, 2)));
    extender_->Filter(Args(Pod("u-0", "nomin", 0, 1)));
    for (int i = 0; i < 2; ++i) extender_->Filter(Args(Pod("c-" + std::to_string(i), "c", 2, 1)));
    BindAll("c-", 2);
    const scheduler::JobId c = engine_->FindJob("ml/c");
    {
      absl::MutexLock lock(&engine_mu_);
      ASSERT_TRUE(engine_->CancelJob(c).ok());
      extender_->JobCancelledLocked(c);
    }
    extender_->Tick();  // the cancel's evictions: c's members are stopping
    ASSERT_EQ(engine_->state().job(c).phase(), scheduler::JobPhase::kCancelling);
  }

  scheduler::PluginRegistry registry_ = plugins::BuiltinRegistry();
  scheduler::Policy policy_ = scheduler::DefaultPolicy();
  scheduler::ManualClock clock_{1'000};
  absl::Mutex engine_mu_;  // declared before what uses it: destroyed last
  std::unique_ptr<scheduler::Engine> engine_;
  std::unique_ptr<CycleLoop> loop_;
  std::unique_ptr<Extender> extender_;
  MemoryStore store_;
};

TEST_F(ExtenderJournalFormat, EveryRecordIsWrittenByteForByteAsBefore) {
  Scenario();
  ExpectRecords(store_.records(), kWritten);
}

TEST_F(ExtenderJournalFormat, AJournalWrittenBeforeRestoresAndIsWrittenAgainAsBefore) {
  clock_.Advance(32'000);  // where the scenario ended, and 2 s more
  Make();
  ASSERT_TRUE(extender_->Restore(kWritten).ok());
  EXPECT_EQ(engine_->state().cluster().num_nodes(), 3u);
  EXPECT_EQ(extender_->gang_count(), 5u);
  for (const std::string pod : {"ml/s", "ml/w-0", "ml/w-1", "ml/w-2"}) {
    EXPECT_TRUE(extender_->ReservedNode(pod).has_value()) << pod;
  }
  EXPECT_FALSE(extender_->ReservedNode("ml/c-0").has_value()) << "cancelled: stopping, not reserved";
  ASSERT_EQ(extender_->bindings().size(), 1u);
  EXPECT_EQ(extender_->bindings()[0].first, "ml/w-0");
  const scheduler::State& st = engine_->state();
  EXPECT_EQ(st.job(engine_->FindJob("ml/s#1")).phase(), scheduler::JobPhase::kRunning);
  EXPECT_EQ(st.job(engine_->FindJob("ml/bert")).phase(), scheduler::JobPhase::kRunning);
  EXPECT_EQ(st.job(engine_->FindJob("ml/c")).phase(), scheduler::JobPhase::kCancelling);
  EXPECT_EQ(st.job(engine_->FindJob("ml/c")).allocated().gpu_milli(), 2'000);
  ExpectRecords(store_.records(), kRestored);
  // The forming gang completes; the one whose min member is unknown still waits.
  const ExtenderFilterResult half = extender_->Filter(Args(Pod("x-1", "half", 2, 2)));
  EXPECT_TRUE(half.node_names.has_value() || (half.nodes && half.nodes->size() == 1u));
  const ExtenderFilterResult nomin = extender_->Filter(Args(Pod("u-0", "nomin", 0, 1)));
  ASSERT_EQ(nomin.failed_and_unresolvable_nodes.count("n1"), 1u);
  EXPECT_NE(nomin.failed_and_unresolvable_nodes.at("n1").find("min member unknown"), std::string::npos);
}

// --- The format's reader (gang_store.h) ----------------------------------------

const std::map<std::string, json>& StoredPods() {
  static const auto* pods = new std::map<std::string, json>{{"ml/w-0", Pod("w-0", "g", 1, 1)}};
  return *pods;
}

TEST(ExtenderGangRecord, ARecordReadsBackIntoItsGangAndJob) {
  const std::string text =
      R"({"attempt":1,"cancel_deadline":41000,"cancelled":true,"created":31000,"deadline":-1,"generation":1,"job":"ml/g","members":[{"bound":false,"gpus":[7],"node":"n3","pod":"ml/w-0","stopping":true,"task":0}],"min_member":1,"unresolvable":""})";
  absl::StatusOr<StoredGang> g = ReadGang("ml/g", json::parse(text), StoredPods());
  ASSERT_TRUE(g.ok()) << g.status();
  EXPECT_EQ(g->attempt, 1);
  ASSERT_TRUE(g->job.has_value());
  EXPECT_EQ(g->job->name, "ml/g");
  EXPECT_EQ(g->job->created, 31'000);
  EXPECT_EQ(g->job->deadline, -1);
  ASSERT_EQ(g->gang.members.size(), 1u);
  EXPECT_EQ(g->gang.members[0].uid, "uid-w-0");  // from its Pod record
  EXPECT_EQ(g->gang.members[0].gpus, std::vector<int16_t>{7});
  EXPECT_TRUE(g->gang.members[0].stopping);
  EXPECT_TRUE(g->gang.cancelled);
  EXPECT_EQ(g->gang.cancel_deadline, 41'000);
  // Written again (the job's fields come from the engine's job: left out
  // here, as for a gang not submitted yet).
  EXPECT_EQ(GangRecord(g->gang, g->attempt, nullptr),
            R"({"attempt":1,"cancel_deadline":41000,"cancelled":true,"deadline":-1,"members":[{"bound":false,"gpus":[7],"node":"n3","pod":"ml/w-0","stopping":true,"task":0}],"min_member":1,"unresolvable":""})");
}

TEST(ExtenderGangRecord, ARecordFromBeforeCancelsWereKeptReads) {
  // No "stopping", "cancelled" nor "cancel_deadline"; not submitted: no job
  // fields, and then no deadline is needed either.
  absl::StatusOr<StoredGang> g = ReadGang(
      "ml/g",
      json::parse(R"({"attempt":0,"members":[{"bound":false,"gpus":[],"node":"","pod":"ml/w-0","task":-1}],"min_member":2,"unresolvable":""})"),
      StoredPods());
  ASSERT_TRUE(g.ok()) << g.status();
  EXPECT_FALSE(g->job.has_value());
  EXPECT_EQ(g->gang.members[0].task, kNoTask);
  EXPECT_FALSE(g->gang.members[0].stopping);
  EXPECT_FALSE(g->gang.cancelled);
  EXPECT_EQ(g->gang.cancel_deadline, -1);
}

TEST(ExtenderGangRecord, WhatDoesNotReadIsDataLossNamingTheRecord) {
  auto gang_error = [](const std::string& text) {
    return std::string(ReadGang("ml/g", json::parse(text), StoredPods()).status().message());
  };
  EXPECT_EQ(gang_error(R"({"attempt":0,"deadline":-1,"members":[],"min_member":1,"unresolvable":""})"),
            "journal: extender gang 'ml/g': no members");
  const std::string wrong_type = gang_error(R"({"attempt":0,"members":[],"min_member":"one","unresolvable":""})");
  EXPECT_EQ(wrong_type.rfind("journal: extender gang 'ml/g': [json.exception.type_error", 0), 0u) << wrong_type;
  const std::string no_job_time = gang_error(
      R"({"attempt":0,"deadline":-1,"job":"ml/g","members":[{"bound":false,"gpus":[],"node":"","pod":"ml/w-0","task":0}],"min_member":1,"unresolvable":""})");
  EXPECT_NE(no_job_time.find("'created' not found"), std::string::npos) << no_job_time;
  const absl::Status bad_pod = ReadGang(
      "ml/g", json::parse(R"({"attempt":0,"members":[{"bound":false,"gpus":[],"node":"","pod":"ml/w-0","task":-1}],"min_member":1,"unresolvable":""})"),
      {{"ml/w-0", json::object()}}).status();
  EXPECT_EQ(bad_pod.code(), absl::StatusCode::kDataLoss);
  EXPECT_EQ(std::string(bad_pod.message()).rfind("journal: extender gang 'ml/g': pod ml/w-0: ", 0), 0u) << bad_pod;

  auto no_node = [](const std::string&, const json&) { return absl::OkStatus(); };
  absl::StatusOr<StoredRecords> r = ReadRecords({{"pod", "ml/w-0", "{}"}, {"thing", "x", "{}"}}, no_node);
  EXPECT_EQ(r.status(), absl::DataLossError("journal: extender thing 'x': unknown kind"));
  r = ReadRecords({{"node", "n1", "{"}}, no_node);
  EXPECT_EQ(r.status(), absl::DataLossError("journal: extender node 'n1': not JSON"));
  // The nodes are handed over in order, as read; the first error stops the reading.
  std::vector<std::string> seen;
  auto refuse_n2 = [&](const std::string& name, const json&) {
    seen.push_back(name);
    return name == "n2" ? absl::InvalidArgumentError("no labels") : absl::OkStatus();
  };
  r = ReadRecords({{"node", "n1", "{}"}, {"node", "n2", "{}"}, {"gang", "ml/g", "{"}}, refuse_n2);
  EXPECT_EQ(r.status(), absl::DataLossError("journal: extender node 'n2': no labels"));
  EXPECT_EQ(seen, (std::vector<std::string>{"n1", "n2"}));
}

}  // namespace
}  // namespace ringmaster::server
