// The admin verbs, clients of the daemon's admin API (api/admin.proto,
// docs/ADMIN.md): `ringmaster submit`, `jobs`, `job NAME`, `queues`,
// `nodes`, `cancel NAME`, `policy update FILE`. Each prints an aligned table,
// or the API's answer as JSON with --json. Exit codes (docs/ADMIN.md):
//   0 done (submit: every job is in the daemon's journal)
//   1 the daemon refused (invalid, not found, cannot be done now)
//   2 bad command line or input file: nothing was sent
//   3 the daemon cannot be reached or did not answer in time
//   4 the daemon wants a token (or another one)
//   5 submit: a job of that name already exists
#include <google/protobuf/util/json_util.h>
#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <ctime>
#include <fstream>
#include <iostream>
#include <optional>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "api/admin.grpc.pb.h"
#include "cli/commands.h"
#include "cli/host_list.h"
#include "common/status_macros.h"
#include "scheduler/job_file.h"
#include "server/admin/admin_convert.h"
#include "topology/resources.h"

namespace ringmaster::cli {
namespace {

enum Exit { kOk = 0, kRefused = 1, kUsage = 2, kUnreachable = 3, kAuth = 4, kExists = 5 };

struct ClientFlags {
  std::string server;
  std::string token_file;
  bool json = false;
  double timeout_s = 10;
  std::string tls_ca;    // the daemon serves TLS: its certificate's CA
  std::string tls_cert;  // mutual TLS: this client's certificate and key
  std::string tls_key;
};

// A file's contents; false (with a message) when it cannot be read.
bool ReadPem(const std::string& flag, const std::string& path, std::string* out) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  *out = text.str();
  if (!in || out->empty()) {
    std::cerr << flag << ": cannot read " << path << "\n";
    return false;
  }
  return true;
}

void AddClientFlags(CLI::App& cmd, ClientFlags& f) {
  cmd.add_option("--server", f.server, "daemon's admin API HOST:PORT (env RINGMASTER_SERVER, else 127.0.0.1:7070)");
  cmd.add_option("--token-file", f.token_file,
                 "file whose first line is the daemon's bearer token (default: env RINGMASTER_TOKEN, which holds the "
                 "token itself)");
  cmd.add_flag("--json", f.json, "print the API's answer as JSON");
  cmd.add_option("--timeout", f.timeout_s, "seconds to wait for the daemon (10)")->check(CLI::Range(0.1, 3600.0));
  cmd.add_option("--tls-ca", f.tls_ca, "the daemon serves TLS (serve --tls-cert): PEM CA that signed its certificate")
      ->check(CLI::ExistingFile);
  cmd.add_option("--tls-cert", f.tls_cert, "mutual TLS (serve --tls-client-ca): this client's PEM certificate")
      ->check(CLI::ExistingFile);
  cmd.add_option("--tls-key", f.tls_key, "mutual TLS: the PEM key of --tls-cert")->check(CLI::ExistingFile);
}

class Client {
 public:
  // Fails (exit 2) when the token file cannot be read.
  static bool Make(const ClientFlags& f, Client* out) {
    std::string server = f.server;
    if (server.empty()) {
      const char* env = std::getenv("RINGMASTER_SERVER");
      server = env && *env ? env : "127.0.0.1:7070";
    }
    out->flags_ = f;
    if (!f.token_file.empty()) {
      std::ifstream in(f.token_file);
      std::stringstream text;
      text << in.rdbuf();
      out->token_ = text.str();
      if (auto nl = out->token_.find_first_of("\r\n"); nl != std::string::npos) out->token_.resize(nl);
      if (!in || out->token_.empty()) {
        std::cerr << "--token-file: cannot read a token from " << f.token_file << "\n";
        return false;
      }
    } else if (const char* env = std::getenv("RINGMASTER_TOKEN"); env && *env) {
      out->token_ = env;
    }
    out->server_ = server;
    grpc::ChannelArguments args;
    args.SetMaxReceiveMessageSize(-1);  // a list of 100,000 jobs is tens of MiB
    std::shared_ptr<grpc::ChannelCredentials> creds = grpc::InsecureChannelCredentials();
    if (!f.tls_ca.empty() || !f.tls_cert.empty()) {
      if (f.tls_cert.empty() != f.tls_key.empty()) {
        std::cerr << "--tls-cert and --tls-key go together\n";
        return false;
      }
      grpc::SslCredentialsOptions so;
      if (!f.tls_ca.empty() && !ReadPem("--tls-ca", f.tls_ca, &so.pem_root_certs)) return false;
      if (!f.tls_cert.empty() && (!ReadPem("--tls-cert", f.tls_cert, &so.pem_cert_chain) ||
                                  !ReadPem("--tls-key", f.tls_key, &so.pem_private_key))) {
        return false;
      }
      creds = grpc::SslCredentials(so);
    }
    out->stub_ = admin::Admin::NewStub(grpc::CreateCustomChannel(server, creds, args));
    return true;
  }

