// Kubernetes objects and an in-memory journal for the extender's tests
// (extender_test.cc, extender_journal_test.cc).
#ifndef RINGMASTER_TESTS_SERVER_EXTENDER_FIXTURES_H_
#define RINGMASTER_TESTS_SERVER_EXTENDER_FIXTURES_H_

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "absl/status/status.h"
#include "server/extender/gang_store.h"

namespace ringmaster::server::extender_fixtures {

// A Node object of `gpus` H100s in `rack`; with `uid`, its metadata.uid is
// "uid-NAME".
inline nlohmann::json Node(const std::string& name, int gpus, const std::string& rack = "r1", bool uid = false) {
  nlohmann::json metadata{{"name", name},
                          {"labels", {{"nvidia.com/gpu.product", "H100"}, {"topology.ringmaster.io/rack", rack}}}};
  if (uid) metadata["uid"] = "uid-" + name;
  return nlohmann::json{
      {"metadata", std::move(metadata)},
      {"status", {{"allocatable", {{"cpu", "96"}, {"memory", "1Ti"}, {"nvidia.com/gpu", std::to_string(gpus)}}}}}};
}

// A pod of scheduler-plugins' PodGroup `group` (none: a gang of one), with
// Volcano's min-member annotation when `min` > 0, asking for `gpus` GPUs.
inline nlohmann::json Pod(const std::string& name, const std::string& group, int min, int gpus) {
  nlohmann::json labels = nlohmann::json::object();
  nlohmann::json annotations = nlohmann::json::object();
  if (!group.empty()) labels["scheduling.x-k8s.io/pod-group"] = group;
  if (min > 0) annotations["scheduling.volcano.sh/group-min-member"] = std::to_string(min);
  return nlohmann::json{{"metadata",
                         {{"name", name}, {"namespace", "ml"}, {"uid", "uid-" + name}, {"labels", labels},
                          {"annotations", annotations}}},
                        {"spec",
                         {{"containers",
                           {{{"name", "trainer"},
                             {"resources", {{"limits", {{"nvidia.com/gpu", std::to_string(gpus)}}},
                                            {"requests", {{"cpu", "4"}, {"memory", "32Gi"}}}}}}}}}}};
}

// Like serve's journal: records in order of first writing; an empty value
// removes one.
class MemoryStore : public ExtenderStore {
 public:
  void Put(const std::string& kind, const std::string& name, std::string value) override {
    auto it = std::find_if(records_.begin(), records_.end(),
                           [&](const StoredRecord& r) { return r.kind == kind && r.name == name; });
    if (value.empty()) {
      if (it != records_.end()) records_.erase(it);
    } else if (it != records_.end()) {
      it->value = std::move(value);
    } else {
      records_.push_back({kind, name, std::move(value)});
    }
  }
  absl::Status Sync() override {
    ++syncs;
    return absl::OkStatus();
  }
  size_t Count(const std::string& kind) const {
    return std::count_if(records_.begin(), records_.end(), [&](const StoredRecord& r) { return r.kind == kind; });
  }
  const std::vector<StoredRecord>& records() const { return records_; }
  int syncs = 0;

 private:
  std::vector<StoredRecord> records_;
};

}  // namespace ringmaster::server::extender_fixtures

#endif  // RINGMASTER_TESTS_SERVER_EXTENDER_FIXTURES_H_
