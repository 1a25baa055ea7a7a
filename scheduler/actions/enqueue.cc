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
//    tasks, its queue and the id of the use of that queue and each
//    ancestor); while all of it is the same, it is refused again with the
//    same reason without asking. Until the first admission the order does
//    not matter (RefuseAllUnordered): a cycle that admits nothing asks only
//    the jobs whose memo missed and sorts none.
// 5. After such a cycle, the next one needs to look only at the jobs the
//    state says changed (State::TakeAdmissionChanges: added, or their
//    tasks or phase moved) while the policy and every queue's use are as
//    they were: every other job's memo holds, and its reason stands.
// 6. Groups (Session::admission_grouped: the admission hooks read of a job
//    only its queue and minimum, a refusal's text reads no use, and a
//    pending job's order keys read only its spec): the pending jobs are
//    kept across cycles in groups alike in queue, minimum and tasks, each
//    group in job order, updated from the state's change log. A cycle asks
//    one job of each group whose queue's use moved; a group refused at the
//    cycle's start stays refused through it (admissions only add use), so
//    only the groups that fit are walked, merged in job order, each until
//    its first refusal. Its jobs' reasons are the group's text, written
//    only to jobs that joined since (or all, when the text changed): a
//    cycle costs the groups and the admissions, not the backlog. The same
//    admissions and reasons as the walk of every job (the fast-paths
//    property test compares them).
#include <algorithm>
#include <atomic>
#include <memory>
#include <unordered_map>
#include <utility>
#include <vector>

#include "absl/container/btree_set.h"
#include "absl/container/flat_hash_map.h"
#include "common/status_macros.h"
#include "scheduler/actions/action.h"
#include "scheduler/statement.h"

namespace ringmaster::scheduler {
namespace {

// Names each distinct chain use an enqueue action saw (EnqueueAction::Intern):
// unique in the process, so a memo's id is one queue's one use.
std::atomic<uint64_t> next_chain_id{0};

// What admission reads of the queues: the use (allocated + admitted) of
// queue `leaf` and of each ancestor, in that order.
void ChainUse(const Session& s, uint32_t leaf, std::vector<Resources>& out) {
  out.clear();
  for (int q = static_cast<int>(leaf); q >= 0; q = s.state().queues().parent(static_cast<uint32_t>(q))) {
    const QueueInfo& info = s.queues()[q];
    out.push_back(info.allocated() + info.inqueue);
  }
}

// Whether the memo's inputs are the job's and its queues' now (`use`: the
// id of its queue chain's current use).
bool Holds(const Session& s, const Job& j, uint64_t use) {
  const Job::AdmitMemo& m = j.admit_memo();
  return m.policy != 0 && m.policy == s.VerdictPolicyId() && m.task_changes == j.task_changes() &&
         m.queue == j.queue().value() && use == m.chain_use;
}

// `h` with r's figures mixed in (a hash; callers compare the values).
uint64_t MixResources(uint64_t h, const Resources& r) {
  h = h * 0x9E3779B97F4A7C15ULL + static_cast<uint64_t>(r.gpu_milli());
  h = h * 0x9E3779B97F4A7C15ULL + static_cast<uint64_t>(r.cpu_milli());
  h = h * 0x9E3779B97F4A7C15ULL + static_cast<uint64_t>(r.memory());
  return h * 0x9E3779B97F4A7C15ULL + r.scalars().size();
}

void Remember(const Session& s, Job& j, uint64_t use, std::string reason) {
  Job::AdmitMemo& m = j.admit_memo();
  m.policy = s.VerdictPolicyId();
  m.task_changes = j.task_changes();
  m.queue = j.queue().value();
  m.chain_use = use;
  m.reason = std::move(reason);
  m.reason_gen = Job::NextReasonGen();
}

class EnqueueAction : public Action {
 public:
  std::string_view name() const override { return "enqueue"; }
  bool UsesTime() const override { return false; }
  void Execute(Session& s) override {
    // With the fast paths only, so the property test compares both ways.
    const bool memo = s.fast_paths() && s.memo() && s.admission_reads_only_job_and_queues();
    // Read every cycle, so that the next one sees only what changed since.
    const bool whole_log = s.mutable_state().TakeAdmissionChanges(changed_);
    const bool grouped = memo && s.admission_grouped();
    if (!grouped) groups_valid_ = false;
    // Each queue's chain use, computed once per queue until an admission
    // (the only change to any queue's use in this action) moves it, and
    // named by an id interned per queue (Intern: a memo compares ids, not
    // the queues' resources).
    admitted_ = 0;
    admitted_ids_.clear();
    use_at_.assign(s.queues().size(), -1);
    use_id_.resize(s.queues().size(), 0);
    if (interned_.size() != s.queues().size()) interned_.assign(s.queues().size(), {});
    if (grouped && Grouped(s, whole_log)) {
      clean_ = false;  // the per-job memos were not kept: the next walk of every job is whole
      return;
    }
    bool walk = true;  // every pending job (false: the changed ones refused, the rest recalled)
    if (memo && clean_ && whole_log && clean_policy_ == s.VerdictPolicyId() && QueuesAsClean(s)) {
      if (RefuseChanged(s)) {
        MarkClean(s);
        return;
      }
      walk = false;  // one would be admitted: the ordered walk, after the refusals made
    }
    clean_ = false;
    std::vector<Job*>& pending = pending_;
    pending.clear();
    for (JobId id : s.jobs()) {
      Job& j = s.mutable_state().job(id);
      if (j.phase() == JobPhase::kPending) pending.push_back(&j);
    }
    if (memo && walk && RefuseAllUnordered(s)) {
      MarkClean(s);
      return;
    }
    SortInJobOrder(s, pending.begin(), pending.end());
    for (Job* j : pending) {
      if (memo && Holds(s, *j, UseOf(s, *j))) {
        s.NoteRecalled();
        s.KeepPendingReason(*j, j->admit_memo().reason, j->admit_memo().reason_gen);
        continue;
      }
      std::string why;
      if (!Refused(s, *j, why)) {
        Admit(s, *j);
        ++admitted_;
        admitted_ids_.push_back(j->id());
        continue;
      }
      if (memo) {
        Refuse(s, *j, std::move(why));
      } else {
        s.SetPendingReason(*j, std::move(why));
      }
    }
    s.AddAdmitted(admitted_ids_);
  }

