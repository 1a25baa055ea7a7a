// The daemon's journal: what `ringmaster serve` accepted, in SQLite (WAL
// mode) in DIR/journal.db, so that nothing acknowledged is lost across a
// crash or restart.
//
// Contents (schema version 1):
//   jobs    one row per job the admin API accepted: name (unique), the order
//           of acceptance, its spec (api/admin.proto JobSpec bytes), when it
//           was accepted, its phase and membership generation;
//   tasks   the tasks that hold a node (allocations): job, task index, role,
//           node, GPU indices;
//   meta    the schema version and the policy in force (set by UpdatePolicy);
//   extender_state
//           what the Kubernetes extender knows (server/extender/gang_store.h): one row
//           per (kind, name) — the Node objects it learned and its gangs
//           (members, reservations, bindings) — as opaque text, in order of
//           first writing. Added within version 1 (CREATE IF NOT EXISTS):
//           an older journal gets it empty.
//   job_speed
//           what each job's workers measured of its speed (the daemon's
//           learned speed models, server/coordinator/learned_speed.h): one
//           row per job name, the observations as text (SpeedObservationsText).
//           Added within version 1 like extender_state.
//   queue_usage
//           each queue's decayed past use (proportion's usageHalfLife,
//           scheduler::DecayedUsage): one row per queue name, its GPU-seconds,
//           the half-life they were decayed with and when they were valued
//           (ms since the epoch), the whole table rewritten by each
//           SetQueueUsage (serve: every 30 s and at shutdown). Added within
//           version 1 like extender_state. History, not an acknowledgement:
//           a row that does not read is skipped (Recovered::skipped), never
//           a refusal.
//   ended_jobs
//           the jobs seen to end that teach the learners (gittins, backfill's
//           learned walltimes; scheduler/ended_job.h), one row each in the
//           order they ended (seq, given by the journal): name, queue, the
//           GPU milli of its minimum, ended phase, attained service, last
//           start and stop, when it ended. AddEndedJobs keeps the last
//           `keep` rows by seq (older ones are deleted in the same
//           transaction). Added within version 1 like extender_state.
//           History like queue_usage: a row that does not read is skipped
//           (Recovered::ended_skipped).
//   job_history
//           what each active job (the API's and the extender's pod gangs)
//           accumulated that the policy reads (scheduler::JobHistory;
//           server/daemon/job_history.h): one row per job name, its
//           attained service settled up to a time, the GPU milli it held
//           then, whether it ran, its last start, stop and resize, and the
//           jobs it yielded to; upserted when one of them changes, deleted
//           when the job ends. meta's 'history_seen' is when the daemon last
//           wrote it (ms since the epoch). Added within version 1 like
//           extender_state. History like queue_usage: a row that does not
//           read is skipped (Recovered::history_skipped).
// Queues are the policy's, so they are journaled with it.
//
// Writes go through one writer thread in the order they were called. Durable
// writes (AddJob, SetPhase, SetPolicy) return a future that is ready once
// their transaction is committed with synchronous=FULL (queue under your own
// lock, wait after releasing it); every write queued while one commit runs joins the next
// transaction (group commit), so many concurrent submissions share one fsync.
// Placement writes (SetPlacement) are queued and not waited for: after a
// crash a job may come back with an older placement, which the engine
// re-checks (Engine::RestoreJob) — never with a job missing.
//
// Thread-safe.
#ifndef RINGMASTER_SERVER_JOURNAL_JOURNAL_H_
#define RINGMASTER_SERVER_JOURNAL_JOURNAL_H_

#include <cstdint>
#include <functional>
#include <future>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"

