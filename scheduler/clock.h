// Time as the engine sees it: injected, never read from the wall clock inside
// the engine, so the simulator can drive it on a virtual clock.
#ifndef RINGMASTER_SCHEDULER_CLOCK_H_
#define RINGMASTER_SCHEDULER_CLOCK_H_

#include <cstdint>
#include <limits>

namespace ringmaster::scheduler {

// Milliseconds since an epoch the driver chooses.
using Timestamp = int64_t;
// "No time": what Action / Plugin::NextChange answer when only an event can
// change their decisions.
inline constexpr Timestamp kNoChange = std::numeric_limits<Timestamp>::max();

class Clock {
 public:
  virtual ~Clock() = default;
  virtual Timestamp Now() const = 0;
};

// A clock that moves only when told to (tests, simulator, demo).
class ManualClock : public Clock {
 public:
  explicit ManualClock(Timestamp start = 0) : now_(start) {}
  Timestamp Now() const override { return now_; }
  void Set(Timestamp t) { now_ = t; }
  void Advance(Timestamp ms) { now_ += ms; }

 private:
  Timestamp now_;
};

}  // namespace ringmaster::scheduler

#endif  // RINGMASTER_SCHEDULER_CLOCK_H_
