// Queues: how an admin divides the cluster. A queue has a weight (its share of
// what is left after guarantees), a guarantee (what it gets whenever it asks),
// a capability (what it may never exceed), a priority (queue order) and a
// reclaimable flag (whether others may take back what it borrowed).
//
// Queues form a tree under an implicit root; jobs go to leaf queues. The
// `queues:` part of the policy file is loaded and validated here.
//
// Invariants of a QueueTree:
//   1. Parents come before children in queues(); the graph has no cycle.
//   2. weight > 0; guarantee <= capability per dimension where both are set.
//   3. A child's guarantee fits inside its parent's capability.
#ifndef RINGMASTER_QUEUE_QUEUE_H_
#define RINGMASTER_QUEUE_QUEUE_H_

#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "topology/resources.h"
#include "topology/strong_id.h"

namespace YAML {
class Node;
}

namespace ringmaster::queue {

using topology::Resources;

struct QueueSpec {
  std::string name;
  std::string parent;  // empty: under the root
  int64_t weight = 1;
  Resources guarantee;
  // Unset means unlimited.
  std::optional<Resources> capability;
  int32_t priority = 0;
  bool reclaimable = true;
};

// A validation or parse error with where it happened.
struct ConfigError {
  std::string file;
  int line = 0;    // 1-based, 0 if unknown
  int column = 0;  // 1-based
  std::string field;
  std::string message;
  std::string ToString() const;
};

class QueueTree {
 public:
  // A tree with a single leaf queue "default".
  static QueueTree Default();
  // Builds and validates. Errors name the queue and field.
  static absl::StatusOr<QueueTree> Build(std::vector<QueueSpec> specs);

  size_t size() const { return queues_.size(); }
  const QueueSpec& spec(uint32_t q) const { return queues_[q]; }
  // Index of the parent queue, or -1 for a child of the root.
  int parent(uint32_t q) const { return parents_[q]; }
  const std::vector<uint32_t>& children(uint32_t q) const { return children_[q]; }
  const std::vector<uint32_t>& roots() const { return roots_; }
  bool is_leaf(uint32_t q) const { return children_[q].empty(); }
  std::optional<uint32_t> Find(std::string_view name) const;

 private:
  std::vector<QueueSpec> queues_;  // parents before children
  std::vector<int> parents_;
  std::vector<std::vector<uint32_t>> children_;
  std::vector<uint32_t> roots_;
  std::map<std::string, uint32_t, std::less<>> by_name_;
};

// True when `r` stays within capability `cap`: cpu, memory and GPUs compare
// directly (an unset limit is kUnlimited); scalars only where `cap` names them.
bool WithinCapability(const Resources& r, const Resources& cap);

// Parses a resource map such as {cpu: 64, memory: 256Gi, gpu: 16,
// rdma/hca: 4}. Errors are appended to `errors` with file/line/field.
Resources ParseResourceMap(const YAML::Node& node, std::string_view file, std::string_view field,
                           std::vector<ConfigError>* errors);

// Loads the `queues:` sequence of a policy file. Appends every error found
// (unknown field, wrong type, weight <= 0, guarantee above capability, cycle
// in parents, unknown parent, duplicate name) to `errors` and returns the
// specs that parsed.
std::vector<QueueSpec> LoadQueueSpecs(const YAML::Node& queues, std::string_view file,
                                      std::vector<ConfigError>* errors);

// Structural validation (cycles, parents, guarantee vs capability); used by
// LoadQueueSpecs and QueueTree::Build. `lines` maps a queue name to where it
// was declared (may be empty).
void ValidateQueueSpecs(const std::vector<QueueSpec>& specs, std::string_view file,
                        const std::map<std::string, std::pair<int, int>>& lines,
                        std::vector<ConfigError>* errors);

}  // namespace ringmaster::queue

#endif  // RINGMASTER_QUEUE_QUEUE_H_
