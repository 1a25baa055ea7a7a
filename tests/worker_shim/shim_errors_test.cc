// What a user reads when the coordinator cannot be reached: a worker started
// with an address where nothing listens (or where nothing answers), a gang
// that never forms, and a coordinator lost (and restarted) mid-training.
// Each checks the log lines the shim writes (captured from spdlog's default
// logger) and the errors it returns.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <functional>
#include <iostream>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <spdlog/sinks/base_sink.h>
#include <spdlog/spdlog.h>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "common/logging.h"
#include "server/coordinator/coordinator_service.h"
#include "tests/worker_shim/test_world.h"
#include "worker_shim/backend_factory.h"
#include "worker_shim/ringmaster_shim.h"
#include "worker_shim/shim.h"
#include "tests/support/status_matchers.h"

namespace ringmaster::shim {
namespace {

// Every line logged while it is installed, with the time it came.
class CaptureSink : public spdlog::sinks::base_sink<std::mutex> {
 public:
  struct Line {
    std::string text;
    absl::Time at;
  };

  // The first line containing every one of `parts`, waiting up to
  // `timeout` for it.
  std::optional<Line> WaitFor(const std::vector<std::string>& parts,
                              absl::Duration timeout) {
    absl::MutexLock lock(&mu_);
    std::optional<Line> found;
    auto ready = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      for (const Line& l : lines_) {
        bool all = true;
        for (const auto& p : parts) all = all && absl::StrContains(l.text, p);
        if (all) {
          found = l;
          return true;
        }
      }
      return false;
    };
    mu_.AwaitWithTimeout(absl::Condition(&ready), timeout);
    return found;
  }

  std::string All() {
    absl::MutexLock lock(&mu_);
    std::string out;
    for (const Line& l : lines_) absl::StrAppend(&out, l.text, "\n");
    return out;
  }

 protected:
  void sink_it_(const spdlog::details::log_msg& msg) override {
    absl::MutexLock lock(&mu_);
    const auto level = spdlog::level::to_string_view(msg.level);
    lines_.push_back({absl::StrCat("level=", std::string(level.data(), level.size()), " ",
                                   std::string(msg.payload.data(), msg.payload.size())),
                      absl::Now()});
  }
  void flush_() override {}

 private:
  absl::Mutex mu_;
  std::vector<Line> lines_ ABSL_GUARDED_BY(mu_);
};

// A TCP port on 127.0.0.1 where nothing listens (bound, then released).
int FreePort() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  EXPECT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
  socklen_t n = sizeof a;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &n);
  ::close(fd);
  return ntohs(a.sin_port);
}

class ShimErrors : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(common::InitLogging("info").ok());
    sink_ = std::make_shared<CaptureSink>();
    spdlog::default_logger()->sinks().push_back(sink_);
  }
  void TearDown() override {
    shims_.clear();  // their threads log: gone before the sink is removed
    server_.reset();
    auto& sinks = spdlog::default_logger()->sinks();
    std::erase(sinks, sink_);
    if (HasFailure()) std::cerr << "captured log:\n" << sink_->All();
  }

  std::unique_ptr<Shim> MakeShim(const std::string& address,
                                 const std::string& worker, int desired,
                                 absl::Duration membership_timeout) {
    ShimOptions o;
    o.client.address = address;
    o.client.job = "job";
    o.client.worker_id = worker;
    o.client.desired_workers = desired;
    o.client.heartbeat_interval = absl::Milliseconds(200);
    o.membership_timeout = membership_timeout;
    return *Shim::Create(o, *MakeBackend("gloo", absl::Seconds(10)));
  }

  // Retries for a while: a restarted coordinator's old listener may linger.
  void StartCoordinator(const std::string& address) {
    server::CoordinatorOptions o;
    o.heartbeat_timeout = absl::Seconds(10);
    absl::StatusOr<std::unique_ptr<server::CoordinatorServer>> s;
    for (int i = 0; i < 100; ++i) {
      s = server::CoordinatorServer::Start(address, o, absl::Milliseconds(50));
      if (s.ok()) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    ASSERT_TRUE(s.ok()) << s.status();
    server_ = *std::move(s);
  }

  // Two workers in generation 1 of "job".
  void StartTwo(absl::Duration membership_timeout) {
    shims_.clear();
    shims_.push_back(MakeShim(server_->address(), "w0", 2, membership_timeout));
    shims_.push_back(MakeShim(server_->address(), "w1", 2, membership_timeout));
    testing::RunRanks({[&] { ASSERT_TRUE(shims_[0]->Start().ok()); },
                       [&] { ASSERT_TRUE(shims_[1]->Start().ok()); }});
    ASSERT_EQ(shims_[0]->world_size(), 2);
  }

  std::shared_ptr<CaptureSink> sink_;
  std::unique_ptr<server::CoordinatorServer> server_;
  std::vector<std::unique_ptr<Shim>> shims_;
};

