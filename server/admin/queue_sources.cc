#include "server/admin/queue_sources.h"

#include <map>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace ringmaster::server {
namespace {

bool SameSpec(const queue::QueueSpec& a, const queue::QueueSpec& b) {
  return a.name == b.name && a.parent == b.parent && a.weight == b.weight && a.guarantee == b.guarantee &&
         a.capability.has_value() == b.capability.has_value() && (!a.capability || *a.capability == *b.capability) &&
         a.priority == b.priority && a.reclaimable == b.reclaimable;
}

}  // namespace

bool ExternalQueues::operator==(const ExternalQueues& o) const {
  if (kind != o.kind || specs.size() != o.specs.size()) return false;
  for (size_t i = 0; i < specs.size(); ++i) {
    if (!SameSpec(specs[i], o.specs[i])) return false;
  }
  return true;
}

absl::StatusOr<scheduler::Policy> ComposeQueues(scheduler::Policy base, const ExternalQueues& external) {
  if (external.specs.empty()) return base;
  const std::string policy_source = base.file.empty() ? std::string("the policy") : absl::StrCat("the policy (", base.file, ")");
  std::set<std::string> from_policy;
  for (const queue::QueueSpec& q : base.queues) from_policy.insert(q.name);
  std::vector<std::string> errors;
  for (const queue::QueueSpec& q : external.specs) {
    if (from_policy.contains(q.name)) {
      errors.push_back(absl::StrCat("queue '", q.name, "': defined twice, in ", policy_source, " and by ",
                                    external.kind, " '", q.name, "': keep one of them"));
    }
  }
  if (!errors.empty()) return absl::InvalidArgumentError(absl::StrJoin(errors, "\n"));
  std::vector<queue::QueueSpec> all = base.queues;
  all.insert(all.end(), external.specs.begin(), external.specs.end());
  std::vector<queue::ConfigError> found;
  queue::ValidateQueueSpecs(all, "", {}, &found);
  for (const queue::ConfigError& e : found) {
    // e.field is "queues[NAME].FIELD": say where NAME was defined.
    std::string name;
    if (e.field.starts_with("queues[")) {
      const size_t close = e.field.find(']');
      if (close != std::string::npos) name = e.field.substr(7, close - 7);
    }
    const std::string source = from_policy.contains(name) ? policy_source : absl::StrCat(external.kind, " '", name, "'");
    errors.push_back(absl::StrCat(source, ": ", e.field, ": ", e.message));
  }
  if (!errors.empty()) return absl::InvalidArgumentError(absl::StrJoin(errors, "\n"));
  base.queues = std::move(all);
  return base;
}

}  // namespace ringmaster::server
