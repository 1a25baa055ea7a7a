// A job's speed model learned from what its workers measured
// (docs/SHIM.md, "Speed reports"): the coordinator keeps, per size of
// generation (GPUs, nodes), the mean seconds and global samples per step
// that rank 0 reported at its commits; this fits them to
//
//   rate(g, n) = g / (a + b (g - 1) + c (n - 1))      samples per second
//
// (Amdahl's law with a cost per extra node: a is the time one GPU takes per
// sample, b what each further GPU adds in synchronization, c what each
// further node adds), by least squares on y = g / rate = a + b (g - 1) +
// c (n - 1), each size weighted by its reports, with b, c >= 0 and a > 0.
// A size's rate is its samples per step over its seconds per step; where the
// workers did not say how many samples a step takes, every GPU is taken to
// process the same batch (rate = g / seconds). What the samples cannot tell
// stays optimistic until it is tried: one size seen gives linear scaling
// (b = c = 0), sizes on one node only give c = 0. The speedup plugin reads
// it as it reads a measured table in replays (scheduler/speed_model.h).
#ifndef RINGMASTER_SERVER_COORDINATOR_LEARNED_SPEED_H_
#define RINGMASTER_SERVER_COORDINATOR_LEARNED_SPEED_H_

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "scheduler/speed_model.h"

namespace ringmaster::server {

struct SpeedObservation {
  int gpus = 0;
  int nodes = 0;
  double step_seconds = 0;
  double step_samples = 0;  // 0: unknown
  int64_t reports = 0;
};

// The journal's text of observations (server/journal/journal.h, job_speed):
// one line per size, "GPUS NODES REPORTS STEP_SECONDS STEP_SAMPLES", in the
// order given; the numbers round-trip exactly.
std::string SpeedObservationsText(const std::vector<SpeedObservation>& obs);
// Its inverse: InvalidArgument naming the line and the field that does not
// parse or is out of range (sizes 1..1e6 with nodes <= GPUs, reports >= 1,
// seconds > 0, samples >= 0, all finite).
absl::StatusOr<std::vector<SpeedObservation>> ParseSpeedObservations(std::string_view text);
// Both sets of observations as one, per (GPUs, nodes): reports add up,
// seconds and samples are means weighted by reports (samples over the
// reports that said, i.e. a 0 counts as unknown). Ordered by (GPUs, nodes).
std::vector<SpeedObservation> MergeSpeedObservations(const std::vector<SpeedObservation>& a,
                                                     const std::vector<SpeedObservation>& b);

class LearnedSpeedModel : public scheduler::SpeedModel {
 public:
  // InvalidArgument when no observation is usable (gpus, nodes, seconds or
  // reports not positive, nodes above gpus).
  static absl::StatusOr<std::shared_ptr<const LearnedSpeedModel>> Fit(const std::vector<SpeedObservation>& obs);

  double Rate(int gpus, int nodes) const override;
  std::string Describe() const override;
  double a() const { return a_; }
  double b() const { return b_; }
  double c() const { return c_; }

 private:
  double a_ = 1, b_ = 0, c_ = 0;
  std::vector<SpeedObservation> seen_;
};

}  // namespace ringmaster::server

#endif  // RINGMASTER_SERVER_COORDINATOR_LEARNED_SPEED_H_