 private:
  // Queue q's chain use id now (at admitted_ admissions this cycle).
  uint64_t UseOf(const Session& s, const Job& j) { return UseOf(s, j.queue().value()); }
  uint64_t UseOf(const Session& s, uint32_t q) {
    if (use_at_[q] != admitted_) {
      ChainUse(s, q, scratch_);
      use_id_[q] = Intern(q, scratch_);
      use_at_[q] = admitted_;
    }
    return use_id_[q];
  }

  // Whether the plugins refuse the job (with `why`), or would admit it.
  static bool Refused(Session& s, const Job& j, std::string& why) {
    if (Verdict valid = s.JobValid(j); !valid.ok()) {
      why = valid.reason();
      return true;
    }
    if (Verdict admit = s.JobEnqueueable(j); !admit.ok()) {
      why = admit.reason().empty() ? "not admitted by its queue" : std::string(admit.reason());
      return true;
    }
    return false;
  }

  // The job stays Pending with `why`, remembered at its queues' use now.
  // The memo's text is kept by generation: later recalls of it compare no
  // text (Session::KeepPendingReason).
  void Refuse(Session& s, Job& j, std::string why) {
    Remember(s, j, UseOf(s, j), std::move(why));
    s.KeepPendingReason(j, j.admit_memo().reason, j.admit_memo().reason_gen);
  }

  // The cycle where nothing is admitted, without the job order: until the
  // first admission every job sees its queues' use as the cycle found it,
  // so its verdict does not depend on where it sits in the order (the
  // admission hooks read only the job and the queues). The jobs whose
  // memo does not hold are asked, in id order (each answer reads only the
  // job and that use); when every one of them is refused, so is every job
  // (the others' memos hold) and no job need be sorted. At the first that
  // would be admitted, false: the caller walks every job in job order (the
  // refusals made here hold there, by memo, until the first admission).
  bool RefuseAllUnordered(Session& s) {
    misses_.clear();
    hits_.clear();
    for (Job* j : pending_) {
      (Holds(s, *j, UseOf(s, *j)) ? hits_ : misses_).push_back(j);
    }
    for (Job* j : misses_) {
      std::string why;
      if (!Refused(s, *j, why)) return false;
      Refuse(s, *j, std::move(why));
    }
    for (Job* j : hits_) {
      s.NoteRecalled();
      s.KeepPendingReason(*j, j->admit_memo().reason, j->admit_memo().reason_gen);
    }
    return true;
  }

  // Whether every queue whose jobs were all refused at the end of the last
  // clean cycle (MarkClean) has the same use now.
  bool QueuesAsClean(const Session& s) {
    for (const auto& [q, id] : clean_queues_) {
      if (q >= s.queues().size() || UseOf(s, q) != id) return false;
    }
    return true;
  }