  // A context with the deadline and the token.
  std::unique_ptr<grpc::ClientContext> Context() const {
    auto ctx = std::make_unique<grpc::ClientContext>();
    ctx->set_deadline(std::chrono::system_clock::now() +
                      std::chrono::milliseconds(static_cast<int64_t>(flags_.timeout_s * 1000)));
    ctx->set_wait_for_ready(false);
    if (!token_.empty()) ctx->AddMetadata("authorization", "Bearer " + token_);
    return ctx;
  }

  // Prints the error and returns the exit code for it.
  int Fail(const grpc::Status& s, const std::string& what) const {
    std::cerr << what << ": " << s.error_message() << "\n";
    switch (s.error_code()) {
      case grpc::StatusCode::UNAVAILABLE:
      case grpc::StatusCode::DEADLINE_EXCEEDED:
        std::cerr << "(is `ringmaster serve` running with --grpc " << server_ << "?)\n";
        return kUnreachable;
      case grpc::StatusCode::UNAUTHENTICATED:
      case grpc::StatusCode::PERMISSION_DENIED: return kAuth;
      case grpc::StatusCode::ALREADY_EXISTS: return kExists;
      default: return kRefused;
    }
  }

  admin::Admin::Stub& stub() { return *stub_; }
  bool json() const { return flags_.json; }