namespace ringmaster::server {

struct JournaledTask {
  uint32_t index = 0;
  int role = 0;
  std::string node;
  std::vector<int16_t> gpus;
  bool operator==(const JournaledTask&) const = default;
};

struct JournaledJob {
  std::string name;
  int64_t seq = 0;          // order of acceptance (restored in this order)
  std::string spec;         // serialized admin.JobSpec
  int64_t created_ms = 0;
  int phase = 0;            // scheduler::JobPhase as an int
  int64_t generation = 0;
  std::vector<JournaledTask> tasks;  // tasks holding a node
};

struct ExtenderRecord {
  std::string kind;   // "node", "gang"
  std::string name;
  std::string value;
  bool operator==(const ExtenderRecord&) const = default;
};

struct JournaledQueueUsage {
  std::string queue;
  double gpu_seconds = 0;    // finite, >= 0
  int64_t half_life_ms = 0;  // > 0
  int64_t valued_at_ms = 0;
  bool operator==(const JournaledQueueUsage&) const = default;
};

// A job seen to end, as the learners read it (scheduler::EndedJob).
struct JournaledEndedJob {
  int64_t seq = 0;  // order of ending, given by the journal (AddEndedJobs ignores it)
  std::string name;
  std::string queue;
  int64_t min_gpu_milli = 0;      // >= 0
  int phase = 0;                  // scheduler::JobPhase as an int
  int64_t attained_milli_ms = 0;  // >= 0
  int64_t started_ms = -1;        // >= -1 (-1: never ran)
  int64_t last_stopped_ms = -1;   // >= -1
  int64_t ended_at_ms = 0;
  bool operator==(const JournaledEndedJob&) const = default;
};

// What an active job accumulated that the policy reads, by job name
// (scheduler::JobHistory with the jobs it yielded to by name).
struct JournaledJobHistory {
  std::string name;
  int64_t attained_milli_ms = 0;  // >= 0, settled up to attained_at_ms
  int64_t attained_at_ms = 0;     // >= 0
  int64_t held_gpu_milli = 0;     // >= 0
  bool running = false;
  int64_t started_ms = -1;        // >= -1 (-1: never ran)
  int64_t last_stopped_ms = -1;   // >= -1
  int64_t last_resize_ms = -1;    // >= -1
  std::vector<std::string> yielded_to;
  bool operator==(const JournaledJobHistory&) const = default;
};

struct Recovered {
  std::vector<JournaledJob> jobs;  // by seq
  std::string policy_yaml;         // empty: none was set through the API
  std::vector<ExtenderRecord> extender;  // in order of first writing
  std::vector<std::pair<std::string, std::string>> speeds;  // (job, observations) by job name
  std::vector<JournaledQueueUsage> queue_usage;  // by queue name
  // Rows of queue_usage left out because they did not read: each says the
  // table, the row and the column, and why (for the log).
  std::vector<std::string> skipped;
  std::vector<JournaledEndedJob> ended_jobs;  // by seq: the order they ended
  // Rows of ended_jobs left out, the same way.
  std::vector<std::string> ended_skipped;
  std::vector<JournaledJobHistory> histories;  // by job name
  // Rows of job_history left out, the same way.
  std::vector<std::string> history_skipped;
  // When job_history was last written (meta 'history_seen'); -1: never.
  int64_t history_seen_ms = -1;
};

struct JournalOpenOptions {
  // Start with an empty journal on purpose (serve --fresh-state): the
  // journal files present (journal.db and its -wal, -shm, -journal) are
  // first moved, never deleted, into DIR/set-aside-YYYYMMDDTHHMMSSZ/.
  bool fresh = false;
  // Entries of DIR that are the daemon's other state (serve passes
  // "executor"): with one of them present and no journal.db, the journal
  // was lost rather than never written, and Open refuses.
  std::vector<std::string> other_state;
};

class Journal {
 public:
  // Opens DIR/journal.db; DIR must exist. Creates the journal only where
  // none was ever written (no journal.db, and none of its -wal, -shm or
  // options.other_state in DIR), or with options.fresh. Refuses (the file is
  // never overwritten), with the path, SQLite's reason where it has one, and
  // how to start fresh on purpose:
  //  - DIR not writable (probed by creating a file), or journal.db read-only;
  //  - journal.db empty (0 bytes), or missing while other state is present;
  //  - a file that is not a journal (damaged, not a database, another schema
  //    version, unreadable).
  static absl::StatusOr<std::unique_ptr<Journal>> Open(const std::string& dir,
                                                       const JournalOpenOptions& options = {});
  virtual ~Journal() = default;

