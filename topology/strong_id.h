// Strong integer ids: a NodeId cannot be passed where a JobId is expected.
#ifndef RINGMASTER_TOPOLOGY_STRONG_ID_H_
#define RINGMASTER_TOPOLOGY_STRONG_ID_H_

#include <compare>
#include <cstdint>
#include <functional>
#include <limits>

namespace ringmaster::topology {

template <typename Tag>
class StrongId {
 public:
  static constexpr uint32_t kInvalid = std::numeric_limits<uint32_t>::max();
  constexpr StrongId() = default;
  constexpr explicit StrongId(uint32_t v) : v_(v) {}
  constexpr uint32_t value() const { return v_; }
  constexpr bool valid() const { return v_ != kInvalid; }
  constexpr auto operator<=>(const StrongId&) const = default;

 private:
  uint32_t v_ = kInvalid;
};

struct NodeIdTag {};
struct DomainIdTag {};
using NodeId = StrongId<NodeIdTag>;
// Index of a domain within one tier.
using DomainId = StrongId<DomainIdTag>;

}  // namespace ringmaster::topology

template <typename Tag>
struct std::hash<ringmaster::topology::StrongId<Tag>> {
  size_t operator()(const ringmaster::topology::StrongId<Tag>& id) const noexcept {
    return std::hash<uint32_t>()(id.value());
  }
};

#endif  // RINGMASTER_TOPOLOGY_STRONG_ID_H_
