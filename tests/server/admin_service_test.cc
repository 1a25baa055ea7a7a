// The admin API end to end in one process: a Daemon (engine + extender +
// admin gRPC + journal) on 127.0.0.1 with ephemeral ports, driven through a
// gRPC stub. Cycles are run by calling Tick() (no wall-clock waiting).
#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <numbers>
#include <thread>
#include <vector>

#include "api/admin.grpc.pb.h"
#include "plugins/las.h"
#include "plugins/registry.h"
#include "server/admin/admin_convert.h"
#include "server/daemon/daemon.h"
#include "server/journal/journal.h"
#include "tests/support/builders.h"
#include "tests/support/status_matchers.h"

namespace ringmaster::server {
namespace {

using ringmaster::testing::ClusterBuilder;
using ringmaster::testing::JobBuilder;

class AdminApiTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/rm_admin_XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override {
    daemon_.reset();
    std::filesystem::remove_all(dir_);
  }
  void Start(std::string token = "", std::string policy_file = "") {
    DaemonOptions o;
    o.cluster = ClusterBuilder().NodesPerRack(2).Gpus(8).Build();
    o.state_dir = dir_;
    o.grpc_address = "127.0.0.1:0";
    o.admin_token = std::move(token);
    o.policy_file = std::move(policy_file);
    o.extender.learn_nodes = false;
    auto d = Daemon::Start(std::move(o), registry_);
    ASSERT_TRUE(d.ok()) << d.status();
    daemon_ = *std::move(d);
    stub_ = admin::Admin::NewStub(grpc::CreateChannel("127.0.0.1:" + std::to_string(daemon_->grpc_port()),
                                                      grpc::InsecureChannelCredentials()));
  }
  grpc::Status Submit(const scheduler::JobSpec& spec, const std::string& token = "") {
    admin::SubmitJobRequest req;
    *req.mutable_job() = JobSpecToProto(spec);
    admin::SubmitJobResponse resp;
    grpc::ClientContext ctx;
    if (!token.empty()) ctx.AddMetadata("authorization", "Bearer " + token);
    return stub_->SubmitJob(&ctx, req, &resp);
  }
  admin::Job Get(const std::string& name) {
    admin::GetJobRequest req;
    req.set_name(name);
    admin::Job j;
    grpc::ClientContext ctx;
    EXPECT_TRUE(stub_->GetJob(&ctx, req, &j).ok());
    return j;
  }