  // Everything recorded, for a restart. Call before any write. Every value
  // read is checked for NULL, type and range: a row that does not parse, or
  // a damaged file, is DataLoss naming the table, the row (its position and
  // key) and the column. Then one write at once (FailedPrecondition when the
  // journal cannot be written). Until a Load succeeded, an existing journal
  // is only read: closing it leaves journal.db and its WAL as they were
  // (no checkpoint on close).
  virtual absl::StatusOr<Recovered> Load() = 0;

  // Durable once the future is ready and OK. AlreadyExists when the name is
  // taken.
  virtual std::future<absl::Status> AddJob(JournaledJob job) = 0;
  // Durable: the job's phase (e.g. cancelled); its tasks are dropped when
  // the phase is terminal.
  virtual std::future<absl::Status> SetPhase(const std::string& name, int phase, bool terminal) = 0;
  virtual std::future<absl::Status> SetPolicy(const std::string& yaml) = 0;
  // Queued, not waited for: the job's phase, generation and tasks now.
  virtual void SetPlacement(const std::string& name, int phase, int64_t generation,
                            std::vector<JournaledTask> tasks) = 0;
  // Queued, not waited for (Flush waits): the extender's record (kind,
  // name) is now `value`; an empty value removes it. A record keeps its
  // place in the order of Load when it is overwritten.
  virtual void PutExtenderState(const std::string& kind, const std::string& name, std::string value) = 0;
  // Queued, not waited for: what the job's workers measured of its speed
  // (an empty text removes the row). A crash may lose the last ones: the
  // model is learned again from the next reports.
  virtual void SetSpeed(const std::string& job, std::string observations) = 0;
  // Queued, not waited for (Flush waits): the queues' decayed past use is
  // now `rows` (the table is replaced: a queue not in `rows` has none). A
  // crash loses what was used since the last call.
  virtual void SetQueueUsage(std::vector<JournaledQueueUsage> rows) = 0;
  // Queued, not waited for (Flush waits): `rows` are appended to
  // ended_jobs in their order (each given the next seq), then only the last
  // `keep` rows (>= 0) by seq are kept. A crash loses those not committed.
  virtual void AddEndedJobs(std::vector<JournaledEndedJob> rows, int64_t keep) = 0;
  // Queued, not waited for (Flush waits): each row of `put` replaces its
  // job's row of job_history, each name of `drop` loses its row, and
  // meta's 'history_seen' becomes `seen_ms`. A crash loses those not
  // committed.
  virtual void SetJobHistories(std::vector<JournaledJobHistory> put, std::vector<std::string> drop,
                               int64_t seen_ms) = 0;
  // Called with each transaction's duration in seconds (BEGIN to COMMIT,
  // the fsync included), on the writer thread (journal write latency in
  // /metrics). May be set at any time.
  virtual void SetCommitObserver(std::function<void(double seconds)> observe) = 0;
  // Called with the error of each write nobody waits for (SetPlacement,
  // PutExtenderState) that failed — e.g. "database or disk is full" — on the
  // writer thread, as it fails (serve logs it; Flush still returns the
  // first). May be set at any time.
  virtual void SetErrorObserver(std::function<void(const absl::Status&)> observe) = 0;
  // Waits until everything queued so far is committed; the first error of
  // an unwaited write since the last Flush, if any.
  virtual absl::Status Flush() = 0;
  // Commits per transaction so far (tests and benchmarks).
  virtual int64_t commits() const = 0;
  virtual const std::string& path() const = 0;
};

struct BackupSummary {
  std::string to;        // OUT/journal.db
  int64_t jobs = 0;      // rows of the copy's tables
  int64_t extender = 0;
};

// Copies the journal in STATE_DIR (DIR/journal.db with its WAL: what serve
// has committed) to OUT/journal.db with SQLite's online backup API, safely
// while serve runs and writes (the copy is one consistent snapshot; serve is
// not stopped). OUT must exist and hold no journal.db (never overwritten).
// The copy is checked (PRAGMA quick_check, schema version) and is a state
// directory serve can start on.
absl::StatusOr<BackupSummary> BackupJournal(const std::string& state_dir, const std::string& out_dir);

}  // namespace ringmaster::server

#endif  // RINGMASTER_SERVER_JOURNAL_JOURNAL_H_