 private:
  ClientFlags flags_;
  std::string server_;
  std::string token_;
  std::unique_ptr<admin::Admin::Stub> stub_;
};

void PrintJson(const google::protobuf::Message& m) {
  std::string out;
  google::protobuf::util::JsonPrintOptions o;
  o.add_whitespace = true;
  o.always_print_primitive_fields = true;
  o.preserve_proto_field_names = true;
  (void)google::protobuf::util::MessageToJsonString(m, &out, o);
  std::cout << out;
}

// A cell as the terminal should show it: control characters (NUL, line
// ends, escapes, DEL) written as \xHH and a backslash as \\, so a name
// the daemon was sent cannot break the table or drive the terminal.
std::string Printable(std::string_view cell) {
  std::string out;
  out.reserve(cell.size());
  for (const char ch : cell) {
    const auto c = static_cast<unsigned char>(ch);
    if (c == '\\') {
      out += "\\\\";
    } else if (c < 0x20 || c == 0x7f) {
      static constexpr char kHex[] = "0123456789abcdef";
      out += "\\x";
      out += kHex[c >> 4];
      out += kHex[c & 15];
    } else {
      out += ch;
    }
  }
  return out;
}

// Rows of cells, printed with every column as wide as its widest cell
// (cells made Printable first).
void PrintTable(const std::vector<std::vector<std::string>>& raw) {
  std::vector<std::vector<std::string>> rows;
  rows.reserve(raw.size());
  for (const auto& r : raw) {
    rows.emplace_back();
    for (const std::string& cell : r) rows.back().push_back(Printable(cell));
  }
  std::vector<size_t> width;
  for (const auto& r : rows) {
    width.resize(std::max(width.size(), r.size()));
    for (size_t c = 0; c < r.size(); ++c) width[c] = std::max(width[c], r[c].size());
  }
  for (const auto& r : rows) {
    std::string line;
    for (size_t c = 0; c < r.size(); ++c) {
      line += r[c];
      if (c + 1 < r.size()) line += std::string(width[c] - r[c].size() + 2, ' ');
    }
    std::cout << line << "\n";
  }
}

std::string Gpus(int64_t milli) { return milli < 0 ? "-" : topology::FormatGpus(milli); }

// "now", "in 5m", "-" (unknown).
std::string When(int64_t ms) {
  if (ms < 0) return "-";
  const int64_t now = std::chrono::duration_cast<std::chrono::milliseconds>(
                          std::chrono::system_clock::now().time_since_epoch())
                          .count();
  const int64_t s = (ms - now) / 1000;
  if (s <= 0) return "now";
  if (s < 120) return absl::StrCat("in ", s, "s");
  if (s < 7200) return absl::StrCat("in ", s / 60, "m");
  return absl::StrCat("in ", s / 3600, "h");
}

// Every phase's name, as the API spells it (ListJobs' phases).
std::vector<std::string> PhaseNames() {
  std::vector<std::string> names;
  for (scheduler::JobPhase p : scheduler::kAllPhases) {
    names.emplace_back(scheduler::PhaseName(p));
  }
  return names;
}

// READY: tasks placed of the total, and how many of them are not bound yet
// (a pod gang's pods still Binding): "4/4", "4/4 (3 binding)".
std::string Ready(const admin::Job& j) {
  return absl::StrCat(j.tasks_ready(), "/", j.tasks_total(),
                      j.tasks_binding() > 0 ? absl::StrCat(" (", j.tasks_binding(), " binding)") : "");
}

// START: "running" only once every placed task is bound.
std::string Start(const admin::Job& j) {
  if (j.phase() != "Running") return When(j.expected_start_ms());
  return j.tasks_binding() > 0 ? "binding" : "running";
}

// --- submit ------------------------------------------------------------------

struct SubmitFlags {
  ClientFlags client;
  std::string file;
  std::string name;
  std::string queue = "default";
  int priority = 0;
  int replicas = 1;
  double gpus = 0;
  double cpu = 0;
  std::string memory;
  int min_member = 0;
  std::string elastic;
  double walltime_s = 0;
  std::vector<std::string> command;
};

// The job the flags describe (no --file).
absl::StatusOr<scheduler::JobSpec> FlagJob(const SubmitFlags& f) {
  scheduler::JobSpec s;
  s.name = f.name;
  s.queue = f.queue;
  s.priority = f.priority;
  scheduler::RoleSpec role;
  role.replicas = f.replicas;
  if (f.gpus > 0 && f.gpus < 1) {
    role.gpu = {1, static_cast<topology::Quantity>(f.gpus * 1000)};
  } else {
    role.gpu.count = static_cast<int>(f.gpus);
    if (role.gpu.count != f.gpus) return absl::InvalidArgumentError("--gpus: a fraction below 1 or a whole number");
  }
  role.request.set_cpu_milli(static_cast<topology::Quantity>(f.cpu * 1000));
  if (!f.memory.empty()) {
    auto m = topology::ParseQuantity(f.memory, /*milli=*/false);
    if (!m.ok()) return absl::InvalidArgumentError(absl::StrCat("--memory: ", m.status().message()));
    role.request.set_memory(*m);
  }
  s.roles.push_back(role);
  scheduler::GangSize elastic;
  if (!f.elastic.empty()) {
    auto range = scheduler::GangSize::ParseRange(f.elastic);
    if (!range.ok()) return absl::InvalidArgumentError(absl::StrCat("--elastic: ", range.status().message()));
    elastic = *range;
  }
  auto size = scheduler::GangSize::FromMinMember(f.min_member, elastic.min, elastic.max);
  if (!size.ok()) return absl::InvalidArgumentError(absl::StrCat("job '", s.name, "': ", size.status().message()));
  s.size = *size;
  s.walltime_ms = static_cast<int64_t>(f.walltime_s * 1000);
  s.command = f.command;
  RM_RETURN_IF_ERROR(s.Validate());
  return s;
}

int Submit(const SubmitFlags& f) {
  std::vector<scheduler::JobSpec> jobs;
  if (!f.file.empty()) {
    auto loaded = scheduler::LoadJobFile(f.file);
    if (!loaded.ok()) {
      std::cerr << loaded.status().message() << "\n";
      return kUsage;
    }
    jobs = *std::move(loaded);
  } else if (f.name.empty()) {
    std::cerr << "submit: give a jobs file (-f FILE) or a job (--name NAME with --replicas, --gpus, ...)\n";
    return kUsage;
  } else {
    auto job = FlagJob(f);
    if (!job.ok()) {
      std::cerr << "submit: " << job.status().message() << "\n";
      return kUsage;
    }
    jobs.push_back(*std::move(job));
  }
  Client c;
  if (!Client::Make(f.client, &c)) return kUsage;
  std::vector<std::vector<std::string>> rows = {{"JOB", "QUEUE", "PHASE"}};
  admin::ListJobsResponse all;
  int worst = kOk;
  for (const scheduler::JobSpec& spec : jobs) {
    admin::SubmitJobRequest req;
    *req.mutable_job() = server::JobSpecToProto(spec);
    admin::SubmitJobResponse resp;
    grpc::Status s = c.stub().SubmitJob(c.Context().get(), req, &resp);
    if (!s.ok()) {
      worst = c.Fail(s, "submit " + spec.name);
      break;  // later jobs may depend on this one: stop at the first refusal
    }
    *all.add_jobs() = resp.job();
    rows.push_back({resp.job().name(), resp.job().queue(), resp.job().phase()});
  }
  if (c.json()) {
    PrintJson(all);
  } else if (rows.size() > 1) {
    std::cout << "submitted (journaled):\n";
    PrintTable(rows);
  }
  return worst;
}

// --- jobs, job, queues, nodes, cancel -----------------------------------------

int Jobs(const ClientFlags& f, const std::string& queue, const std::vector<std::string>& phases) {
  Client c;
  if (!Client::Make(f, &c)) return kUsage;
  admin::ListJobsRequest req;
  req.set_queue(queue);
  for (const auto& p : phases) req.add_phases(p);
  admin::ListJobsResponse resp;
  if (grpc::Status s = c.stub().ListJobs(c.Context().get(), req, &resp); !s.ok()) return c.Fail(s, "jobs");
  if (c.json()) {
    PrintJson(resp);
    return kOk;
  }
  std::vector<std::vector<std::string>> rows = {{"JOB", "QUEUE", "PRIO", "PHASE", "READY", "GPUS", "START", "REASON"}};
  for (const admin::Job& j : resp.jobs()) {
    rows.push_back({j.name(), j.queue(), absl::StrCat(j.priority()), j.phase(), Ready(j), Gpus(j.gpu_milli()),
                    Start(j), j.pending_reason()});
  }
  PrintTable(rows);
  return kOk;
}

int ShowJob(const ClientFlags& f, const std::string& name) {
  Client c;
  if (!Client::Make(f, &c)) return kUsage;
  admin::GetJobRequest req;
  req.set_name(name);
  admin::Job j;
  if (grpc::Status s = c.stub().GetJob(c.Context().get(), req, &j); !s.ok()) return c.Fail(s, "job " + name);
  if (c.json()) {
    PrintJson(j);
    return kOk;
  }
  PrintTable({{"job:", j.name()},
              {"queue:", j.queue()},
              {"priority:", absl::StrCat(j.priority())},
              {"phase:", j.phase()},
              {"tasks:", absl::StrCat(j.tasks_ready(), " of ", j.tasks_total(), " placed",
                                      j.tasks_binding() > 0 ? absl::StrCat(", ", j.tasks_binding(), " not bound yet") : "",
                                      " (gang minimum ", j.min_member(), ")")},
              {"gpus held:", Gpus(j.gpu_milli())},
              {"generation:", absl::StrCat(j.generation())},
              {"expected start:", Start(j)},
              {"pending reason:", j.pending_reason().empty() ? "-" : j.pending_reason()},
              {"speed model:", j.speed_model().empty() ? "-" : j.speed_model()}});
  std::vector<std::vector<std::string>> rows = {{"TASK", "STATE", "NODE", "GPUS", "RANK"}};
  for (const admin::Task& t : j.tasks()) {
    rows.push_back({t.name(), t.state(), t.node().empty() ? "-" : t.node(),
                    t.gpus().empty() ? "-" : absl::StrJoin(t.gpus(), ","), t.rank() < 0 ? "-" : absl::StrCat(t.rank())});
  }
  std::cout << "\n";
  PrintTable(rows);
  return kOk;
}

// `ringmaster hosts JOB`: the job's members in ring order as a launcher's
// host list (cli/host_list.h); exit 1 when the job has no members.
int Hosts(const ClientFlags& f, const std::string& name, const std::string& format_name) {
  const std::optional<HostFormat> format = ParseHostFormat(format_name);
  if (!format) {
    std::cerr << "hosts: --format " << format_name << ": not one of " << kHostFormats << "\n";
    return kUsage;
  }
  Client c;
  if (!Client::Make(f, &c)) return kUsage;
  admin::GetJobRequest req;
  req.set_name(name);
  admin::Job j;
  if (grpc::Status s = c.stub().GetJob(c.Context().get(), req, &j); !s.ok()) return c.Fail(s, "job " + name);
  std::vector<const admin::Task*> members;
  for (const admin::Task& t : j.tasks()) {
    if (t.rank() >= 0 && !t.node().empty()) members.push_back(&t);
  }
  std::sort(members.begin(), members.end(), [](const admin::Task* a, const admin::Task* b) { return a->rank() < b->rank(); });
  std::vector<std::string> nodes;
  for (const admin::Task* t : members) nodes.push_back(t->node());
  if (nodes.empty()) {
    std::cerr << "hosts: job " << name << " has no members placed (" << j.phase() << ")\n";
    return kRefused;
  }
  std::cout << FormatHosts(HostSlots(nodes), *format) << std::flush;
  return kOk;
}

int Queues(const ClientFlags& f) {
  Client c;
  if (!Client::Make(f, &c)) return kUsage;
  admin::ListQueuesResponse resp;
  if (grpc::Status s = c.stub().ListQueues(c.Context().get(), admin::ListQueuesRequest(), &resp); !s.ok()) {
    return c.Fail(s, "queues");
  }
  if (c.json()) {
    PrintJson(resp);
    return kOk;
  }
  // With proportion's usageHalfLife: each queue's decayed past use, as GPUs
  // held on average (weighted by recency) and GPU-hours.
  // Once a job has ended after running: how many each queue's learners
  // (gittins, learned walltimes) have to learn from.
  // With usageWeight: the level of each queue's weight (the weight its
  // deserved share reads: weight x 2^(-level / 8)).
  int64_t half_life_ms = 0, ended_runs = 0;
  bool weighted = false;
  for (const admin::Queue& q : resp.queues()) {
    half_life_ms = std::max(half_life_ms, q.usage_half_life_ms());
    ended_runs += q.ended_runs();
    weighted = weighted || q.usage_weighted();
  }
  std::vector<std::vector<std::string>> rows = {
      {"QUEUE", "PARENT", "WEIGHT", "DESERVED", "ALLOCATED", "CAPABILITY", "PENDING", "RUNNING"}};
  if (half_life_ms > 0) {
    rows[0].push_back("RECENT-USE");
    rows[0].push_back("DECAYED-GPU-H");
  }
  if (weighted) rows[0].push_back("WEIGHT-LEVEL");
  if (ended_runs > 0) rows[0].push_back("ENDED-RUNS");
  for (const admin::Queue& q : resp.queues()) {
    rows.push_back({q.name(), q.parent().empty() ? "-" : q.parent(), absl::StrCat(q.weight()),
                    Gpus(q.deserved().gpu_milli()), Gpus(q.allocated().gpu_milli()), Gpus(q.capability().gpu_milli()),
                    absl::StrCat(q.pending_jobs()), absl::StrCat(q.running_jobs())});
    if (half_life_ms > 0) {
      rows.back().push_back(absl::StrFormat("%.2f", q.usage_gpus()));
      rows.back().push_back(absl::StrFormat("%.2f", q.usage_gpu_seconds() / 3600));
    }
    if (weighted) {
      rows.back().push_back(absl::StrFormat("%d (x%.2f)", q.usage_weight_level(),
                                            std::exp2(-q.usage_weight_level() / 8.0)));
    }
    if (ended_runs > 0) rows.back().push_back(absl::StrCat(q.ended_runs()));
  }
  std::cout << "(GPU counts";
  if (half_life_ms > 0) {
    std::cout << "; RECENT-USE: GPUs held on average, each second counting half after the usage half-life of "
              << absl::StrFormat("%g", static_cast<double>(half_life_ms) / 1000) << " s";
  }
  if (weighted) {
    std::cout << "; WEIGHT-LEVEL: usageWeight's level of the weight its deserved share reads, the weight counted x "
                 "2^(-level/8)";
  }
  if (ended_runs > 0) {
    std::cout << "; ENDED-RUNS: jobs seen to end after running, kept across restarts, that gittins and learned "
                 "walltimes learn from";
  }
  std::cout << ")\n";
  PrintTable(rows);
  return kOk;
}

int Nodes(const ClientFlags& f) {
  Client c;
  if (!Client::Make(f, &c)) return kUsage;
  admin::ListNodesResponse resp;
  if (grpc::Status s = c.stub().ListNodes(c.Context().get(), admin::ListNodesRequest(), &resp); !s.ok()) {
    return c.Fail(s, "nodes");
  }
  if (c.json()) {
    PrintJson(resp);
    return kOk;
  }
  std::vector<std::vector<std::string>> rows = {{"NODE", "STATUS", "MODEL", "GPUS", "FREE", "TASKS"}};
  for (const admin::Node& n : resp.nodes()) {
    rows.push_back({n.name(), n.schedulable() ? "ready" : "unschedulable", n.gpu_model().empty() ? "-" : n.gpu_model(),
                    absl::StrCat(n.gpus()), absl::StrCat(n.gpus_free()), absl::StrCat(n.tasks())});
  }
  PrintTable(rows);
  return kOk;
}

int Cancel(const ClientFlags& f, const std::string& name) {
  Client c;
  if (!Client::Make(f, &c)) return kUsage;
  admin::CancelJobRequest req;
  req.set_name(name);
  admin::CancelJobResponse resp;
  if (grpc::Status s = c.stub().CancelJob(c.Context().get(), req, &resp); !s.ok()) return c.Fail(s, "cancel " + name);
  if (c.json()) {
    PrintJson(resp);
  } else {
    if (resp.job().phase() == "Cancelling") {
      std::cout << "cancelling " << resp.job().name() << " (" << resp.job().pending_reason() << ")\n";
    } else {
      std::cout << "cancelled " << resp.job().name() << " (" << resp.job().phase() << ")\n";
    }
  }
  return kOk;
}

int UpdatePolicy(const ClientFlags& f, const std::string& file) {
  std::ifstream in(file);
  std::stringstream text;
  text << in.rdbuf();
  if (!in) {
    std::cerr << file << ": cannot read\n";
    return kUsage;
  }
  Client c;
  if (!Client::Make(f, &c)) return kUsage;
  admin::UpdatePolicyRequest req;
  req.set_yaml(text.str());
  admin::UpdatePolicyResponse resp;
  grpc::Status s = c.stub().UpdatePolicy(c.Context().get(), req, &resp);
  if (!s.ok()) {
    const int code = c.Fail(s, "policy update");
    if (s.error_code() == grpc::StatusCode::INVALID_ARGUMENT) std::cerr << "rejected; the daemon keeps its policy\n";
    return code;
  }
  std::cout << "policy in force: " << file << "\n";
  return kOk;
}

}  // namespace

