// The extender's records and their format (see gang_store.h).
#include "server/extender/gang_store.h"

#include "absl/strings/str_cat.h"

namespace ringmaster::server {
namespace {

// Records hold what requests carried: text that is not UTF-8 is kept with
// replacement characters rather than refused.
std::string Dump(const nlohmann::json& j) { return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace); }

// ReadGang without the gang's name in its errors; nlohmann's exceptions
// (a field missing or of the wrong type) pass through.
absl::StatusOr<StoredGang> ReadGangFields(const std::string& name, const nlohmann::json& record,
                                          const std::map<std::string, nlohmann::json>& pods) {
  StoredGang out;
  Gang& g = out.gang;
  g.name = name;
  g.min_member = record.at("min_member").get<int>();
  g.unresolvable = record.at("unresolvable").get<std::string>();
  for (const nlohmann::json& mj : record.at("members")) {
    const std::string key = mj.at("pod").get<std::string>();
    auto raw = pods.find(key);
    if (raw == pods.end()) return absl::DataLossError(absl::StrCat("pod ", key, " is missing"));
    auto pod = ReadPod(raw->second);
    if (!pod.ok()) return absl::DataLossError(absl::StrCat("pod ", key, ": ", pod.status().message()));
    GangMember m{key, pod->uid, *pod, raw->second};
    const int64_t task = mj.at("task").get<int64_t>();
    m.task = task < 0 ? kNoTask : static_cast<uint32_t>(task);
    m.node = mj.at("node").get<std::string>();
    m.gpus = mj.at("gpus").get<std::vector<int16_t>>();
    m.bound = mj.at("bound").get<bool>();
    m.stopping = mj.value("stopping", false);  // absent in records written before cancels were kept
    g.members.push_back(std::move(m));
  }
  if (g.members.empty()) return absl::DataLossError("no members");
  g.cancelled = record.value("cancelled", false);
  g.cancel_deadline = record.value("cancel_deadline", scheduler::Timestamp{-1});
  out.attempt = record.at("attempt").get<int>();
  if (record.contains("job")) {
    out.job = StoredGang::Job{.name = record.at("job").get<std::string>(),
                              .created = record.at("created").get<int64_t>(),
                              .generation = record.at("generation").get<int64_t>(),
                              .deadline = record.at("deadline").get<int64_t>()};
  }
  return out;
}

}  // namespace

void GangStore::PutNode(const std::string& name, std::string_view text) {
  if (store_) store_->Put("node", name, std::string(text));
}

void GangStore::PutPod(const GangMember& member) {
  if (store_) store_->Put("pod", member.key, Dump(member.raw));
}

void GangStore::ErasePod(const std::string& pod_key) {
  if (store_) store_->Put("pod", pod_key, "");
}

void GangStore::EraseGang(const std::string& gang_name) {
  if (store_) store_->Put("gang", gang_name, "");
}

void GangStore::Touch(const std::string& gang_name) {
  if (store_) dirty_.insert(gang_name);
}

void GangStore::Flush(const std::map<std::string, Gang>& gangs, const std::map<std::string, int>& attempts,
                      const scheduler::State& state) {
  if (!store_) return;
  for (const std::string& name : dirty_) {
    auto it = gangs.find(name);
    if (it == gangs.end()) {
      store_->Put("gang", name, "");
      continue;
    }
    const Gang& g = it->second;
    auto attempt = attempts.find(name);
    const scheduler::Job* job = g.job.valid() ? &state.job(g.job) : nullptr;
    store_->Put("gang", name, GangRecord(g, attempt == attempts.end() ? 0 : attempt->second, job));
  }
  dirty_.clear();
}

// Its own fields and its members' places; the Pod objects are records of
// their own, written once.
std::string GangRecord(const Gang& g, int attempt, const scheduler::Job* job) {
  nlohmann::json members = nlohmann::json::array();
  for (const GangMember& m : g.members) {
    members.push_back({{"pod", m.key},
                       {"task", m.task == kNoTask ? -1 : static_cast<int64_t>(m.task)},
                       {"node", m.node},
                       {"gpus", m.gpus},
                       {"bound", m.bound},
                       {"stopping", m.stopping}});
  }
  nlohmann::json record{{"min_member", g.min_member}, {"unresolvable", g.unresolvable}, {"attempt", attempt},
                        {"deadline", g.deadline}, {"members", std::move(members)}};
  if (g.cancelled) {
    record["cancelled"] = true;
    record["cancel_deadline"] = g.cancel_deadline;
  }
  if (job != nullptr) {
    record["job"] = job->name();
    record["created"] = job->created();
    record["generation"] = job->generation();
  }
  return Dump(record);
}

absl::Status BadRecord(absl::string_view kind, absl::string_view name, absl::string_view why) {
  return absl::DataLossError(absl::StrCat("journal: extender ", kind, " '", name, "': ", why));
}

absl::StatusOr<StoredRecords> ReadRecords(
    const std::vector<StoredRecord>& records,
    absl::FunctionRef<absl::Status(const std::string& name, const nlohmann::json& node)> node) {
  StoredRecords out;
  for (const StoredRecord& r : records) {
    nlohmann::json j = nlohmann::json::parse(r.value, nullptr, /*allow_exceptions=*/false);
    if (j.is_discarded()) return BadRecord(r.kind, r.name, "not JSON");
    if (r.kind == "node") {
      if (absl::Status s = node(r.name, j); !s.ok()) return BadRecord(r.kind, r.name, s.message());
    } else if (r.kind == "pod") {
      out.pods[r.name] = std::move(j);
    } else if (r.kind == "gang") {
      out.gangs.push_back({r.name, std::move(j)});
    } else {
      return BadRecord(r.kind, r.name, "unknown kind");
    }
  }
  return out;
}

absl::StatusOr<StoredGang> ReadGang(const std::string& name, const nlohmann::json& record,
                                    const std::map<std::string, nlohmann::json>& pods) {
  try {
    absl::StatusOr<StoredGang> g = ReadGangFields(name, record, pods);
    if (!g.ok()) return BadRecord("gang", name, g.status().message());
    return g;
  } catch (const nlohmann::json::exception& e) {  // a field missing or of the wrong type
    return BadRecord("gang", name, e.what());
  }
}

}  // namespace ringmaster::server