  // RefuseAllUnordered over the jobs the state says changed since the last
  // clean cycle: every other pending job's memo holds (its policy, tasks,
  // queue and its queue's use are as they were) and its reason is the
  // memo's already, so it is only counted as recalled.
  bool RefuseChanged(Session& s) {
    std::sort(changed_.begin(), changed_.end());
    changed_.erase(std::unique(changed_.begin(), changed_.end()), changed_.end());
    misses_.clear();
    hits_.clear();
    const int pending = static_cast<int>(s.jobs().size() - s.admitted_jobs().size());
    for (JobId id : changed_) {
      if (!std::binary_search(s.jobs().begin(), s.jobs().end(), id)) continue;  // not waiting
      Job& j = s.mutable_state().job(id);
      if (j.phase() != JobPhase::kPending) continue;
      (Holds(s, j, UseOf(s, j)) ? hits_ : misses_).push_back(&j);
    }
    for (Job* j : misses_) {
      std::string why;
      if (!Refused(s, *j, why)) return false;
      Refuse(s, *j, std::move(why));
    }
    for (Job* j : hits_) s.KeepPendingReason(*j, j->admit_memo().reason, j->admit_memo().reason_gen);
    s.NoteRecalled(pending - static_cast<int>(misses_.size()));
    return true;
  }

  // After a cycle that refused every pending job (nothing admitted): the
  // policy and each asked queue's use, for QueuesAsClean.
  void MarkClean(const Session& s) {
    if (!clean_) clean_queues_.clear();
    clean_ = true;
    clean_policy_ = s.VerdictPolicyId();
    for (uint32_t q = 0; q < use_at_.size(); ++q) {
      if (use_at_[q] != 0) continue;  // not asked this cycle
      auto it = std::find_if(clean_queues_.begin(), clean_queues_.end(), [q](const auto& e) { return e.first == q; });
      if (it == clean_queues_.end()) {
        clean_queues_.emplace_back(q, use_id_[q]);
      } else {
        it->second = use_id_[q];
      }
    }
  }

  // The job becomes Inqueue and its minimum counts against its queue and
  // each ancestor for the jobs after it.
  static void Admit(Session& s, Job& j) {
    Statement admit(s);
    admit.SetPhase(j, JobPhase::kInqueue);
    RM_CHECK_OK(admit.Commit());  // a phase change alone cannot fail: a bug
    int q = static_cast<int>(j.queue().value());
    while (q >= 0) {
      s.queues()[q].inqueue += j.min_request();
      q = s.state().queues().parent(static_cast<uint32_t>(q));
    }
  }

  // The id of queue q's chain use `use`: the same use (the same values)
  // has the same id again (a queue's use near its capability goes back and
  // forth between a few values, and the memos made at each stay good).
  // Each queue keeps at most kInterned uses, then starts over with new ids
  // (a memo of a forgotten id misses: the job is asked again).
  uint64_t Intern(uint32_t q, const std::vector<Resources>& use) {
    static constexpr size_t kInterned = 4096;
    uint64_t h = use.size();
    for (const Resources& r : use) h = MixResources(h, r);
    auto& table = interned_[q];
    auto it = table.try_emplace(h).first;
    for (const auto& [seen, id] : it->second) {
      if (seen == use) return id;
    }
    if (table.size() > kInterned) {
      table.clear();
      it = table.try_emplace(h).first;
    }
    const uint64_t id = ++next_chain_id;
    it->second.emplace_back(use, id);
    return id;
  }

  // --- Groups (step 6) ----------------------------------------------------
  // A pending job's place in job order: its order keys, creation, id.
  struct RowLess {
    const std::vector<int64_t>* rows;
    const size_t* width;
    bool operator()(uint32_t a, uint32_t b) const {
      const size_t w = *width;
      const int64_t* x = rows->data() + size_t{a} * w;
      const int64_t* y = rows->data() + size_t{b} * w;
      return std::lexicographical_compare(x, x + w, y, y + w);
    }
  };
  struct Group {
    Group(uint32_t q, const Resources& min, int members, size_t tasks, RowLess less)
        : queue(q), minimum(min), min_member(members), tasks(tasks), jobs(less) {}
    uint32_t queue;
    Resources minimum;
    int min_member;
    size_t tasks;
    absl::btree_set<uint32_t, RowLess> jobs;  // job ids, in job order
    // The verdict at the queue's chain use `use` (0: none yet).
    uint64_t use = 0;
    bool fits = false;
    std::string reason;  // the last refusal's text (outlives sessions: KeepPendingReason)
    uint64_t reason_gen = 0;
    std::vector<uint32_t> unsettled;  // jobs that may not have `reason` yet
  };

