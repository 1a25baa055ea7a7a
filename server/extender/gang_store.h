// What the extender keeps across a restart, and in what form: the
// ExtenderStore it writes to (serve's journal) and its records there, each
// Node object learned from a request ("node", its text as sent), the Pod
// object of each gang member ("pod") and each gang's record ("gang": its
// own fields and its members' places, as JSON). Owns that format both ways:
// GangStore writes the records as they change, ReadRecords and ReadGang read
// them back with the errors that name a record that does not read. What a
// restored gang means to the engine stays with the extender
// (Extender::Restore).
#ifndef RINGMASTER_SERVER_EXTENDER_GANG_STORE_H_
#define RINGMASTER_SERVER_EXTENDER_GANG_STORE_H_

#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "scheduler/job.h"
#include "scheduler/state.h"
#include "server/extender/gang.h"

namespace ringmaster::server {

// Where the extender keeps what it knows across a restart: the daemon's
// journal (Journal::PutExtenderState). Records are (kind, name) -> text.
class ExtenderStore {
 public:
  virtual ~ExtenderStore() = default;
  // Queued, not waited for: the record is now `value`; empty removes it.
  virtual void Put(const std::string& kind, const std::string& name, std::string value) = 0;
  // Waits until everything Put so far is durable.
  virtual absl::Status Sync() = 0;
};

// One record of an ExtenderStore, as read back after a restart.
struct StoredRecord {
  std::string kind;
  std::string name;
  std::string value;
};

// Writes the extender's records as they change: nodes and pods at once,
// gangs marked changed (Touch) at the next Flush, so that a gang changed
// several times in one call is written once. Without a store (null) it
// writes nothing. Not thread-safe: the extender calls it under its lock.
class GangStore {
 public:
  explicit GangStore(ExtenderStore* store) : store_(store) {}

  // A Node object learned from a request, as it was sent.
  void PutNode(const std::string& name, std::string_view text);
  // A member's Pod object (written once, when it joins its gang).
  void PutPod(const GangMember& member);
  void ErasePod(const std::string& pod_key);
  // Removes the gang's record now (a gang that was not restored).
  void EraseGang(const std::string& gang_name);
  // Marks the gang changed, or gone: the next Flush writes it.
  void Touch(const std::string& gang_name);
  // Writes the record of every gang marked since the last Flush as `gangs`
  // holds it (its submissions so far from `attempts`, its job from
  // `state`), or removes it when `gangs` no longer has it.
  void Flush(const std::map<std::string, Gang>& gangs, const std::map<std::string, int>& attempts,
             const scheduler::State& state);

 private:
  ExtenderStore* const store_;
  std::set<std::string> dirty_;
};

// The text of a gang's record: `attempt` is how many times it was submitted
// so far, `job` its engine job (null until submitted).
std::string GangRecord(const Gang& gang, int attempt, const scheduler::Job* job);

// DataLoss naming a record: "journal: extender KIND 'NAME': WHY".
absl::Status BadRecord(absl::string_view kind, absl::string_view name, absl::string_view why);

// A store's records, read back by kind (the nodes are handed over as read).
struct StoredRecords {
  std::map<std::string, nlohmann::json> pods;  // by "namespace/name"
  std::vector<std::pair<std::string, nlohmann::json>> gangs;  // in the store's order
};

// Reads `records` in order: each node record is handed to `node` as it is
// read (an error it returns is DataLoss naming the record), pods and gangs
// are kept. DataLoss naming the first record that is not JSON or of an
// unknown kind.
absl::StatusOr<StoredRecords> ReadRecords(
    const std::vector<StoredRecord>& records,
    absl::FunctionRef<absl::Status(const std::string& name, const nlohmann::json& node)> node);

// A gang's record, read back.
struct StoredGang {
  Gang gang;  // its members (their pods read from their records) and places; no job yet
  int attempt = 0;
  // Present when the gang was submitted.
  struct Job {
    std::string name;
    int64_t created = 0;
    int64_t generation = 0;
    scheduler::Timestamp deadline = -1;  // of its reservations
  };
  std::optional<Job> job;
};

// Reads the record of gang `name` with its members' Pod objects from
// `pods`. DataLoss naming the gang and what does not read: a field missing
// or of the wrong type, a member's pod missing or unreadable, no members.
absl::StatusOr<StoredGang> ReadGang(const std::string& name, const nlohmann::json& record,
                                    const std::map<std::string, nlohmann::json>& pods);

}  // namespace ringmaster::server

#endif  // RINGMASTER_SERVER_EXTENDER_GANG_STORE_H_
