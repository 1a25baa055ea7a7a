#include "server/journal.h"

#include <sqlite3.h>

#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <future>
#include <map>
#include <mutex>
#include <thread>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"

namespace ringmaster::server {
namespace {

constexpr int kSchemaVersion = 1;
constexpr const char* kSchema = R"(
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value BLOB NOT NULL) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS jobs (
  name TEXT PRIMARY KEY, seq INTEGER NOT NULL, spec BLOB NOT NULL, created INTEGER NOT NULL,
  phase INTEGER NOT NULL, generation INTEGER NOT NULL) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS tasks (
  job TEXT NOT NULL, task INTEGER NOT NULL, role INTEGER NOT NULL, node TEXT NOT NULL, gpus TEXT NOT NULL,
  PRIMARY KEY (job, task)) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS extender_state (
  kind TEXT NOT NULL, name TEXT NOT NULL, value BLOB NOT NULL, UNIQUE (kind, name));
)";

std::string GpusText(const std::vector<int16_t>& gpus) { return absl::StrJoin(gpus, ","); }

bool ParseGpus(const std::string& text, std::vector<int16_t>* out) {
  if (text.empty()) return true;
  for (absl::string_view part : absl::StrSplit(text, ',')) {
    int v = 0;
    if (!absl::SimpleAtoi(part, &v) || v < 0 || v > 4096) return false;
    out->push_back(static_cast<int16_t>(v));
  }
  return true;
}

// One prepared statement, reset after each use.
class Stmt {
 public:
  Stmt(sqlite3* db, const char* sql) { rc_ = sqlite3_prepare_v2(db, sql, -1, &s_, nullptr); }
  ~Stmt() { sqlite3_finalize(s_); }
  Stmt(const Stmt&) = delete;
  Stmt& operator=(const Stmt&) = delete;
  bool ok() const { return rc_ == SQLITE_OK; }
  sqlite3_stmt* get() { return s_; }
  Stmt& Text(int i, const std::string& v) {
    sqlite3_bind_text(s_, i, v.data(), static_cast<int>(v.size()), SQLITE_TRANSIENT);
    return *this;
  }
  Stmt& Blob(int i, const std::string& v) {
    sqlite3_bind_blob(s_, i, v.data(), static_cast<int>(v.size()), SQLITE_TRANSIENT);
    return *this;
  }
  Stmt& Int(int i, int64_t v) {
    sqlite3_bind_int64(s_, i, v);
    return *this;
  }
  // Steps once and resets: SQLITE_DONE on success.
  int Run() {
    const int rc = sqlite3_step(s_);
    sqlite3_reset(s_);
    sqlite3_clear_bindings(s_);
    return rc;
  }

 private:
  sqlite3_stmt* s_ = nullptr;
  int rc_ = SQLITE_ERROR;
};