  std::string dir_;
  scheduler::PluginRegistry registry_ = plugins::BuiltinRegistry();
  std::unique_ptr<Daemon> daemon_;
  std::unique_ptr<admin::Admin::Stub> stub_;
};

// The wire format of a job's size stays admin.proto's three fields
// (min_member, elastic_min, elastic_max): journals and older clients read
// and write them; GangSize is their one reading.
TEST(AdminConvert, GangSizeKeepsTheWireFormat) {
  admin::JobSpec rigid = JobSpecToProto(JobBuilder("r").Gang(4).MinMember(3).Build());
  EXPECT_EQ(rigid.min_member(), 3);
  EXPECT_EQ(rigid.elastic_min(), 0);
  EXPECT_EQ(rigid.elastic_max(), 0);
  admin::JobSpec elastic = JobSpecToProto(JobBuilder("e").Gang(4).Elastic(2, 8).Build());
  EXPECT_EQ(elastic.min_member(), 2);  // the gang minimum, for readers that know no range
  EXPECT_EQ(elastic.elastic_min(), 2);
  EXPECT_EQ(elastic.elastic_max(), 8);
  for (int min_member : {0, 2}) {  // an older writer left min_member out or repeated the minimum
    elastic.set_min_member(min_member);
    auto back = JobSpecFromProto(elastic);
    ASSERT_TRUE(back.ok()) << back.status();
    EXPECT_EQ(back->size, (scheduler::GangSize{2, 8}));
  }
  auto every = JobSpecFromProto(JobSpecToProto(JobBuilder("a").Gang(4).Build()));
  ASSERT_TRUE(every.ok()) << every.status();
  EXPECT_EQ(every->size, scheduler::GangSize{});
  elastic.set_min_member(3);
  EXPECT_ERROR(JobSpecFromProto(elastic), absl::StatusCode::kInvalidArgument,
               "job 'e': min_member: 3 must equal the elastic minimum 2");
  elastic.set_min_member(0);
  elastic.set_elastic_max(0);
  EXPECT_ERROR(JobSpecFromProto(elastic), absl::StatusCode::kInvalidArgument, "job 'e': elastic: range [2, 0] is empty");
}

TEST_F(AdminApiTest, SubmittedGangRunsAndShowsWhereAndWhyOthersWait) {
  Start();
  ASSERT_TRUE(Submit(JobBuilder("big").Gang(2).GpusPerTask(8).Walltime(600'000).Build()).ok());
  ASSERT_TRUE(Submit(JobBuilder("next").Gang(1).GpusPerTask(8).Build()).ok());
  daemon_->Tick();
  admin::Job big = Get("big");
  EXPECT_EQ(big.phase(), "Running");
  EXPECT_EQ(big.tasks_ready(), 2);
  EXPECT_EQ(big.gpu_milli(), 16000);
  ASSERT_EQ(big.tasks_size(), 2);
  EXPECT_EQ(big.tasks(0).state(), "Running") << "no executor: the bind is taken as done";
  EXPECT_EQ(big.tasks(0).gpus_size(), 8);
  admin::Job next = Get("next");
  EXPECT_NE(next.phase(), "Running");
  EXPECT_FALSE(next.pending_reason().empty());
  // It may start once big's walltime is over: started + 600 s.
  EXPECT_EQ(next.expected_start_ms(), big.started_ms() + 600'000);

  admin::ListQueuesResponse queues;
  grpc::ClientContext qc;
  ASSERT_TRUE(stub_->ListQueues(&qc, admin::ListQueuesRequest(), &queues).ok());
  ASSERT_EQ(queues.queues_size(), 1);
  EXPECT_EQ(queues.queues(0).allocated().gpu_milli(), 16000);
  EXPECT_EQ(queues.queues(0).pending_jobs(), 1);
  EXPECT_EQ(queues.queues(0).running_jobs(), 1);

  admin::ListNodesResponse nodes;
  grpc::ClientContext nc;
  ASSERT_TRUE(stub_->ListNodes(&nc, admin::ListNodesRequest(), &nodes).ok());
  ASSERT_EQ(nodes.nodes_size(), 2);
  EXPECT_EQ(nodes.nodes(0).gpus_free(), 0);

  admin::ListJobsRequest only_running;
  only_running.add_phases("Running");
  admin::ListJobsResponse jobs;
  grpc::ClientContext jc;
  ASSERT_TRUE(stub_->ListJobs(&jc, only_running, &jobs).ok());
  ASSERT_EQ(jobs.jobs_size(), 1);
  EXPECT_EQ(jobs.jobs(0).name(), "big");
}

TEST_F(AdminApiTest, MalformedRequestsGetInvalidArgumentWithTheField) {
  Start();
  admin::SubmitJobRequest empty;
  admin::SubmitJobResponse resp;
  grpc::ClientContext c1;
  grpc::Status s = stub_->SubmitJob(&c1, empty, &resp);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(s.error_message(), "job: missing");

  admin::SubmitJobRequest bad;
  bad.mutable_job()->set_name("x");
  admin::Role* r = bad.mutable_job()->add_roles();
  r->set_replicas(1);
  r->set_gpu_count(2);
  r->set_gpu_milli(500);  // a share of more than one GPU
  grpc::ClientContext c2;
  s = stub_->SubmitJob(&c2, bad, &resp);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(s.error_message().find("job 'x': roles[0]"), std::string::npos) << s.error_message();

  bad.mutable_job()->set_topology_mode(static_cast<admin::JobSpec::TopologyMode>(9));
  grpc::ClientContext c3;
  s = stub_->SubmitJob(&c3, bad, &resp);
  EXPECT_NE(s.error_message().find("topology_mode: unknown value 9"), std::string::npos) << s.error_message();

  grpc::Status unknown_queue = Submit(JobBuilder("q").Queue("nope").Build());
  EXPECT_EQ(unknown_queue.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(unknown_queue.error_message().find("unknown queue 'nope'"), std::string::npos);

  admin::ListJobsRequest phase;
  phase.add_phases("Sleeping");
  admin::ListJobsResponse jobs;
  grpc::ClientContext c4;
  s = stub_->ListJobs(&c4, phase, &jobs);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);

  // Raw bytes that are not a SubmitJobRequest (a field tag whose varint
  // never ends): gRPC refuses them before the handler, the daemon stays up.
  grpc::GenericStub raw(grpc::CreateChannel("127.0.0.1:" + std::to_string(daemon_->grpc_port()),
                                            grpc::InsecureChannelCredentials()));
  const std::string garbage("\x0a\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff", 11);
  admin::SubmitJobRequest parsed;
  ASSERT_FALSE(parsed.ParseFromString(garbage)) << "the bytes must not parse";
  grpc::Slice slice(garbage);
  grpc::ByteBuffer request(&slice, 1), response;
  grpc::ClientContext c5;
  // On a completion queue this thread drains (the callback form runs its
  // callback on a gRPC thread through inlined template code, where TSan
  // cannot see gRPC's own hand-over and reports a race).
  grpc::CompletionQueue cq;
  grpc::Status refused;
  auto call = raw.PrepareUnaryCall(&c5, "/ringmaster.admin.Admin/SubmitJob", request, &cq);
  call->StartCall();
  call->Finish(&response, &refused, &c5);
  void* tag = nullptr;
  bool ok = false;
  ASSERT_TRUE(cq.Next(&tag, &ok));
  EXPECT_EQ(tag, &c5);
  cq.Shutdown();
  while (cq.Next(&tag, &ok)) {
  }
  EXPECT_EQ(refused.error_code(), grpc::StatusCode::INTERNAL) << refused.error_message();
  EXPECT_TRUE(Submit(JobBuilder("still-up").Build()).ok());
}

TEST_F(AdminApiTest, MutationsNeedTheTokenReadsDoNot) {
  Start("s3cret");
  EXPECT_EQ(Submit(JobBuilder("a").Build()).error_code(), grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_EQ(Submit(JobBuilder("a").Build(), "wrong").error_code(), grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_TRUE(Submit(JobBuilder("a").Build(), "s3cret").ok());
  admin::CancelJobRequest cancel;
  cancel.set_name("a");
  admin::CancelJobResponse cr;
  grpc::ClientContext c1;
  EXPECT_EQ(stub_->CancelJob(&c1, cancel, &cr).error_code(), grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_EQ(Get("a").name(), "a") << "reads are open";
}

// A journaled phase that is no JobPhase (a damaged or hand-edited journal)
// stops the daemon at start, naming the job; it is not cast into the engine.
TEST_F(AdminApiTest, AJournaledPhaseThatIsNoPhaseStopsTheStart) {
  Start();
  ASSERT_TRUE(Submit(JobBuilder("odd").Build()).ok());
  ASSERT_TRUE(daemon_->Shutdown().ok());
  daemon_.reset();
  {
    auto j = *Journal::Open(dir_);
    ASSERT_TRUE(j->SetPhase("odd", 99, /*terminal=*/false).get().ok());
  }
  DaemonOptions o;
  o.cluster = ClusterBuilder().NodesPerRack(2).Gpus(8).Build();
  o.state_dir = dir_;
  o.grpc_address = "127.0.0.1:0";
  o.extender.learn_nodes = false;
  auto d = Daemon::Start(std::move(o), registry_);
  ASSERT_ERROR(d, absl::StatusCode::kDataLoss, "journal: job 'odd': phase 99 is no phase");
  EXPECT_NE(d.status().message().find("job 'odd': phase 99 is no phase"), std::string::npos) << d.status();
}

TEST_F(AdminApiTest, AcknowledgedJobsComeBackAfterRestartRunningWhereTheyRan) {
  Start();
  ASSERT_TRUE(Submit(JobBuilder("run").Gang(2).GpusPerTask(4).Build()).ok());
  ASSERT_TRUE(Submit(JobBuilder("gone").Build()).ok());
  daemon_->Tick();
  admin::CancelJobRequest cancel;
  cancel.set_name("gone");
  admin::CancelJobResponse cr;
  grpc::ClientContext c1;
  ASSERT_TRUE(stub_->CancelJob(&c1, cancel, &cr).ok());
  const admin::Job before = Get("run");
  ASSERT_EQ(before.phase(), "Running");
  ASSERT_TRUE(daemon_->Shutdown().ok());
  daemon_.reset();

  Start();
  EXPECT_EQ(daemon_->recovered_jobs(), 2u);
  const admin::Job after = Get("run");
  EXPECT_EQ(after.phase(), "Running");
  EXPECT_EQ(after.generation(), before.generation());
  ASSERT_EQ(after.tasks_size(), 2);
  for (int i = 0; i < 2; ++i) {
    EXPECT_EQ(after.tasks(i).node(), before.tasks(i).node());
    EXPECT_EQ(after.tasks(i).gpus().size(), 4);
  }
  EXPECT_EQ(Get("gone").phase(), "Aborted");
  EXPECT_EQ(Submit(JobBuilder("run").Build()).error_code(), grpc::StatusCode::ALREADY_EXISTS);
}

// What the policy reads of a job at a moment, and las' order of the
// active jobs then (with `thresholds` seconds run and a 10 s level
// cooldown).
struct PolicyView {
  std::map<std::string, std::vector<int64_t>> jobs;  // attained, started, last stopped, last resize, in cooldown
  std::vector<std::string> las_order;
  bool operator==(const PolicyView&) const = default;
  friend void PrintTo(const PolicyView& v, std::ostream* os) {
    for (const auto& [name, values] : v.jobs) *os << name << ": " << ::testing::PrintToString(values) << "; ";
    *os << "las order " << ::testing::PrintToString(v.las_order);
  }
};
PolicyView ViewAt(const scheduler::Engine& engine, scheduler::Timestamp t, const std::string& thresholds) {
  auto made = plugins::LasPlugin::Create(scheduler::PluginArgs(
      "las", "p.yaml",
      {{"thresholds", {thresholds, 1, 1}}, {"byTime", {"true", 1, 1}}, {"levelCooldown", {"10", 1, 1}}}));
  EXPECT_TRUE(made.ok()) << made.status();
  auto& las = static_cast<plugins::LasPlugin&>(**made);
  const scheduler::State& st = engine.state();
  PolicyView v;
  std::vector<const scheduler::Job*> order;
  for (scheduler::JobId id : st.active_jobs()) {
    const scheduler::Job& j = st.job(id);
    v.jobs[j.name()] = {j.AttainedMilliMs(t), j.started(), j.last_stopped(), j.last_resize(),
                        las.InLevelCooldown(j, t)};
    order.push_back(&j);
  }
  // Higher rank first, then the earlier creation (the session's ties).
  std::stable_sort(order.begin(), order.end(), [&](const scheduler::Job* a, const scheduler::Job* b) {
    const int64_t ra = las.OrderRank(*a, t), rb = las.OrderRank(*b, t);
    return ra != rb ? ra > rb : a->created() < b->created();
  });
  for (const scheduler::Job* j : order) v.las_order.push_back(j->name());
  return v;
}

// A restart (SIGTERM, then serve again on the same --state) keeps what
// running jobs attained and their start and resize stamps: read at one
// moment before the restart, they are what the daemon that never stopped
// had, and las orders the jobs the same (young, which ran less, before
// old); the old daemon started every job afresh at the restart.
TEST_F(AdminApiTest, ARestartKeepsWhatRunningJobsAttainedTheirStampsAndLasOrder) {
  Start();
  ASSERT_TRUE(Submit(JobBuilder("old").GpusPerTask(8).Build()).ok());
  daemon_->Tick();
  ASSERT_EQ(Get("old").phase(), "Running");
  std::this_thread::sleep_for(std::chrono::milliseconds(400));
  ASSERT_TRUE(Submit(JobBuilder("young").GpusPerTask(8).Build()).ok());
  daemon_->Tick();
  ASSERT_EQ(Get("young").phase(), "Running");
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  const scheduler::Timestamp t = WallClock().Now();
  // A threshold between the two: old ran >= 0.45 s, young less by >= 0.4 s.
  std::string thresholds;
  daemon_->ReadEngine([&](const scheduler::Engine& e) {
    const int64_t old_ms = e.state().job(e.FindJob("old")).AttainedMilliMs(t) / 8000;
    const int64_t young_ms = e.state().job(e.FindJob("young")).AttainedMilliMs(t) / 8000;
    ASSERT_GE(old_ms - young_ms, 400);
    thresholds = std::to_string(static_cast<double>(old_ms + young_ms) / 2000);
  });
  PolicyView before;
  daemon_->ReadEngine([&](const scheduler::Engine& e) { before = ViewAt(e, t, thresholds); });
  EXPECT_EQ(before.las_order, (std::vector<std::string>{"young", "old"}));
  const int64_t started = Get("old").started_ms();
  ASSERT_TRUE(daemon_->Shutdown().ok());
  daemon_.reset();

  Start();
  ASSERT_EQ(Get("old").phase(), "Running");
  EXPECT_EQ(Get("old").started_ms(), started);
  PolicyView after;
  daemon_->ReadEngine([&](const scheduler::Engine& e) { after = ViewAt(e, t, thresholds); });
  EXPECT_EQ(after, before);
  EXPECT_EQ(after.las_order, (std::vector<std::string>{"young", "old"}));
}

// One HTTP/1.1 request to the daemon's extender port over a plain socket;
// the answer's body ("" when it failed).
std::string Http(uint16_t port, const std::string& method, const std::string& target, const std::string& body) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(port);
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  timeval tv{5, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    ::close(fd);
    return "";
  }
  const std::string req = method + " " + target + " HTTP/1.1\r\nHost: x\r\nConnection: close\r\nContent-Length: " +
                          std::to_string(body.size()) + "\r\n\r\n" + body;
  if (::write(fd, req.data(), req.size()) != static_cast<ssize_t>(req.size())) {
    ::close(fd);
    return "";
  }
  std::string got;
  char buf[4096];
  for (ssize_t n; (n = ::read(fd, buf, sizeof(buf))) > 0;) got.append(buf, n);
  ::close(fd);
  const size_t head = got.find("\r\n\r\n");
  return head == std::string::npos ? "" : got.substr(head + 4);
}

std::string GangPod(const std::string& name) {
  return R"({"metadata":{"name":")" + name + R"(","namespace":"ml","uid":"u-)" + name +
         R"(","annotations":{"scheduling.volcano.sh/group-name":"pair","scheduling.volcano.sh/group-min-member":"2"}},
         "spec":{"containers":[{"resources":{"limits":{"nvidia.com/gpu":"8"}}}]}})";
}

TEST_F(AdminApiTest, ExtenderReservationsAndBindingsSurviveARestartThroughTheJournal) {
  Start();
  admin::ListNodesResponse nodes;
  {
    grpc::ClientContext ctx;
    ASSERT_TRUE(stub_->ListNodes(&ctx, admin::ListNodesRequest(), &nodes).ok());
  }
  std::string names;
  for (const admin::Node& n : nodes.nodes()) names += (names.empty() ? "\"" : ",\"") + n.name() + "\"";
  auto filter = [&](const std::string& pod) {
    return Http(daemon_->http_port(), "POST", "/filter", R"({"Pod":)" + GangPod(pod) + R"(,"NodeNames":[)" + names + "]}");
  };
  auto passing = [](const std::string& answer) {
    const std::string key = R"("NodeNames":[")";
    const size_t at = answer.find(key);
    if (at == std::string::npos) return std::string();
    const size_t from = at + key.size();
    return answer.substr(from, answer.find('"', from) - from);
  };
  ASSERT_EQ(passing(filter("a")), "") << filter("a");  // 1 of 2 seen
  const std::string node_b = passing(filter("b"));
  const std::string node_a = passing(filter("a"));
  ASSERT_FALSE(node_b.empty());
  ASSERT_FALSE(node_a.empty());
  auto bind = [&](const std::string& pod, const std::string& node) {
    return Http(daemon_->http_port(), "POST", "/bind",
                R"({"PodName":")" + pod + R"(","PodNamespace":"ml","PodUID":"u-)" + pod + R"(","Node":")" + node + R"("})");
  };
  ASSERT_EQ(bind("b", node_b), R"({"Error":""})");
  // Journal commits are observed in /metrics.
  const std::string metrics = Http(daemon_->http_port(), "GET", "/metrics", "");
  EXPECT_NE(metrics.find("ringmaster_journal_write_duration_seconds_count "), std::string::npos);
  EXPECT_EQ(metrics.find("ringmaster_journal_write_duration_seconds_count 0\n"), std::string::npos) << metrics;
  ASSERT_TRUE(daemon_->Shutdown().ok());
  daemon_.reset();

  Start();
  // Both members are where they were: a passes its reserved node, b's bind
  // is known done, and a's bind goes through.
  EXPECT_EQ(passing(filter("a")), node_a);
  EXPECT_EQ(passing(filter("b")), node_b);
  EXPECT_EQ(bind("b", node_b), R"({"Error":""})");
  EXPECT_EQ(bind("a", node_a), R"({"Error":""})");
  // The engine holds the gang's GPUs again: both 8-GPU nodes are full.
  admin::ListNodesResponse after;
  grpc::ClientContext ctx;
  ASSERT_TRUE(stub_->ListNodes(&ctx, admin::ListNodesRequest(), &after).ok());
  ASSERT_EQ(after.nodes_size(), 2);
  for (const admin::Node& n : after.nodes()) EXPECT_EQ(n.gpus_free(), 0) << n.name();
}

TEST_F(AdminApiTest, InvalidPolicyIsRejectedWithItsErrorsAndTheOldStays) {
  Start();
  admin::UpdatePolicyRequest req;
  req.set_yaml("actions: \"allocate, shuffle\"\ntiers: []\n");
  admin::UpdatePolicyResponse resp;
  grpc::ClientContext c1;
  grpc::Status s = stub_->UpdatePolicy(&c1, req, &resp);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(s.error_message().find("UpdatePolicy:1:"), std::string::npos) << s.error_message();
  EXPECT_NE(s.error_message().find("unknown action 'shuffle'"), std::string::npos) << s.error_message();
  EXPECT_TRUE(Submit(JobBuilder("before").Build()).ok()) << "the old policy still schedules";

  req.set_yaml("actions: \"enqueue, allocate\"\ntiers:\n- plugins:\n  - name: gang\nqueues:\n- name: default\n- name: research\n  weight: 3\n");
  grpc::ClientContext c2;
  ASSERT_TRUE(stub_->UpdatePolicy(&c2, req, &resp).ok());
  EXPECT_TRUE(Submit(JobBuilder("r").Queue("research").Build()).ok()) << "the new queue exists";
  // The journaled policy is the one in force after a restart without --policy.
  ASSERT_TRUE(daemon_->Shutdown().ok());
  daemon_.reset();
  Start();
  EXPECT_EQ(Get("r").queue(), "research");
}

// proportion's usageHalfLife through the daemon on its wall clock: each
// queue's decayed usage in ListQueues, kept by an UpdatePolicy, and written
// at shutdown and given back at start (the journal's queue_usage).
TEST_F(AdminApiTest, QueuesShowTheirDecayedUsageWhichSurvivesAPolicyUpdateAndARestart) {
  auto policy = [](const std::string& queues) {
    return "actions: \"enqueue, allocate\"\ntiers:\n- plugins:\n  - name: gang\n- plugins:\n  - name: predicates\n"
           "  - name: proportion\n    arguments: {usageHalfLife: 3600}\nqueues:\n" + queues;
  };
  const std::string file = dir_ + "/policy.yaml";
  std::ofstream(file) << policy("- {name: a}\n- {name: b}\n");
  auto queues = [&] {
    admin::ListQueuesResponse resp;
    grpc::ClientContext c;
    EXPECT_TRUE(stub_->ListQueues(&c, admin::ListQueuesRequest(), &resp).ok());
    std::map<std::string, admin::Queue> by_name;
    for (const admin::Queue& q : resp.queues()) by_name[q.name()] = q;
    return by_name;
  };
  Start("", file);
  ASSERT_TRUE(Submit(JobBuilder("a0").Queue("a").GpusPerTask(8).Build()).ok());
  daemon_->Tick();
  ASSERT_EQ(Get("a0").phase(), "Running");
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  // a has held 8 GPUs for >= 0.3 s: U_a >= 2.4 GPU-s (decay over a 1 h
  // half-life: < 0.01 %), R_a = U ln 2 / 3600 s; b none.
  auto q = queues();
  EXPECT_EQ(q["a"].usage_half_life_ms(), 3'600'000);
  const double before = q["a"].usage_gpu_seconds();
  EXPECT_GE(before, 2.4 * 0.999);
  EXPECT_LT(before, 8 * 60);
  EXPECT_NEAR(q["a"].usage_gpus(), before * std::numbers::ln2 / 3600, 1e-9);
  EXPECT_EQ(q["b"].usage_gpu_seconds(), 0);
  // A new policy with queue c: a keeps its usage (the time to the next
  // cycle counts as no use: a 1 h half-life takes < 0.01 % a second), c
  // starts from none.
  admin::UpdatePolicyRequest req;
  req.set_yaml(policy("- {name: a}\n- {name: b}\n- {name: c}\n"));
  admin::UpdatePolicyResponse resp;
  grpc::ClientContext c1;
  ASSERT_TRUE(stub_->UpdatePolicy(&c1, req, &resp).ok());
  q = queues();
  EXPECT_GE(q["a"].usage_gpu_seconds(), before * 0.999);
  EXPECT_EQ(q["c"].usage_half_life_ms(), 3'600'000);
  EXPECT_EQ(q["c"].usage_gpu_seconds(), 0);
  const double at_stop = q["a"].usage_gpu_seconds();
  // Restarted: a's usage comes back (a0 held its GPUs until the shutdown
  // wrote it; the time down decays it by < 0.01 %).
  ASSERT_TRUE(daemon_->Shutdown().ok());
  daemon_.reset();
  Start("", file);
  q = queues();
  EXPECT_GE(q["a"].usage_gpu_seconds(), at_stop * 0.999);
  EXPECT_LT(q["a"].usage_gpu_seconds(), at_stop + 8 * 60);
  EXPECT_EQ(q["b"].usage_gpu_seconds(), 0);
}

// With usageWeight each queue shows the level of the weight its deserved
// share reads: a, which held the whole cluster while b asked for none,
// has used all of the past use against its weight's half: rho_a = 1 / (1/2)
// = 2, p_a = 1 + 1 x (2 - 1) = 2, level floor(8 log2 2) = 8 (its weight
// counts half); b used nothing: level 0. docs/POLICY.md, "Deserved shares
// that read decayed usage".
TEST_F(AdminApiTest, QueuesShowTheLevelOfTheWeightTheirDeservedShareReads) {
  const std::string file = dir_ + "/policy.yaml";
  std::ofstream(file) << "actions: \"enqueue, allocate\"\ntiers:\n- plugins:\n  - name: gang\n- plugins:\n"
                         "  - name: predicates\n  - name: proportion\n    arguments: {usageHalfLife: 3600, "
                         "usageWeight: 1}\nqueues:\n- {name: a}\n- {name: b}\n";
  Start("", file);
  ASSERT_TRUE(Submit(JobBuilder("a0").Queue("a").Gang(2).GpusPerTask(8).Build()).ok());
  daemon_->Tick();
  ASSERT_EQ(Get("a0").phase(), "Running");
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  ASSERT_TRUE(Submit(JobBuilder("b0").Queue("b").GpusPerTask(8).Build()).ok());
  daemon_->Tick();  // both ask for GPUs now: the levels at this session's open
  ASSERT_NE(Get("b0").phase(), "Running");
  admin::ListQueuesResponse resp;
  grpc::ClientContext c;
  ASSERT_TRUE(stub_->ListQueues(&c, admin::ListQueuesRequest(), &resp).ok());
  std::map<std::string, admin::Queue> q;
  for (const admin::Queue& one : resp.queues()) q[one.name()] = one;
  EXPECT_TRUE(q["a"].usage_weighted());
  EXPECT_EQ(q["a"].usage_weight_level(), 8);
  EXPECT_TRUE(q["b"].usage_weighted());
  EXPECT_EQ(q["b"].usage_weight_level(), 0);
}

// Without usageHalfLife the queues show no decayed usage (nor a weight level).
TEST_F(AdminApiTest, WithoutAHalfLifeQueuesShowNoDecayedUsage) {
  Start();
  admin::ListQueuesResponse resp;
  grpc::ClientContext c;
  ASSERT_TRUE(stub_->ListQueues(&c, admin::ListQueuesRequest(), &resp).ok());
  ASSERT_GT(resp.queues_size(), 0);
  for (const admin::Queue& q : resp.queues()) {
    EXPECT_EQ(q.usage_half_life_ms(), 0);
    EXPECT_EQ(q.usage_gpu_seconds(), 0);
    EXPECT_FALSE(q.usage_weighted());
  }
}

TEST_F(AdminApiTest, WatchEventsStreamsSubmitAndStart) {
  Start();
  // A watch starts at the newest event when the server has read its
  // request, which the client cannot see. `filtered` opens first; `all`
  // (no filter) is then probed until it streams: a helper submits probe
  // jobs until `all` shows one of them.
  grpc::ClientContext filtered_ctx;
  admin::WatchEventsRequest only_w;
  only_w.set_job("w");
  auto filtered = stub_->WatchEvents(&filtered_ctx, only_w);
  std::vector<admin::Event> filtered_events;
  std::thread filtered_reader([&] {
    admin::Event e;
    while (filtered->Read(&e)) filtered_events.push_back(e);
  });
  grpc::ClientContext ctx;
  auto reader = stub_->WatchEvents(&ctx, admin::WatchEventsRequest());
  std::atomic<bool> seen{false};
  std::thread prober([&] {
    for (int i = 0; !seen && i < 3000; ++i) {
      EXPECT_TRUE(Submit(JobBuilder("probe-" + std::to_string(i)).Build()).ok());
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
  });
  admin::Event e;
  bool read = reader->Read(&e);
  seen = true;
  prober.join();
  ASSERT_TRUE(read);
  ASSERT_EQ(e.kind(), "submit");
  ASSERT_EQ(e.job().rfind("probe-", 0), 0u) << e.job();

  ASSERT_TRUE(Submit(JobBuilder("other").Build()).ok());
  ASSERT_TRUE(Submit(JobBuilder("w").Gang(1).GpusPerTask(1).Build()).ok());
  daemon_->Tick();
  // Every event after the probes, in order: the two submissions, then the
  // start of each of them (and of the probes, which need no GPU each).
  std::vector<std::string> w_events;
  auto next = [&] {
    do {
      if (!reader->Read(&e)) return false;
    } while (e.job().rfind("probe-", 0) == 0);
    return true;
  };
  ASSERT_TRUE(next());
  EXPECT_EQ(e.kind() + " " + e.job(), "submit other");
  ASSERT_TRUE(next());
  EXPECT_EQ(e.kind() + " " + e.job(), "submit w");
  const int64_t w_submit = e.sequence();
  int64_t w_start = 0;
  while (w_start == 0 && next()) {
    if (e.job() == "w") {
      EXPECT_EQ(e.kind(), "start");
      EXPECT_NE(e.detail().find("generation 1"), std::string::npos) << e.detail();
      w_start = e.sequence();
    }
  }
  ASSERT_NE(w_start, 0) << "no start event for w";
  ctx.TryCancel();
  filtered_ctx.TryCancel();
  filtered_reader.join();
  // The filtered watch, open before any of these (it may have missed events
  // the helper's probing caught for `all`, never one of another job), gave
  // w's events only, and the same ones.
  for (const admin::Event& f : filtered_events) {
    EXPECT_EQ(f.job(), "w") << "filtered to its job: " << f.kind() << " " << f.job();
    EXPECT_TRUE(f.sequence() == w_submit || f.sequence() == w_start) << f.sequence();
  }
}

}  // namespace
}  // namespace ringmaster::server