  // Whether the groups decided the cycle (false: a pending job holds
  // something, and its order may change: the caller walks every job).
  bool Grouped(Session& s, bool whole_log) {
    const size_t width = s.job_order_keys() + 2;
    if (!groups_valid_ || !whole_log || width != width_) {
      if (!Regroup(s, width)) return false;
    } else {
      std::sort(changed_.begin(), changed_.end());
      changed_.erase(std::unique(changed_.begin(), changed_.end()), changed_.end());
      for (JobId id : changed_) {
        Leave(id.value());
        if (!std::binary_search(s.jobs().begin(), s.jobs().end(), id)) continue;  // not waiting
        const Job& j = s.state().job(id);
        if (j.phase() != JobPhase::kPending) continue;
        if (!Join(s, j)) return false;
      }
    }
    // Each group's verdict at its queue's use now, asked of its first job
    // when that use moved since.
    fitting_.clear();
    int asked = 0, waiting = 0;
    for (size_t g = 0; g < groups_.size(); ++g) {
      Group& gr = *groups_[g];
      if (gr.jobs.empty()) continue;
      waiting += static_cast<int>(gr.jobs.size());
      const uint64_t use = UseOf(s, gr.queue);
      if (gr.use != use) {
        Ask(s, gr, s.state().job(JobId(*gr.jobs.begin())), use);
        ++asked;
      }
      if (gr.fits) fitting_.push_back(static_cast<uint32_t>(g));
    }
    s.NoteRecalled(waiting - asked);
    if (!fitting_.empty()) Merge(s);
    for (auto& gr : groups_) Settle(s, *gr);
    s.AddAdmitted(admitted_ids_);
    return true;
  }

  // The groups that fit, walked in job order (a heap of their next jobs),
  // each until its first refusal.
  void Merge(Session& s) {
    auto later = [this](uint32_t a, uint32_t b) { return RowLess{&rows_, &width_}(*heads_[b], *heads_[a]); };
    heap_.clear();
    heads_.resize(groups_.size());
    for (uint32_t g : fitting_) {
      heads_[g] = groups_[g]->jobs.begin();
      heap_.push_back(g);
    }
    std::make_heap(heap_.begin(), heap_.end(), later);
    while (!heap_.empty()) {
      std::pop_heap(heap_.begin(), heap_.end(), later);
      const uint32_t g = heap_.back();
      heap_.pop_back();
      Group& gr = *groups_[g];
      Job& j = s.mutable_state().job(JobId(*heads_[g]));
      std::string why;
      if (Refused(s, j, why)) {
        // Refused at this use, so at every later one this cycle.
        Refuse(gr, UseOf(s, gr.queue), std::move(why));
        gr.unsettled.push_back(j.id().value());
        continue;
      }
      Admit(s, j);
      ++admitted_;
      admitted_ids_.push_back(j.id());
      if (++heads_[g] != gr.jobs.end()) {
        heap_.push_back(g);
        std::push_heap(heap_.begin(), heap_.end(), later);
      }
    }
  }

  void Ask(Session& s, Group& gr, const Job& j, uint64_t use) {
    std::string why;
    if (!Refused(s, j, why)) {
      gr.use = use;
      gr.fits = true;
      return;
    }
    Refuse(gr, use, std::move(why));
  }

  static void Refuse(Group& gr, uint64_t use, std::string why) {
    gr.use = use;
    gr.fits = false;
    if (gr.reason_gen != 0 && gr.reason == why) return;
    // A first refusal (its jobs joined as unsettled), or another text than
    // the last (which AdmissionReadsOnlyMinimum rules out for one policy):
    // every job of the group is given it.
    if (gr.reason_gen != 0) gr.unsettled.assign(gr.jobs.begin(), gr.jobs.end());
    gr.reason = std::move(why);
    gr.reason_gen = Job::NextReasonGen();
  }

  // The group's refusal to the jobs that may not carry it yet (those
  // still pending: some may have been admitted this cycle).
  static void Settle(Session& s, Group& gr) {
    if (gr.fits || gr.reason_gen == 0) {
      // It fits: the walk admitted every job of it (or it has none).
      gr.unsettled.clear();
      return;
    }
    for (uint32_t id : gr.unsettled) {
      if (!gr.jobs.contains(id)) continue;  // it left the group since
      const Job& j = s.state().job(JobId(id));
      if (j.phase() == JobPhase::kPending) s.KeepPendingReason(j, gr.reason, gr.reason_gen);
    }
    gr.unsettled.clear();
  }