class SqliteJournal : public Journal {
 public:
  explicit SqliteJournal(std::string path) : path_(std::move(path)) {}
  ~SqliteJournal() override {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_ = true;
    }
    wake_.notify_all();
    if (writer_.joinable()) writer_.join();
    stmts_.clear();
    if (db_) sqlite3_close(db_);
  }

  absl::Status Init() {
    if (sqlite3_open_v2(path_.c_str(), &db_, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX,
                        nullptr) != SQLITE_OK) {
      return Error("cannot open");
    }
    sqlite3_busy_timeout(db_, 5000);
    // Reading the header first tells a damaged or foreign file apart.
    if (auto s = Exec("PRAGMA schema_version;"); !s.ok()) return s;
    if (auto s = Exec("PRAGMA journal_mode=WAL; PRAGMA synchronous=FULL;"); !s.ok()) return s;
    if (auto s = Exec(kSchema); !s.ok()) return s;
    std::string version;
    {
      Stmt get(db_, "SELECT value FROM meta WHERE key='schema'");
      if (!get.ok()) return Error("reading the schema version");
      if (sqlite3_step(get.get()) == SQLITE_ROW) {
        version = reinterpret_cast<const char*>(sqlite3_column_text(get.get(), 0));
      }
    }
    if (version.empty()) {
      if (auto s = Exec(absl::StrCat("INSERT INTO meta VALUES('schema','", kSchemaVersion, "');")); !s.ok()) return s;
    } else if (version != absl::StrCat(kSchemaVersion)) {
      return absl::FailedPreconditionError(absl::StrCat("journal ", path_, ": schema version ", version,
                                                        ", this ringmaster reads version ", kSchemaVersion));
    }
    writer_ = std::thread([this] { WriterLoop(); });
    return absl::OkStatus();
  }

  absl::StatusOr<Recovered> Load() override {
    std::lock_guard<std::mutex> db_lock(db_mu_);
    Recovered r;
    std::map<std::string, std::vector<JournaledTask>> tasks;
    {
      Stmt q(db_, "SELECT job, task, role, node, gpus FROM tasks");
      if (!q.ok()) return Error("reading tasks");
      int rc;
      while ((rc = sqlite3_step(q.get())) == SQLITE_ROW) {
        JournaledTask t;
        const std::string job = reinterpret_cast<const char*>(sqlite3_column_text(q.get(), 0));
        t.index = static_cast<uint32_t>(sqlite3_column_int64(q.get(), 1));
        t.role = sqlite3_column_int(q.get(), 2);
        t.node = reinterpret_cast<const char*>(sqlite3_column_text(q.get(), 3));
        const char* gpus = reinterpret_cast<const char*>(sqlite3_column_text(q.get(), 4));
        if (!ParseGpus(gpus ? gpus : "", &t.gpus)) {
          return absl::DataLossError(absl::StrCat("journal ", path_, ": tasks: job '", job, "' task ", t.index,
                                                  ": bad gpus '", gpus ? gpus : "", "'"));
        }
        tasks[job].push_back(std::move(t));
      }
      if (rc != SQLITE_DONE) return Error("reading tasks");
    }
    {
      Stmt q(db_, "SELECT name, seq, spec, created, phase, generation FROM jobs ORDER BY seq");
      if (!q.ok()) return Error("reading jobs");
      int rc;
      while ((rc = sqlite3_step(q.get())) == SQLITE_ROW) {
        JournaledJob j;
        j.name = reinterpret_cast<const char*>(sqlite3_column_text(q.get(), 0));
        j.seq = sqlite3_column_int64(q.get(), 1);
        const void* blob = sqlite3_column_blob(q.get(), 2);
        j.spec.assign(static_cast<const char*>(blob), static_cast<size_t>(sqlite3_column_bytes(q.get(), 2)));
        j.created_ms = sqlite3_column_int64(q.get(), 3);
        j.phase = sqlite3_column_int(q.get(), 4);
        j.generation = sqlite3_column_int64(q.get(), 5);
        if (auto it = tasks.find(j.name); it != tasks.end()) j.tasks = std::move(it->second);
        r.jobs.push_back(std::move(j));
      }
      if (rc != SQLITE_DONE) return Error("reading jobs");
    }
    {
      Stmt q(db_, "SELECT kind, name, value FROM extender_state ORDER BY rowid");
      if (!q.ok()) return Error("reading the extender's state");
      int rc;
      while ((rc = sqlite3_step(q.get())) == SQLITE_ROW) {
        ExtenderRecord e;
        e.kind = reinterpret_cast<const char*>(sqlite3_column_text(q.get(), 0));
        e.name = reinterpret_cast<const char*>(sqlite3_column_text(q.get(), 1));
        e.value.assign(static_cast<const char*>(sqlite3_column_blob(q.get(), 2)),
                       static_cast<size_t>(sqlite3_column_bytes(q.get(), 2)));
        r.extender.push_back(std::move(e));
      }
      if (rc != SQLITE_DONE) return Error("reading the extender's state");
    }
    {
      Stmt q(db_, "SELECT value FROM meta WHERE key='policy'");
      if (!q.ok()) return Error("reading the policy");
      if (sqlite3_step(q.get()) == SQLITE_ROW) {
        r.policy_yaml.assign(static_cast<const char*>(sqlite3_column_blob(q.get(), 0)),
                             static_cast<size_t>(sqlite3_column_bytes(q.get(), 0)));
      }
    }
    return r;
  }

  std::future<absl::Status> AddJob(JournaledJob job) override {
    return Submit([job = std::move(job)](SqliteJournal& j) {
      int rc = j.Prepared(kInsertJob)
                   .Text(1, job.name).Int(2, job.seq).Blob(3, job.spec).Int(4, job.created_ms)
                   .Int(5, job.phase).Int(6, job.generation).Run();
      if (rc == SQLITE_CONSTRAINT) {
        return absl::AlreadyExistsError(absl::StrCat("job '", job.name, "': name: already in the journal"));
      }
      if (rc != SQLITE_DONE) return j.Error("adding a job");
      return j.WriteTasks(job.name, job.tasks);
    });
  }

  std::future<absl::Status> SetPhase(const std::string& name, int phase, bool terminal) override {
    return Submit([name, phase, terminal](SqliteJournal& j) {
      if (j.Prepared(kSetPhase).Int(1, phase).Text(2, name).Run() != SQLITE_DONE) return j.Error("setting a phase");
      if (terminal) return j.WriteTasks(name, {});
      return absl::OkStatus();
    });
  }

  std::future<absl::Status> SetPolicy(const std::string& yaml) override {
    return Submit([yaml](SqliteJournal& j) {
      if (j.Prepared(kSetPolicy).Blob(1, yaml).Run() != SQLITE_DONE) return j.Error("setting the policy");
      return absl::OkStatus();
    });
  }

  void SetPlacement(const std::string& name, int phase, int64_t generation,
                    std::vector<JournaledTask> tasks) override {
    Enqueue([name, phase, generation, tasks = std::move(tasks)](SqliteJournal& j) {
      if (j.Prepared(kSetPlacement).Int(1, phase).Int(2, generation).Text(3, name).Run() != SQLITE_DONE) {
        return j.Error("recording a placement");
      }
      return j.WriteTasks(name, tasks);
    }, nullptr);
  }

  void PutExtenderState(const std::string& kind, const std::string& name, std::string value) override {
    Enqueue([kind, name, value = std::move(value)](SqliteJournal& j) {
      const int rc = value.empty() ? j.Prepared(kDeleteExtender).Text(1, kind).Text(2, name).Run()
                                   : j.Prepared(kPutExtender).Text(1, kind).Text(2, name).Blob(3, value).Run();
      if (rc != SQLITE_DONE) return j.Error(absl::StrCat("recording the extender's ", kind, " '", name, "'"));
      return absl::OkStatus();
    }, nullptr);
  }

  void SetCommitObserver(std::function<void(double)> observe) override {
    std::lock_guard<std::mutex> lock(mu_);
    observe_commit_ = std::move(observe);
  }

  absl::Status Flush() override {
    absl::Status s = Submit([](SqliteJournal&) { return absl::OkStatus(); }).get();
    std::lock_guard<std::mutex> lock(mu_);
    if (s.ok() && !unwaited_error_.ok()) s = unwaited_error_;
    unwaited_error_ = absl::OkStatus();
    return s;
  }

  int64_t commits() const override {
    std::lock_guard<std::mutex> lock(mu_);
    return commits_;
  }
  const std::string& path() const override { return path_; }

 private:
  using Op = std::function<absl::Status(SqliteJournal&)>;
  struct Pending {
    Op op;
    std::unique_ptr<std::promise<absl::Status>> done;  // null: nobody waits
  };
  enum StmtId {
    kInsertJob,
    kSetPhase,
    kSetPolicy,
    kSetPlacement,
    kDeleteTasks,
    kInsertTask,
    kPutExtender,
    kDeleteExtender,
    kNumStmts
  };

  Stmt& Prepared(StmtId id) {
    static constexpr const char* kSql[kNumStmts] = {
        "INSERT INTO jobs(name, seq, spec, created, phase, generation) VALUES(?,?,?,?,?,?)",
        "UPDATE jobs SET phase=? WHERE name=?",
        "INSERT OR REPLACE INTO meta(key, value) VALUES('policy', ?)",
        "UPDATE jobs SET phase=?, generation=? WHERE name=?",
        "DELETE FROM tasks WHERE job=?",
        "INSERT INTO tasks(job, task, role, node, gpus) VALUES(?,?,?,?,?)",
        // An upsert keeps the row (and its rowid: its place in Load's order).
        "INSERT INTO extender_state(kind, name, value) VALUES(?,?,?) "
        "ON CONFLICT(kind, name) DO UPDATE SET value=excluded.value",
        "DELETE FROM extender_state WHERE kind=? AND name=?",
    };
    if (stmts_.empty()) {
      for (const char* sql : kSql) stmts_.push_back(std::make_unique<Stmt>(db_, sql));
    }
    return *stmts_[id];
  }

  absl::Status WriteTasks(const std::string& job, const std::vector<JournaledTask>& tasks) {
    if (Prepared(kDeleteTasks).Text(1, job).Run() != SQLITE_DONE) return Error("dropping tasks");
    for (const JournaledTask& t : tasks) {
      if (Prepared(kInsertTask).Text(1, job).Int(2, t.index).Int(3, t.role).Text(4, t.node).Text(5, GpusText(t.gpus))
              .Run() != SQLITE_DONE) {
        return Error("recording a task");
      }
    }
    return absl::OkStatus();
  }

  absl::Status Error(const std::string& doing) const {
    const char* why = db_ ? sqlite3_errmsg(db_) : "out of memory";
    return absl::DataLossError(absl::StrCat("journal ", path_, ": ", doing, ": ", why));
  }

  absl::Status Exec(const std::string& sql) {
    char* err = nullptr;
    if (sqlite3_exec(db_, sql.c_str(), nullptr, nullptr, &err) != SQLITE_OK) {
      std::string why = err ? err : "unknown error";
      sqlite3_free(err);
      return absl::DataLossError(absl::StrCat("journal ", path_, ": ", why));
    }
    return absl::OkStatus();
  }

  void Enqueue(Op op, std::unique_ptr<std::promise<absl::Status>> done) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      queue_.push_back({std::move(op), std::move(done)});
    }
    wake_.notify_one();
  }

  std::future<absl::Status> Submit(Op op) {
    auto done = std::make_unique<std::promise<absl::Status>>();
    std::future<absl::Status> f = done->get_future();
    Enqueue(std::move(op), std::move(done));
    return f;
  }

  // Takes everything queued, runs it in one transaction, commits, answers.
  void WriterLoop() {
    while (true) {
      std::deque<Pending> batch;
      {
        std::unique_lock<std::mutex> lock(mu_);
        wake_.wait(lock, [&] { return stop_ || !queue_.empty(); });
        if (queue_.empty()) return;  // stopping, and nothing left
        batch.swap(queue_);
      }
      std::vector<absl::Status> results;
      results.reserve(batch.size());
      absl::Status commit;
      const auto began = std::chrono::steady_clock::now();
      {
        std::lock_guard<std::mutex> db_lock(db_mu_);
        commit = Exec("BEGIN IMMEDIATE");
        for (Pending& p : batch) results.push_back(commit.ok() ? p.op(*this) : commit);
        if (commit.ok()) commit = Exec("COMMIT");
        if (!commit.ok()) (void)Exec("ROLLBACK");
      }
      const std::chrono::duration<double> took = std::chrono::steady_clock::now() - began;
      std::lock_guard<std::mutex> lock(mu_);
      if (observe_commit_) observe_commit_(took.count());
      ++commits_;
      for (size_t i = 0; i < batch.size(); ++i) {
        const absl::Status s = commit.ok() ? results[i] : commit;
        if (batch[i].done) {
          batch[i].done->set_value(s);
        } else if (!s.ok() && unwaited_error_.ok()) {
          unwaited_error_ = s;
        }
      }
    }
  }

  const std::string path_;
  sqlite3* db_ = nullptr;
  std::mutex db_mu_;  // the connection: the writer thread, and Load before it writes
  std::vector<std::unique_ptr<Stmt>> stmts_;
  mutable std::mutex mu_;
  std::condition_variable wake_;
  std::deque<Pending> queue_;
  bool stop_ = false;
  int64_t commits_ = 0;
  absl::Status unwaited_error_;
  std::function<void(double)> observe_commit_;  // under mu_
  std::thread writer_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<Journal>> Journal::Open(const std::string& dir) {
  auto j = std::make_unique<SqliteJournal>(dir + "/journal.db");
  if (auto s = j->Init(); !s.ok()) return s;
  return j;
}

}  // namespace ringmaster::server
