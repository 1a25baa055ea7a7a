#include "server/journal/journal.h"

#include <fcntl.h>
#include <sqlite3.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <ctime>
#include <condition_variable>
#include <deque>
#include <functional>
#include <future>
#include <limits>
#include <map>
#include <mutex>
#include <thread>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "common/status_macros.h"

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
CREATE TABLE IF NOT EXISTS job_speed (job TEXT PRIMARY KEY, observations TEXT NOT NULL) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS queue_usage (
  queue TEXT PRIMARY KEY, gpu_seconds REAL NOT NULL, half_life_ms INTEGER NOT NULL, valued_at INTEGER NOT NULL)
  WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS ended_jobs (
  seq INTEGER PRIMARY KEY, job TEXT NOT NULL, queue TEXT NOT NULL, min_gpu_milli INTEGER NOT NULL,
  phase INTEGER NOT NULL, attained_milli_ms INTEGER NOT NULL, started INTEGER NOT NULL,
  last_stopped INTEGER NOT NULL, ended_at INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS job_history (
  job TEXT PRIMARY KEY, attained_milli_ms INTEGER NOT NULL, attained_at INTEGER NOT NULL,
  held_gpu_milli INTEGER NOT NULL, running INTEGER NOT NULL, started INTEGER NOT NULL,
  last_stopped INTEGER NOT NULL, last_resize INTEGER NOT NULL, yielded_to TEXT NOT NULL) WITHOUT ROWID;
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

// Job names (any bytes) as one text: each as its length, ':', the name
// ("1:a3:b,c").
std::string NamesText(const std::vector<std::string>& names) {
  std::string out;
  for (const std::string& n : names) absl::StrAppend(&out, n.size(), ":", n);
  return out;
}

bool ParseNames(const std::string& text, std::vector<std::string>* out) {
  size_t at = 0;
  while (at < text.size()) {
    const size_t colon = text.find(':', at);
    size_t n = 0;
    if (colon == std::string::npos || !absl::SimpleAtoi(absl::string_view(text).substr(at, colon - at), &n) ||
        n == 0 || n > text.size() - colon - 1) {
      return false;
    }
    out->push_back(text.substr(colon + 1, n));
    at = colon + 1 + n;
  }
  return true;
}

// What an operator can do about a journal serve refuses to start on.
std::string FreshHint(const std::string& dir) {
  return absl::StrCat("; restore it from a backup (`ringmaster state backup`), or start with an empty journal on "
                      "purpose: serve --fresh-state, which moves the journal files into ",
                      dir, "/set-aside-TIME/ (never deletes them)");
}

// Reads the columns of one row of `table`, checking each value's type (and
// range); the first value that does not parse is kept as the row's error,
// naming the table, the row and the column.
class RowReader {
 public:
  RowReader(sqlite3* db, sqlite3_stmt* s, const std::string& path, const char* table, int64_t number)
      : db_(db), s_(s), path_(path), table_(table), number_(number) {}

  // The row's key, for the error ("job 'a'"), once it is read.
  void Key(std::string key) { key_ = std::move(key); }
  // A TEXT column.
  std::string Text(int col, const char* name) {
    if (!Expect(col, name, SQLITE_TEXT, SQLITE_TEXT, "text")) return {};
    const unsigned char* p = sqlite3_column_text(s_, col);
    if (p == nullptr) {
      Fail(name, "no value (out of memory or damaged)");
      return {};
    }
    return std::string(reinterpret_cast<const char*>(p), static_cast<size_t>(sqlite3_column_bytes(s_, col)));
  }
  // A BLOB column (bytes; TEXT written by hand is taken as its bytes).
  std::string Bytes(int col, const char* name) {
    if (!Expect(col, name, SQLITE_BLOB, SQLITE_TEXT, "bytes")) return {};
    const void* p = sqlite3_column_blob(s_, col);
    const int n = sqlite3_column_bytes(s_, col);
    if (n == 0) return {};  // a zero-length blob reads as a null pointer
    if (p == nullptr) {
      Fail(name, "no value (out of memory or damaged)");
      return {};
    }
    return std::string(static_cast<const char*>(p), static_cast<size_t>(n));
  }
  // An INTEGER column within [min, max].
  int64_t Int(int col, const char* name, int64_t min, int64_t max) {
    if (!Expect(col, name, SQLITE_INTEGER, SQLITE_INTEGER, "an integer")) return 0;
    const int64_t v = sqlite3_column_int64(s_, col);
    if (v < min || v > max) {
      Fail(name, absl::StrCat(v, " is out of range [", min, ", ", max, "]"));
      return 0;
    }
    return v;
  }
  // A REAL column (an INTEGER is taken as its value) within [min, max]
  // (NaN is not).
  double Real(int col, const char* name, double min, double max) {
    if (!Expect(col, name, SQLITE_FLOAT, SQLITE_INTEGER, "a real")) return 0;
    const double v = sqlite3_column_double(s_, col);
    if (!(v >= min && v <= max)) {
      Fail(name, absl::StrCat(v, " is out of range [", min, ", ", max, "]"));
      return 0;
    }
    return v;
  }
  void Fail(const char* column, const std::string& why) {
    if (!status_.ok()) return;
    status_ = absl::DataLossError(absl::StrCat("journal ", path_, ": table ", table_, ", row ", number_,
                                               key_.empty() ? "" : absl::StrCat(" (", key_, ")"), ", column ",
                                               column, ": ", why));
  }
  const absl::Status& status() const { return status_; }

 private:
  bool Expect(int col, const char* name, int type, int also, const char* want) {
    if (!status_.ok()) return false;
    const int got = sqlite3_column_type(s_, col);
    if (got == type || got == also) return true;
    const char* kNames[] = {"?", "an integer", "a real", "text", "a blob", "NULL"};
    std::string why = absl::StrCat(got >= 1 && got <= 5 ? kNames[got] : "an unknown type", ", expected ", want);
    if (const int rc = sqlite3_errcode(db_); rc != SQLITE_OK && rc != SQLITE_ROW && rc != SQLITE_DONE) {
      absl::StrAppend(&why, " (the file is damaged: ", sqlite3_errmsg(db_), ")");
    }
    Fail(name, why);
    return false;
  }

  sqlite3* db_;
  sqlite3_stmt* s_;
  const std::string& path_;
  const char* table_;
  int64_t number_;
  std::string key_;
  absl::Status status_;
};

bool Exists(const std::string& path, struct stat* st = nullptr) {
  struct stat ignored;
  return ::lstat(path.c_str(), st ? st : &ignored) == 0;
}

// DIR can be written: a file can be created (and removed) there.
absl::Status ProbeWritable(const std::string& dir) {
  const std::string probe = absl::StrCat(dir, "/.ringmaster-write-probe-", ::getpid());
  const int fd = ::open(probe.c_str(), O_WRONLY | O_CREAT | O_EXCL, 0600);
  if (fd < 0) {
    return absl::FailedPreconditionError(absl::StrCat("state directory ", dir, " is not writable (",
                                                      std::strerror(errno),
                                                      "): serve writes its journal there; give a writable --state"));
  }
  ::close(fd);
  ::unlink(probe.c_str());
  return absl::OkStatus();
}

constexpr const char* kJournalFiles[] = {"journal.db", "journal.db-wal", "journal.db-shm", "journal.db-journal"};

// The names of the journal files present in DIR.
std::vector<std::string> JournalFilesIn(const std::string& dir) {
  std::vector<std::string> present;
  for (const char* f : kJournalFiles) {
    if (Exists(absl::StrCat(dir, "/", f))) present.push_back(f);
  }
  return present;
}

// Moves the journal files present into DIR/set-aside-TIME/ (serve --fresh-state).
absl::Status SetAside(const std::string& dir) {
  const std::vector<std::string> present = JournalFilesIn(dir);
  if (present.empty()) return absl::OkStatus();
  char stamp[32];
  const std::time_t now = std::time(nullptr);
  std::tm utc;
  gmtime_r(&now, &utc);
  std::strftime(stamp, sizeof stamp, "%Y%m%dT%H%M%SZ", &utc);
  std::string aside = absl::StrCat(dir, "/set-aside-", stamp);
  for (int n = 2; ::mkdir(aside.c_str(), 0755) != 0; ++n) {
    if (errno != EEXIST || n > 100) {
      return absl::FailedPreconditionError(absl::StrCat(aside, ": cannot create: ", std::strerror(errno)));
    }
    aside = absl::StrCat(dir, "/set-aside-", stamp, "-", n);
  }
  for (const std::string& f : present) {
    const std::string from = absl::StrCat(dir, "/", f), to = absl::StrCat(aside, "/", f);
    if (::rename(from.c_str(), to.c_str()) != 0) {
      return absl::FailedPreconditionError(absl::StrCat(from, ": cannot move to ", to, ": ", std::strerror(errno)));
    }
  }
  return absl::OkStatus();
}

// The refusals of Journal::Open that need no SQLite (see journal.h).
absl::Status CheckStateDir(const std::string& dir, const JournalOpenOptions& options) {
  RM_RETURN_IF_ERROR(ProbeWritable(dir));
  if (options.fresh) return SetAside(dir);
  const std::string db = dir + "/journal.db";
  struct stat st;
  if (Exists(db, &st)) {
    if (S_ISREG(st.st_mode) && st.st_size == 0) {
      return absl::FailedPreconditionError(
          absl::StrCat("journal ", db, " is empty (0 bytes): what it held is lost, and serve does not start on it",
                       FreshHint(dir)));
    }
    return absl::OkStatus();
  }
  std::vector<std::string> found = JournalFilesIn(dir);
  for (const std::string& f : options.other_state) {
    if (Exists(absl::StrCat(dir, "/", f))) found.push_back(f);
  }
  if (!found.empty()) {
    return absl::FailedPreconditionError(absl::StrCat("journal ", db, " is missing, but ", dir,
                                                      " holds a daemon's state (", absl::StrJoin(found, ", "),
                                                      "): serve does not start without its journal",
                                                      FreshHint(dir)));
  }
  return absl::OkStatus();
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
  Stmt& Real(int i, double v) {
    sqlite3_bind_double(s_, i, v);
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
  explicit SqliteJournal(std::string dir) : dir_(std::move(dir)), path_(dir_ + "/journal.db") {}
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
    // Never SQLITE_OPEN_CREATE on a file that exists: CheckStateDir decided
    // whether a new journal may begin.
    const int create = Exists(path_) ? 0 : SQLITE_OPEN_CREATE;
    if (sqlite3_open_v2(path_.c_str(), &db_, SQLITE_OPEN_READWRITE | create | SQLITE_OPEN_NOMUTEX, nullptr) !=
        SQLITE_OK) {
      return Error("cannot open");
    }
    sqlite3_busy_timeout(db_, 5000);
    // Closing the last connection copies the WAL into journal.db (and
    // removes the WAL): not until the journal was read whole (Load), so that
    // a refused journal is left exactly as it was found.
    sqlite3_db_config(db_, SQLITE_DBCONFIG_NO_CKPT_ON_CLOSE, 1, nullptr);
    if (sqlite3_db_readonly(db_, "main") == 1) {
      return absl::FailedPreconditionError(
          absl::StrCat("journal ", path_, " is read-only: serve must write it; make it writable"));
    }
    // Reading the header first tells a damaged or foreign file apart.
    if (auto s = Exec("PRAGMA schema_version;"); !s.ok()) return Damaged(s);
    if (auto s = Exec("PRAGMA journal_mode=WAL; PRAGMA synchronous=FULL;"); !s.ok()) return Damaged(s);
    if (auto s = Exec(kSchema); !s.ok()) return Damaged(s);
    std::string version;
    {
      Stmt get(db_, "SELECT value FROM meta WHERE key='schema'");
      if (!get.ok()) return Damaged(Error("reading the schema version"));
      const int rc = sqlite3_step(get.get());
      if (rc == SQLITE_ROW) {
        RowReader row(db_, get.get(), path_, "meta", 1);
        row.Key("key 'schema'");
        version = row.Bytes(0, "value");
        if (!row.status().ok()) return Damaged(row.status());
        if (version.empty()) return Damaged(absl::DataLossError(absl::StrCat("journal ", path_, ": schema version: empty")));
      } else if (rc != SQLITE_DONE) {
        return Damaged(Error("reading the schema version"));
      }
    }
    if (!version.empty() && version != absl::StrCat(kSchemaVersion)) {
      return absl::FailedPreconditionError(absl::StrCat("journal ", path_, ": schema version ", version,
                                                        ", this ringmaster reads version ", kSchemaVersion));
    }
    if (version.empty()) {  // a new journal: its first write
      RM_RETURN_IF_ERROR(ProbeWrite());
      sqlite3_db_config(db_, SQLITE_DBCONFIG_NO_CKPT_ON_CLOSE, 0, nullptr);
    }
    writer_ = std::thread([this] { WriterLoop(); });
    return absl::OkStatus();
  }

  // One write (the schema row), so that a journal that cannot be written
  // (read-only mount, no space) is refused at start, not at the first
  // submission.
  absl::Status ProbeWrite() {
    if (auto s = Exec(absl::StrCat("BEGIN IMMEDIATE; INSERT OR REPLACE INTO meta VALUES('schema','", kSchemaVersion,
                                   "'); COMMIT;"));
        !s.ok()) {
      (void)Exec("ROLLBACK");  // there may be no transaction left to roll back
      return absl::FailedPreconditionError(absl::StrCat(s.message(), " (writing at start: serve must write its journal)"));
    }
    return absl::OkStatus();
  }

  absl::StatusOr<Recovered> Load() override {
    std::lock_guard<std::mutex> db_lock(db_mu_);
    Recovered r;
    std::map<std::string, std::vector<JournaledTask>> tasks;
    RM_RETURN_IF_ERROR(Scan("tasks", "SELECT job, task, role, node, gpus FROM tasks", [&](RowReader& row) {
      const std::string job = row.Text(0, "job");
      JournaledTask t;
      t.index = static_cast<uint32_t>(row.Int(1, "task", 0, UINT32_MAX));
      row.Key(absl::StrCat("job '", job, "' task ", t.index));
      t.role = static_cast<int>(row.Int(2, "role", 0, INT32_MAX));
      t.node = row.Text(3, "node");
      const std::string gpus = row.Text(4, "gpus");
      if (row.status().ok() && !ParseGpus(gpus, &t.gpus)) {
        row.Fail("gpus", absl::StrCat("bad gpus '", gpus, "' (GPU indices 0-4096, comma-separated)"));
      }
      if (row.status().ok()) tasks[job].push_back(std::move(t));
    }));
    RM_RETURN_IF_ERROR(Scan("jobs", "SELECT name, seq, spec, created, phase, generation FROM jobs ORDER BY seq",
                            [&](RowReader& row) {
                              JournaledJob j;
                              j.name = row.Text(0, "name");
                              row.Key(absl::StrCat("job '", j.name, "'"));
                              j.seq = row.Int(1, "seq", 0, INT64_MAX);
                              j.spec = row.Bytes(2, "spec");
                              j.created_ms = row.Int(3, "created", INT64_MIN, INT64_MAX);
                              j.phase = static_cast<int>(row.Int(4, "phase", 0, INT32_MAX));
                              j.generation = row.Int(5, "generation", 0, INT64_MAX);
                              if (!row.status().ok()) return;
                              if (auto it = tasks.find(j.name); it != tasks.end()) j.tasks = std::move(it->second);
                              r.jobs.push_back(std::move(j));
                            }));
    RM_RETURN_IF_ERROR(
        Scan("extender_state", "SELECT kind, name, value FROM extender_state ORDER BY rowid", [&](RowReader& row) {
          ExtenderRecord e;
          e.kind = row.Text(0, "kind");
          e.name = row.Text(1, "name");
          row.Key(absl::StrCat(e.kind, " '", e.name, "'"));
          e.value = row.Bytes(2, "value");
          if (row.status().ok()) r.extender.push_back(std::move(e));
        }));
    RM_RETURN_IF_ERROR(Scan("job_speed", "SELECT job, observations FROM job_speed ORDER BY job", [&](RowReader& row) {
      std::string job = row.Text(0, "job");
      row.Key(absl::StrCat("job '", job, "'"));
      std::string text = row.Text(1, "observations");
      if (row.status().ok()) r.speeds.emplace_back(std::move(job), std::move(text));
    }));
    RM_RETURN_IF_ERROR(Scan(
        "queue_usage", "SELECT queue, gpu_seconds, half_life_ms, valued_at FROM queue_usage ORDER BY queue",
        [&](RowReader& row) {
          JournaledQueueUsage u;
          u.queue = row.Text(0, "queue");
          row.Key(absl::StrCat("queue '", u.queue, "'"));
          u.gpu_seconds = row.Real(1, "gpu_seconds", 0, std::numeric_limits<double>::max());
          u.half_life_ms = row.Int(2, "half_life_ms", 1, INT64_MAX);
          u.valued_at_ms = row.Int(3, "valued_at", INT64_MIN, INT64_MAX);
          if (row.status().ok()) r.queue_usage.push_back(std::move(u));
        },
        &r.skipped));
    RM_RETURN_IF_ERROR(Scan(
        "ended_jobs",
        "SELECT seq, job, queue, min_gpu_milli, phase, attained_milli_ms, started, last_stopped, ended_at "
        "FROM ended_jobs ORDER BY seq",
        [&](RowReader& row) {
          JournaledEndedJob e;
          e.seq = row.Int(0, "seq", 1, INT64_MAX);
          row.Key(absl::StrCat("seq ", e.seq));
          e.name = row.Text(1, "job");
          row.Key(absl::StrCat("seq ", e.seq, ", job '", e.name, "'"));
          e.queue = row.Text(2, "queue");
          e.min_gpu_milli = row.Int(3, "min_gpu_milli", 0, INT64_MAX);
          e.phase = static_cast<int>(row.Int(4, "phase", 0, INT32_MAX));
          e.attained_milli_ms = row.Int(5, "attained_milli_ms", 0, INT64_MAX);
          e.started_ms = row.Int(6, "started", -1, INT64_MAX);
          e.last_stopped_ms = row.Int(7, "last_stopped", -1, INT64_MAX);
          e.ended_at_ms = row.Int(8, "ended_at", INT64_MIN, INT64_MAX);
          if (row.status().ok()) r.ended_jobs.push_back(std::move(e));
        },
        &r.ended_skipped));
    RM_RETURN_IF_ERROR(Scan(
        "job_history",
        "SELECT job, attained_milli_ms, attained_at, held_gpu_milli, running, started, last_stopped, last_resize, "
        "yielded_to FROM job_history ORDER BY job",
        [&](RowReader& row) {
          JournaledJobHistory h;
          h.name = row.Text(0, "job");
          row.Key(absl::StrCat("job '", h.name, "'"));
          h.attained_milli_ms = row.Int(1, "attained_milli_ms", 0, INT64_MAX);
          h.attained_at_ms = row.Int(2, "attained_at", 0, INT64_MAX);
          h.held_gpu_milli = row.Int(3, "held_gpu_milli", 0, INT64_MAX);
          h.running = row.Int(4, "running", 0, 1) == 1;
          h.started_ms = row.Int(5, "started", -1, INT64_MAX);
          h.last_stopped_ms = row.Int(6, "last_stopped", -1, INT64_MAX);
          h.last_resize_ms = row.Int(7, "last_resize", -1, INT64_MAX);
          const std::string yielded = row.Text(8, "yielded_to");
          if (row.status().ok() && !ParseNames(yielded, &h.yielded_to)) {
            row.Fail("yielded_to", absl::StrCat("bad names '", yielded, "' (each LENGTH:NAME)"));
          }
          if (row.status().ok()) r.histories.push_back(std::move(h));
        },
        &r.history_skipped));
    RM_RETURN_IF_ERROR(Scan(
        "meta", "SELECT value FROM meta WHERE key='history_seen'",
        [&](RowReader& row) {
          row.Key("key 'history_seen'");
          r.history_seen_ms = row.Int(0, "value", 0, INT64_MAX);
        },
        &r.history_skipped));
    RM_RETURN_IF_ERROR(Scan("meta", "SELECT value FROM meta WHERE key='policy'", [&](RowReader& row) {
      row.Key("key 'policy'");
      r.policy_yaml = row.Bytes(0, "value");
    }));
    // Read whole: it may be written now, and checkpointed on close.
    RM_RETURN_IF_ERROR(ProbeWrite());
    sqlite3_db_config(db_, SQLITE_DBCONFIG_NO_CKPT_ON_CLOSE, 0, nullptr);
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

  void SetSpeed(const std::string& job, std::string observations) override {
    Enqueue([job, observations = std::move(observations)](SqliteJournal& j) {
      const int rc = observations.empty() ? j.Prepared(kDeleteSpeed).Text(1, job).Run()
                                          : j.Prepared(kPutSpeed).Text(1, job).Text(2, observations).Run();
      if (rc != SQLITE_DONE) return j.Error(absl::StrCat("recording the speed of job '", job, "'"));
      return absl::OkStatus();
    }, nullptr);
  }

  void SetQueueUsage(std::vector<JournaledQueueUsage> rows) override {
    Enqueue([rows = std::move(rows)](SqliteJournal& j) {
      if (j.Prepared(kClearQueueUsage).Run() != SQLITE_DONE) return j.Error("clearing the queues' usage");
      for (const JournaledQueueUsage& u : rows) {
        if (j.Prepared(kPutQueueUsage).Text(1, u.queue).Real(2, u.gpu_seconds).Int(3, u.half_life_ms)
                .Int(4, u.valued_at_ms).Run() != SQLITE_DONE) {
          return j.Error(absl::StrCat("recording the usage of queue '", u.queue, "'"));
        }
      }
      return absl::OkStatus();
    }, nullptr);
  }

  void AddEndedJobs(std::vector<JournaledEndedJob> rows, int64_t keep) override {
    Enqueue([rows = std::move(rows), keep](SqliteJournal& j) {
      for (const JournaledEndedJob& e : rows) {
        if (j.Prepared(kAddEndedJob).Text(1, e.name).Text(2, e.queue).Int(3, e.min_gpu_milli).Int(4, e.phase)
                .Int(5, e.attained_milli_ms).Int(6, e.started_ms).Int(7, e.last_stopped_ms).Int(8, e.ended_at_ms)
                .Run() != SQLITE_DONE) {
          return j.Error(absl::StrCat("recording the end of job '", e.name, "'"));
        }
      }
      if (j.Prepared(kPruneEndedJobs).Int(1, std::max<int64_t>(keep, 0)).Run() != SQLITE_DONE) {
        return j.Error("pruning the ended jobs");
      }
      return absl::OkStatus();
    }, nullptr);
  }

  void SetJobHistories(std::vector<JournaledJobHistory> put, std::vector<std::string> drop,
                       int64_t seen_ms) override {
    Enqueue([put = std::move(put), drop = std::move(drop), seen_ms](SqliteJournal& j) {
      for (const JournaledJobHistory& h : put) {
        if (j.Prepared(kPutHistory).Text(1, h.name).Int(2, h.attained_milli_ms).Int(3, h.attained_at_ms)
                .Int(4, h.held_gpu_milli).Int(5, h.running ? 1 : 0).Int(6, h.started_ms).Int(7, h.last_stopped_ms)
                .Int(8, h.last_resize_ms).Text(9, NamesText(h.yielded_to)).Run() != SQLITE_DONE) {
          return j.Error(absl::StrCat("recording the history of job '", h.name, "'"));
        }
      }
      for (const std::string& name : drop) {
        if (j.Prepared(kDeleteHistory).Text(1, name).Run() != SQLITE_DONE) {
          return j.Error(absl::StrCat("dropping the history of job '", name, "'"));
        }
      }
      if (j.Prepared(kSetHistorySeen).Int(1, seen_ms).Run() != SQLITE_DONE) return j.Error("recording history_seen");
      return absl::OkStatus();
    }, nullptr);
  }

  void SetCommitObserver(std::function<void(double)> observe) override {
    std::lock_guard<std::mutex> lock(mu_);
    observe_commit_ = std::move(observe);
  }

  void SetErrorObserver(std::function<void(const absl::Status&)> observe) override {
    std::lock_guard<std::mutex> lock(mu_);
    observe_error_ = std::move(observe);
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
    kPutSpeed,
    kDeleteSpeed,
    kClearQueueUsage,
    kPutQueueUsage,
    kAddEndedJob,
    kPruneEndedJobs,
    kPutHistory,
    kDeleteHistory,
    kSetHistorySeen,
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
        "INSERT OR REPLACE INTO job_speed(job, observations) VALUES(?,?)",
        "DELETE FROM job_speed WHERE job=?",
        "DELETE FROM queue_usage",
        "INSERT OR REPLACE INTO queue_usage(queue, gpu_seconds, half_life_ms, valued_at) VALUES(?,?,?,?)",
        // seq: SQLite's next rowid, one past the largest (pruning removes
        // only the smallest, so it never goes back).
        "INSERT INTO ended_jobs(job, queue, min_gpu_milli, phase, attained_milli_ms, started, last_stopped, ended_at) "
        "VALUES(?,?,?,?,?,?,?,?)",
        // The last ? rows by seq (seq is dense: rows are only appended, and
        // removed oldest first).
        "DELETE FROM ended_jobs WHERE seq <= (SELECT max(seq) FROM ended_jobs) - ?",
        "INSERT OR REPLACE INTO job_history(job, attained_milli_ms, attained_at, held_gpu_milli, running, started, "
        "last_stopped, last_resize, yielded_to) VALUES(?,?,?,?,?,?,?,?,?)",
        "DELETE FROM job_history WHERE job=?",
        // An integer, read back as one (Load).
        "INSERT OR REPLACE INTO meta(key, value) VALUES('history_seen', ?)",
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

  // Runs `sql` over `table`, handing each row to `read`; the first row that
  // does not parse (read leaves its error in the reader), or a step that
  // fails (a damaged file), is the error, naming the table and the row, with
  // how to start anyway. With `skipped` (a table of history, not of
  // acknowledgements), such a row's error is added there instead and the
  // scan goes on (a step that fails ends the table).
  absl::Status Scan(const char* table, const char* sql, const std::function<void(RowReader&)>& read,
                    std::vector<std::string>* skipped = nullptr) {
    Stmt q(db_, sql);
    if (!q.ok()) {
      absl::Status s = Error(absl::StrCat("reading table ", table));
      if (skipped == nullptr) return Damaged(s);
      skipped->push_back(std::string(s.message()));
      return absl::OkStatus();
    }
    int64_t number = 0;
    int rc;
    while ((rc = sqlite3_step(q.get())) == SQLITE_ROW) {
      RowReader row(db_, q.get(), path_, table, ++number);
      read(row);
      if (row.status().ok()) continue;
      if (skipped == nullptr) return Damaged(row.status());
      skipped->push_back(std::string(row.status().message()));
    }
    if (rc != SQLITE_DONE) {
      absl::Status s = Error(absl::StrCat("reading table ", table, ", row ", number + 1));
      if (skipped == nullptr) return Damaged(s);
      skipped->push_back(std::string(s.message()));
    }
    return absl::OkStatus();
  }

  // A file that is not a readable journal: `s` and how to start anyway.
  absl::Status Damaged(const absl::Status& s) const {
    return s.ok() ? s : absl::Status(s.code(), absl::StrCat(s.message(), FreshHint(dir_)));
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
        } else if (!s.ok()) {
          if (unwaited_error_.ok()) unwaited_error_ = s;
          if (observe_error_) observe_error_(s);
        }
      }
    }
  }

  const std::string dir_;
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
  std::function<void(const absl::Status&)> observe_error_;  // under mu_
  std::thread writer_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<Journal>> Journal::Open(const std::string& dir, const JournalOpenOptions& options) {
  struct stat st;
  if (::stat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
    return absl::NotFoundError(absl::StrCat("journal ", dir, "/journal.db: ", dir, " is not a directory"));
  }
  RM_RETURN_IF_ERROR(CheckStateDir(dir, options));
  auto j = std::make_unique<SqliteJournal>(dir);
  RM_RETURN_IF_ERROR(j->Init());
  return j;
}

namespace {

// One sqlite3 connection, closed on every path.
struct Connection {
  sqlite3* db = nullptr;
  ~Connection() {
    if (db) sqlite3_close(db);
  }
  std::string Why() const { return db ? sqlite3_errmsg(db) : "out of memory"; }
};

// The single integer `sql` answers on `c`.
absl::StatusOr<int64_t> Count(Connection& c, const std::string& path, const char* sql) {
  Stmt q(c.db, sql);
  if (!q.ok() || sqlite3_step(q.get()) != SQLITE_ROW || sqlite3_column_type(q.get(), 0) != SQLITE_INTEGER) {
    return absl::DataLossError(absl::StrCat(path, ": ", sql, ": ", c.Why()));
  }
  return sqlite3_column_int64(q.get(), 0);
}

}  // namespace

absl::StatusOr<BackupSummary> BackupJournal(const std::string& state_dir, const std::string& out_dir) {
  const std::string from = state_dir + "/journal.db";
  BackupSummary summary;
  summary.to = out_dir + "/journal.db";
  struct stat st;
  if (::stat(from.c_str(), &st) != 0 || !S_ISREG(st.st_mode) || st.st_size == 0) {
    return absl::NotFoundError(absl::StrCat(from, ": no journal to back up"));
  }
  if (::stat(out_dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
    return absl::NotFoundError(absl::StrCat(out_dir, ": not a directory"));
  }
  if (const auto there = JournalFilesIn(out_dir); !there.empty()) {
    return absl::AlreadyExistsError(
        absl::StrCat(out_dir, "/", there.front(), ": exists; a backup never overwrites a journal"));
  }
  {
    // Read-only: the backup never writes the live journal (serve's WAL and
    // -shm are shared with it).
    Connection src;
    if (sqlite3_open_v2(from.c_str(), &src.db, SQLITE_OPEN_READONLY, nullptr) != SQLITE_OK) {
      return absl::DataLossError(absl::StrCat(from, ": cannot open: ", src.Why()));
    }
    sqlite3_busy_timeout(src.db, 5000);
    Connection dst;
    if (sqlite3_open_v2(summary.to.c_str(), &dst.db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, nullptr) != SQLITE_OK) {
      return absl::FailedPreconditionError(absl::StrCat(summary.to, ": cannot create: ", dst.Why()));
    }
    sqlite3_backup* b = sqlite3_backup_init(dst.db, "main", src.db, "main");
    if (b == nullptr) return absl::DataLossError(absl::StrCat(from, ": backup: ", dst.Why()));
    // All pages in one step: one read transaction, so one consistent
    // snapshot; in WAL mode it does not block serve's writes.
    int rc = sqlite3_backup_step(b, -1);
    for (int tries = 0; (rc == SQLITE_BUSY || rc == SQLITE_LOCKED) && tries < 50; ++tries) {
      sqlite3_sleep(100);
      rc = sqlite3_backup_step(b, -1);
    }
    const int finished = sqlite3_backup_finish(b);
    if (rc != SQLITE_DONE || finished != SQLITE_OK) {
      const std::string why = rc != SQLITE_DONE ? sqlite3_errstr(rc) : dst.Why();
      ::unlink(summary.to.c_str());
      return absl::DataLossError(absl::StrCat(from, ": backup to ", summary.to, ": ", why));
    }
  }
  // The copy, checked as serve will read it.
  Connection copy;
  if (sqlite3_open_v2(summary.to.c_str(), &copy.db, SQLITE_OPEN_READWRITE, nullptr) != SQLITE_OK) {
    return absl::DataLossError(absl::StrCat(summary.to, ": cannot reopen the copy: ", copy.Why()));
  }
  {
    Stmt q(copy.db, "PRAGMA quick_check");
    const unsigned char* answer = nullptr;
    if (q.ok() && sqlite3_step(q.get()) == SQLITE_ROW) answer = sqlite3_column_text(q.get(), 0);
    const std::string verdict = answer ? reinterpret_cast<const char*>(answer) : copy.Why();
    if (verdict != "ok") {
      return absl::DataLossError(absl::StrCat(summary.to, ": the copy fails SQLite's quick_check: ", verdict,
                                              " (the journal in ", state_dir, " may be damaged)"));
    }
  }
  {
    Stmt q(copy.db, "SELECT value FROM meta WHERE key='schema'");
    const unsigned char* v = nullptr;
    if (q.ok() && sqlite3_step(q.get()) == SQLITE_ROW) v = sqlite3_column_text(q.get(), 0);
    if (v == nullptr || std::string(reinterpret_cast<const char*>(v)) != absl::StrCat(kSchemaVersion)) {
      return absl::FailedPreconditionError(
          absl::StrCat(from, ": not a ringmaster journal of schema version ", kSchemaVersion));
    }
  }
  RM_ASSIGN_OR_RETURN(summary.jobs, Count(copy, summary.to, "SELECT count(*) FROM jobs"));
  RM_ASSIGN_OR_RETURN(summary.extender, Count(copy, summary.to, "SELECT count(*) FROM extender_state"));
  return summary;
}

}  // namespace ringmaster::server