TEST(FormatSeconds, WholeOrTenthsOfSecondsNeverNanoseconds) {
  EXPECT_EQ(FormatSeconds(absl::Seconds(60) - absl::Nanoseconds(552)), "60 s");
  EXPECT_EQ(FormatSeconds(absl::Milliseconds(1500)), "1.5 s");
  EXPECT_EQ(FormatSeconds(absl::Milliseconds(2970)), "3 s");
  EXPECT_EQ(FormatSeconds(absl::Milliseconds(250)), "250 ms");
  EXPECT_EQ(FormatSeconds(-absl::Seconds(1)), "0 ms");
}

TEST(ConnectFailureReason, NamesTheCauseFromGrpcsMessage) {
  EXPECT_EQ(ConnectFailureReason(
                "failed to connect to all addresses; last error: UNKNOWN: "
                "ipv4:127.0.0.1:9: Failed to connect to remote host: "
                "Connection refused"),
            "connection refused");
  EXPECT_EQ(ConnectFailureReason("DNS resolution failed for nowhere:1"),
            "name not resolved");
  EXPECT_EQ(ConnectFailureReason("Connection timed out"), "no answer");
  EXPECT_EQ(ConnectFailureReason("Socket closed"), "unreachable");
}

// Nothing listens at the address: the first failed attempt is logged as an
// error naming the address and the refusal (it keeps retrying), and
// Start() ends with UNAVAILABLE saying the coordinator was never reached,
// not "no generation >= 1" (what a gang that never forms gets).
TEST_F(ShimErrors, NothingListeningIsLoggedAtOnceAndNamedInTheError) {
  const std::string address = absl::StrCat("127.0.0.1:", FreePort());
  const absl::Time created = absl::Now();
  auto shim = MakeShim(address, "w0", 1, absl::Seconds(4));
  const absl::Status s = shim->Start();
  const absl::Time ended = absl::Now();
  ASSERT_EQ(s.code(), absl::StatusCode::kUnavailable) << s;
  EXPECT_TRUE(absl::StrContains(s.message(), "never reached the coordinator at " + address))
      << s;
  EXPECT_TRUE(absl::StrContains(s.message(), "within 4 s: connection refused")) << s;
  EXPECT_FALSE(absl::StrContains(s.message(), "no generation")) << s;
  auto line = sink_->WaitFor({"level=error", "msg=\"coordinator unreachable\"",
                              "address=" + address, "reason=\"connection refused\"",
                              "worker=w0", "retrying=\"every 100 ms\""},
                             absl::ZeroDuration());
  ASSERT_TRUE(line.has_value());
  // Logged at the first attempt, not when the wait ran out: before half of
  // the 4 s had passed.
  EXPECT_LT(line->at - created, (ended - created) / 2) << line->text;
  // Once, not at every retry (the reminder comes every 10 s).
  const std::string all = sink_->All();
  EXPECT_EQ(all.find("coordinator unreachable", all.find("coordinator unreachable") + 1),
            std::string::npos)
      << all;
}

