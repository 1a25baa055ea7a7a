// enqueue: admits pending jobs whose gang minimum fits their queue's limits.
//
// 1. Walk Pending jobs in job order.
// 2. A job that fails JobValid stays Pending with the plugin's reason.
// 3. A job that every tier lets in (JobEnqueueable) becomes Inqueue (a
//    Statement operation), and its minimum counts against its queue's
//    admitted total for the jobs after it.
// 4. The admission memo: when the policy's admission hooks read only the
//    job and the queues (Plugin::AdmissionReadsOnlyJobAndQueues), a refused
//    job remembers what its refusal read (Job::AdmitMemo: the policy, its
//    tasks, its queue and the use of that queue and each ancestor); while all of it is the same, it is refused again with the
//    same reason without asking (a backlog behind a queue's capability
//    costs a comparison per job, not the plugins' checks and texts).
#include <algorithm>

#include "common/status_macros.h"
#include "scheduler/actions/action.h"
#include "scheduler/statement.h"

namespace ringmaster::scheduler {
namespace {

// What admission reads of the queues: the use (allocated + admitted) of
// the job's queue and of each ancestor, in that order.
void ChainUse(const Session& s, const Job& j, std::vector<Resources>& out) {
  out.clear();
  for (int q = static_cast<int>(j.queue().value()); q >= 0; q = s.state().queues().parent(static_cast<uint32_t>(q))) {
    const QueueInfo& info = s.queues()[q];
    out.push_back(info.allocated() + info.inqueue);
  }
}

// Whether the memo's inputs are the job's and its queues' now (`use`: its
// queue chain's current use).
bool Holds(const Session& s, const Job& j, const std::vector<Resources>& use) {
  const Job::AdmitMemo& m = j.admit_memo();
  return m.policy != 0 && m.policy == s.VerdictPolicyId() && m.task_changes == j.task_changes() &&
         m.queue == j.queue().value() && use == m.chain_use;
}

void Remember(const Session& s, Job& j, const std::vector<Resources>& use, const std::string& reason) {
  Job::AdmitMemo& m = j.admit_memo();
  m.policy = s.VerdictPolicyId();
  m.task_changes = j.task_changes();
  m.queue = j.queue().value();
  m.chain_use = use;
  m.reason = reason;
  m.reason_gen = Job::NextReasonGen();
}

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
    // With the fast paths only, so the property test compares both ways.
    const bool memo = s.fast_paths() && s.memo() && s.admission_reads_only_job_and_queues();
    // Each queue's chain use, computed once per queue until an admission
    // (the only change to any queue's use in this action) moves it.
    int admitted = 0;
    use_at_.assign(s.queues().size(), -1);
    use_.resize(s.queues().size());
    auto use_of = [&](const Job& j) -> const std::vector<Resources>& {
      const uint32_t q = j.queue().value();
      if (use_at_[q] != admitted) {
        ChainUse(s, j, use_[q]);
        use_at_[q] = admitted;
      }
      return use_[q];
    };
    for (Job* j : pending) {
      if (memo && Holds(s, *j, use_of(*j))) {
        s.NoteRecalled();
        s.KeepPendingReason(*j, j->admit_memo().reason, j->admit_memo().reason_gen);
        continue;
      }
      if (Verdict valid = s.JobValid(*j); !valid.ok()) {
        std::string why(valid.reason());
        if (memo) Remember(s, *j, use_of(*j), why);
        s.SetPendingReason(*j, std::move(why));
        continue;
      }
      if (Verdict admit = s.JobEnqueueable(*j); !admit.ok()) {
        std::string why = admit.reason().empty() ? "not admitted by its queue" : std::string(admit.reason());
        if (memo) Remember(s, *j, use_of(*j), why);
        s.SetPendingReason(*j, std::move(why));
        continue;
      }
      Statement admit(s);
      admit.SetPhase(*j, JobPhase::kInqueue);
      RM_CHECK_OK(admit.Commit());  // a phase change alone cannot fail: a bug
      ++admitted;
      int q = static_cast<int>(j->queue().value());
      while (q >= 0) {
        s.queues()[q].inqueue += j->min_request();
        q = s.state().queues().parent(static_cast<uint32_t>(q));
      }
    }
  }

 private:
  // Per queue: its chain use and the admission count it was computed at.
  std::vector<std::vector<Resources>> use_;
  std::vector<int> use_at_;
};

}  // namespace

std::unique_ptr<Action> NewEnqueueAction() { return std::make_unique<EnqueueAction>(); }

}  // namespace ringmaster::scheduler