void RegisterAdminCommands(CLI::App& app, int* exit_code) {
  auto sf = std::make_shared<SubmitFlags>();
  CLI::App* submit = app.add_subcommand("submit", "submit jobs to the daemon; exits 0 once they are journaled");
  submit->add_option("-f,--file", sf->file, "jobs file (the format of `schedule --jobs`, scheduler/job_file.h)")
      ->check(CLI::ExistingFile);
  submit->add_option("--name", sf->name, "one job: its name (instead of --file)");
  submit->add_option("--queue", sf->queue, "queue (default)");
  submit->add_option("--priority", sf->priority, "priority (0)");
  submit->add_option("--replicas", sf->replicas, "tasks (1)")->check(CLI::Range(1, 100000));
  submit->add_option("--gpus", sf->gpus, "GPUs per task: whole, or a share below 1 (0)")->check(CLI::Range(0.0, 64.0));
  submit->add_option("--cpu", sf->cpu, "CPUs per task (0)")->check(CLI::Range(0.0, 1e6));
  submit->add_option("--memory", sf->memory, "memory per task, e.g. 64Gi");
  submit->add_option("--min-member", sf->min_member, "gang minimum (default: every task)")->check(CLI::Range(0, 100000));
  submit->add_option("--elastic", sf->elastic, "elastic range MIN:MAX");
  submit->add_option("--walltime", sf->walltime_s, "expected run time, seconds")->check(CLI::Range(0.0, 1e9));
  submit->add_option("command", sf->command,
                     "one job: what each task runs, after -- (serve --local-executor starts it under the shim)");
  AddClientFlags(*submit, sf->client);
  submit->callback([sf, exit_code] { *exit_code = Submit(*sf); });

  auto jf = std::make_shared<ClientFlags>();
  auto jq = std::make_shared<std::string>();
  auto jp = std::make_shared<std::vector<std::string>>();
  CLI::App* jobs = app.add_subcommand("jobs", "list the daemon's jobs: phase, placement, expected start, why pending");
  jobs->add_option("--queue", *jq, "only this queue");
  jobs->add_option("--phase", *jp, "only these phases")
      ->check(CLI::IsMember(PhaseNames()));
  AddClientFlags(*jobs, *jf);
  jobs->callback([jf, jq, jp, exit_code] { *exit_code = Jobs(*jf, *jq, *jp); });

  auto gf = std::make_shared<ClientFlags>();
  auto gname = std::make_shared<std::string>();
  CLI::App* job = app.add_subcommand("job", "one job in detail: tasks, nodes, pending reason, expected start");
  job->add_option("NAME", *gname, "job name")->required();
  AddClientFlags(*job, *gf);
  job->callback([gf, gname, exit_code] { *exit_code = ShowJob(*gf, *gname); });

  auto hf = std::make_shared<ClientFlags>();
  auto hname = std::make_shared<std::string>();
  auto hformat = std::make_shared<std::string>("openmpi");
  CLI::App* hosts = app.add_subcommand(
      "hosts", "a job's members in ring order as a launcher's host list (mpirun --hostfile, horovodrun discovery)");
  hosts->add_option("JOB", *hname, "job name")->required();
  hosts->add_option("--format", *hformat, "openmpi (host slots=N), mpich (host:N), slurm (compressed list), horovod "
                                          "(host:N)")
      ->check(CLI::IsMember({"openmpi", "mpich", "slurm", "horovod"}));
  AddClientFlags(*hosts, *hf);
  hosts->callback([hf, hname, hformat, exit_code] { *exit_code = Hosts(*hf, *hname, *hformat); });

  auto qf = std::make_shared<ClientFlags>();
  CLI::App* queues = app.add_subcommand(
      "queues", "the daemon's queues: deserved, allocated, pending; decayed usage with usageHalfLife");
  AddClientFlags(*queues, *qf);
  queues->callback([qf, exit_code] { *exit_code = Queues(*qf); });

  auto nf = std::make_shared<ClientFlags>();
  CLI::App* nodes = app.add_subcommand("nodes", "the daemon's nodes: GPUs, free, tasks");
  AddClientFlags(*nodes, *nf);
  nodes->callback([nf, exit_code] { *exit_code = Nodes(*nf); });

  auto cf = std::make_shared<ClientFlags>();
  auto cname = std::make_shared<std::string>();
  CLI::App* cancel = app.add_subcommand("cancel", "cancel a job (journaled before it answers)");
  cancel->add_option("NAME", *cname, "job name")->required();
  AddClientFlags(*cancel, *cf);
  cancel->callback([cf, cname, exit_code] { *exit_code = Cancel(*cf, *cname); });
}

void RegisterPolicyUpdateCommand(CLI::App& policy, int* exit_code) {
  auto uf = std::make_shared<ClientFlags>();
  auto file = std::make_shared<std::string>();
  CLI::App* update = policy.add_subcommand("update", "send a policy file to the daemon (hot reload; rejected whole)");
  update->add_option("FILE", *file, "policy file (YAML)")->required();
  AddClientFlags(*update, *uf);
  update->callback([uf, file, exit_code] { *exit_code = UpdatePolicy(*uf, *file); });
}

}  // namespace ringmaster::cli