// A listener that accepts TCP connections but never speaks (the kernel's
// backlog completes the handshake; nobody reads): after unreachable_after
// the log says the coordinator does not answer.
TEST_F(ShimErrors, AListenerThatNeverAnswersIsReportedAsNoAnswer) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
  socklen_t n = sizeof a;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &n);
  ASSERT_EQ(::listen(fd, 16), 0);
  const std::string address = absl::StrCat("127.0.0.1:", ntohs(a.sin_port));
  ShimOptions o;
  o.client.address = address;
  o.client.job = "job";
  o.client.worker_id = "w0";
  o.client.desired_workers = 1;
  o.client.unreachable_after = absl::Milliseconds(500);
  o.membership_timeout = absl::Seconds(3);
  auto shim = *Shim::Create(o, *MakeBackend("gloo", absl::Seconds(10)));
  const absl::Status s = shim->Start();
  ::close(fd);
  ASSERT_EQ(s.code(), absl::StatusCode::kUnavailable) << s;
  EXPECT_TRUE(absl::StrContains(s.message(), "never reached the coordinator at " + address))
      << s;
  EXPECT_TRUE(absl::StrContains(s.message(), "no answer")) << s;
  EXPECT_TRUE(sink_->WaitFor({"level=error", "msg=\"coordinator unreachable\"",
                              "address=" + address, "reason=\"no answer\""},
                             absl::ZeroDuration())
                  .has_value());
}

// The coordinator is there but the gang never forms: DEADLINE_EXCEEDED,
// the timeout in whole or tenths of seconds, and what the job has.
TEST_F(ShimErrors, AGangThatNeverFormsSaysWhatTheJobHas) {
  StartCoordinator("127.0.0.1:0");
  auto shim = MakeShim(server_->address(), "w0", 2, absl::Milliseconds(1500));
  const absl::Status s = shim->Start();
  ASSERT_EQ(s.code(), absl::StatusCode::kDeadlineExceeded) << s;
  EXPECT_TRUE(absl::StrContains(s.message(), "no generation >= 1 within 1.5 s")) << s;
  EXPECT_TRUE(absl::StrContains(s.message(), "is reachable")) << s;
  EXPECT_TRUE(absl::StrContains(s.message(), "job 'job' has 1 of 2 workers (w0)")) << s;
  EXPECT_FALSE(sink_->WaitFor({"coordinator unreachable"}, absl::ZeroDuration()).has_value());
}

