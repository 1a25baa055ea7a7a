// enqueue: admits pending jobs whose gang minimum fits their queue's limits.
//
// 1. Walk Pending jobs in job order.
// 2. A job that fails JobValid stays Pending with the plugin's reason.
// 3. A job that every tier lets in (JobEnqueueable) becomes Inqueue (a
//    Statement operation), and its minimum counts against its queue's
//    admitted total for the jobs after it.
#include <algorithm>

#include "common/status_macros.h"
#include "scheduler/actions/action.h"
#include "scheduler/statement.h"

namespace ringmaster::scheduler {
namespace {

class EnqueueAction : public Action {
 public:
  std::string_view name() const override { return "enqueue"; }
  bool UsesTime() const override { return false; }
  void Execute(Session& s) override {
    std::vector<Job*> pending;
    for (JobId id : s.jobs()) {
      Job& j = s.mutable_state().job(id);
      if (j.phase() == JobPhase::kPending) pending.push_back(&j);
    }
    SortInJobOrder(s, pending.begin(), pending.end());
    for (Job* j : pending) {
      if (Verdict valid = s.JobValid(*j); !valid.ok()) {
        s.SetPendingReason(*j, std::string(valid.reason()));
        continue;
      }
      if (Verdict admit = s.JobEnqueueable(*j); !admit.ok()) {
        s.SetPendingReason(*j, admit.reason().empty() ? "not admitted by its queue" : std::string(admit.reason()));
        continue;
      }
      Statement admit(s);
      admit.SetPhase(*j, JobPhase::kInqueue);
      RM_CHECK_OK(admit.Commit());  // a phase change alone cannot fail: a bug
      int q = static_cast<int>(j->queue().value());
      while (q >= 0) {
        s.queues()[q].inqueue += j->min_request();
        q = s.state().queues().parent(static_cast<uint32_t>(q));
      }
    }
  }
};

}  // namespace

std::unique_ptr<Action> NewEnqueueAction() { return std::make_unique<EnqueueAction>(); }

}  // namespace ringmaster::scheduler