  // Every pending job in its group again (false: one holds something).
  bool Regroup(Session& s, size_t width) {
    groups_valid_ = false;
    groups_.clear();
    by_key_.clear();
    std::fill(group_of_.begin(), group_of_.end(), 0);
    width_ = width;
    for (JobId id : s.jobs()) {
      const Job& j = s.state().job(id);
      if (j.phase() == JobPhase::kPending && !Join(s, j)) return false;
    }
    groups_valid_ = true;
    return true;
  }

  // The job into its group (false: it holds something: no group).
  bool Join(Session& s, const Job& j) {
    if (!j.allocated().IsZero()) {
      groups_valid_ = false;
      return false;
    }
    const uint32_t id = j.id().value();
    if (rows_.size() < (size_t{id} + 1) * width_) rows_.resize((size_t{id} + 1 + id / 2) * width_);
    int64_t* row = rows_.data() + size_t{id} * width_;
    s.JobOrderKeys(j, row);
    row[width_ - 2] = j.created();
    row[width_ - 1] = static_cast<int64_t>(id);
    const uint32_t q = j.queue().value();
    const int members = j.min_member();
    const size_t tasks = j.tasks().size();
    const Resources& min = j.min_request();
    const uint64_t h = MixResources((uint64_t{q} << 32) ^ static_cast<uint64_t>(members) ^ (uint64_t{tasks} << 20), min);
    std::vector<uint32_t>& alike = by_key_[h];
    uint32_t g = 0;
    for (; g < alike.size(); ++g) {
      const Group& gr = *groups_[alike[g]];
      if (gr.queue == q && gr.min_member == members && gr.tasks == tasks && gr.minimum == min) break;
    }
    if (g == alike.size()) {
      alike.push_back(static_cast<uint32_t>(groups_.size()));
      groups_.push_back(std::make_unique<Group>(q, min, members, tasks, RowLess{&rows_, &width_}));
    }
    const uint32_t at = alike[g];
    if (group_of_.size() <= id) group_of_.resize(size_t{id} + 1 + id / 2, 0);
    group_of_[id] = at + 1;
    groups_[at]->jobs.insert(id);
    groups_[at]->unsettled.push_back(id);
    return true;
  }

  void Leave(uint32_t id) {
    if (id >= group_of_.size() || group_of_[id] == 0) return;
    groups_[group_of_[id] - 1]->jobs.erase(id);
    group_of_[id] = 0;
  }

  bool groups_valid_ = false;
  size_t width_ = 0;
  std::vector<int64_t> rows_;  // by job id: its row (width_ each), while in a group
  std::vector<std::unique_ptr<Group>> groups_;
  absl::flat_hash_map<uint64_t, std::vector<uint32_t>> by_key_;  // a hash of the key -> groups
  std::vector<uint32_t> group_of_;  // by job id: its group + 1 (0: none)
  std::vector<uint32_t> fitting_, heap_;
  std::vector<absl::btree_set<uint32_t, RowLess>::const_iterator> heads_;

  std::vector<Job*> pending_;  // the cycle's pending jobs (reused)
  std::vector<Job*> hits_, misses_;  // those whose memo held, did not (reused)
  int admitted_ = 0;           // admissions this cycle
  std::vector<JobId> admitted_ids_;  // the jobs admitted this cycle (reused)
  // Per queue: the id of its chain use and the admission count it was
  // computed at (this cycle); the uses seen (by a hash of the values).
  std::vector<uint64_t> use_id_;
  std::vector<int> use_at_;
  std::vector<std::unordered_map<uint64_t, std::vector<std::pair<std::vector<Resources>, uint64_t>>>> interned_;
  std::vector<Resources> scratch_;
  // The last cycle refused every pending job with its memo (MarkClean):
  // the policy then and the use of each queue asked.
  bool clean_ = false;
  uint64_t clean_policy_ = 0;
  std::vector<std::pair<uint32_t, uint64_t>> clean_queues_;
  std::vector<JobId> changed_;  // State::TakeAdmissionChanges (reused)
};

}  // namespace

std::unique_ptr<Action> NewEnqueueAction() { return std::make_unique<EnqueueAction>(); }

}  // namespace ringmaster::scheduler