// A coordinator lost mid-training: every worker warns, training goes on,
// and a coordinator restarted on the same address is re-joined (an info
// line each) and continues the numbering (RECOVERY).
TEST_F(ShimErrors, LosingTheCoordinatorWarnsAndItsReturnIsLogged) {
  StartCoordinator("127.0.0.1:0");
  const std::string address = server_->address();
  StartTwo(absl::Seconds(20));
  server_.reset();  // stops it
  for (const char* w : {"worker=w0", "worker=w1"}) {
    auto lost = sink_->WaitFor({"level=warning", "msg=\"coordinator lost\"", "address=" + address, w,
                                "generation=1"},
                               absl::Seconds(10));
    ASSERT_TRUE(lost.has_value()) << w;
  }
  // Training goes on without it.
  std::vector<double> v(2);
  testing::RunRanks({[&] {
                       v[0] = 1;
                       EXPECT_TRUE(shims_[0]->AllReduce(&v[0], 1, DataType::kFloat64, ReduceOp::kSum).ok());
                     },
                     [&] {
                       v[1] = 2;
                       EXPECT_TRUE(shims_[1]->AllReduce(&v[1], 1, DataType::kFloat64, ReduceOp::kSum).ok());
                     }});
  EXPECT_EQ(v[0], 3);
  EXPECT_EQ(v[1], 3);
  const absl::Time restarted = absl::Now();
  StartCoordinator(address);
  for (const char* w : {"worker=w0", "worker=w1"}) {
    auto back = sink_->WaitFor({"level=info", "msg=\"coordinator back\"", "address=" + address, w},
                               absl::Seconds(10));
    ASSERT_TRUE(back.has_value()) << w;
    std::cerr << "re-joined " << w << " " << FormatSeconds(back->at - restarted)
              << " after the restart\n";
  }
  // Both re-join with their generation: the restarted coordinator publishes
  // RECOVERY (generation 2) and the members move to it at a boundary.
  auto step = [&](int i) {
    const absl::Time give_up = absl::Now() + absl::Seconds(15);
    while (shims_[i]->generation() < 2 && absl::Now() < give_up) {
      auto b = shims_[i]->StepBoundary();
      ASSERT_TRUE(b.ok()) << b.status();
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    EXPECT_EQ(shims_[i]->generation(), 2);
    EXPECT_EQ(shims_[i]->world_size(), 2);
  };
  testing::RunRanks({[&] { step(0); }, [&] { step(1); }});
}

// A peer dies while the coordinator is away: the survivor's recovery cannot
// be agreed without it, says so at once in the log, and fails naming the
// lost coordinator (not "DEADLINE_EXCEEDED: no generation >= 2").
TEST_F(ShimErrors, AChangeWithoutTheCoordinatorFailsNamingIt) {
  StartCoordinator("127.0.0.1:0");
  const std::string address = server_->address();
  StartTwo(absl::Milliseconds(2500));
  server_.reset();
  ASSERT_TRUE(sink_->WaitFor({"msg=\"coordinator lost\"", "worker=w0"}, absl::Seconds(10)).has_value());
  shims_[1].reset();  // the peer is gone: its sockets close
  double v = 1;
  const absl::Status failed = shims_[0]->AllReduce(&v, 1, DataType::kFloat64, ReduceOp::kSum);
  ASSERT_ERROR(failed, absl::StatusCode::kUnavailable, "gloo allreduce: ");
  auto b = shims_[0]->Recover(std::string(failed.message()));
  ASSERT_ERROR(b, absl::StatusCode::kUnavailable, "no generation >= 2 within 2.5 s: the coordinator at");
  EXPECT_EQ(b.status().code(), absl::StatusCode::kUnavailable) << b.status();
  EXPECT_TRUE(absl::StrContains(b.status().message(), "no generation >= 2 within 2.5 s")) << b.status();
  EXPECT_TRUE(absl::StrContains(b.status().message(), "the coordinator at " + address + " was lost"))
      << b.status();
  EXPECT_TRUE(absl::StrContains(b.status().message(), "cannot be agreed without it")) << b.status();
  EXPECT_TRUE(sink_->WaitFor({"level=warning", "msg=\"collective failed while the coordinator is unreachable\"",
                              "address=" + address, "worker=w0", "waiting=\"2.5 s\""},
                             absl::ZeroDuration())
                  .has_value());
}

// RINGMASTER_MEMBERSHIP_TIMEOUT sets the C API's wait; a bad value is an
// error naming the variable; rm_shim_set_membership_timeout changes it.
TEST(CApiMembershipTimeout, FromTheEnvironmentAndTheSetter) {
  ::setenv("RINGMASTER_MEMBERSHIP_TIMEOUT", "abc", 1);
  rm_shim* bad = rm_shim_create("127.0.0.1:1", "j", "w", 1, "gloo");
  EXPECT_TRUE(absl::StrContains(rm_shim_last_error(bad), "RINGMASTER_MEMBERSHIP_TIMEOUT='abc'"))
      << rm_shim_last_error(bad);
  rm_shim_destroy(bad);
  for (const auto& [text, ms] : std::vector<std::pair<std::string, int64_t>>{
           {"2.5", 2500}, {"90s", 90000}, {"2m", 120000}, {"", 60000}}) {
    ::setenv("RINGMASTER_MEMBERSHIP_TIMEOUT", text.c_str(), 1);
    rm_shim* s = rm_shim_create("127.0.0.1:1", "j", "w", 1, "gloo");
    EXPECT_STREQ(rm_shim_last_error(s), "") << text;
    EXPECT_EQ(rm_shim_membership_timeout_ms(s), ms) << text;
    rm_shim_destroy(s);
  }
  ::setenv("RINGMASTER_MEMBERSHIP_TIMEOUT", "0", 1);
  rm_shim* zero = rm_shim_create("127.0.0.1:1", "j", "w", 1, "gloo");
  EXPECT_TRUE(absl::StrContains(rm_shim_last_error(zero), "not a positive number"));
  rm_shim_destroy(zero);
  ::unsetenv("RINGMASTER_MEMBERSHIP_TIMEOUT");
  rm_shim* s = rm_shim_create("127.0.0.1:1", "j", "w", 1, "gloo");
  EXPECT_EQ(rm_shim_set_membership_timeout(s, 1500), RM_OK);
  EXPECT_EQ(rm_shim_membership_timeout_ms(s), 1500);
  EXPECT_EQ(rm_shim_set_membership_timeout(s, 0), RM_ERROR);
  EXPECT_TRUE(absl::StrContains(rm_shim_last_error(s), "must be positive"));
  EXPECT_EQ(rm_shim_membership_timeout_ms(s), 1500);
  rm_shim_destroy(s);
}

}  // namespace
}  // namespace ringmaster::shim
