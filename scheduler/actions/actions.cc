#include <algorithm>
#include <cstdint>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/status_macros.h"
#include "scheduler/actions/action.h"
#include "scheduler/actions/learned_walltime.h"
#include "scheduler/actions/victims.h"

namespace ringmaster::scheduler {

void SortJobsByKeys(const Session& s, Job** jobs, size_t n) {
  JobOrderCache* cache = s.job_order_cache();
  thread_local JobOrderCache scratch;  // a session without the engine's cache
  JobOrderCache& c = cache ? *cache : scratch;
  const size_t m = s.job_order_keys();
  const size_t w = m + 2;
  std::vector<int64_t>& in = c.in_rows;
  in.resize(n * w);
  // Keys are a function of the job, the state and the clock: within one
  // session, between two commits, at one state epoch, a job's row is read
  // back (the actions of a cycle sort the same waiting jobs again and again).
  if (cache) {
    const uint64_t epoch = s.state().epoch();
    if (c.key_width != w) {  // another policy: no row is valid, and rows are wider or narrower
      c.key_width = w;
      c.key_ctx.clear();
      c.key_rows.clear();
      c.key_policy.clear();
      c.key_tasks.clear();
    }
    if (c.ctx_session != s.stamp() || c.ctx_commits != s.commits() || c.ctx_epoch != epoch) {
      if (++c.ctx == 0) {  // wrapped: no stale row may match
        std::fill(c.key_ctx.begin(), c.key_ctx.end(), 0);
        c.ctx = 1;
      }
      c.ctx_session = s.stamp();
      c.ctx_commits = s.commits();
      c.ctx_epoch = epoch;
    }
  }
  // A waiting job's keys, with every key fixed while it holds nothing
  // (Session::job_order_static), are those of an earlier session while its
  // tasks and the policy are as they were: read back, not asked again.
  const uint64_t policy = cache && s.job_order_static() ? s.VerdictPolicyId() : 0;
  for (size_t i = 0; i < n; ++i) {
    int64_t* row = &in[i * w];
    const Job& job = *jobs[i];
    const uint32_t id = job.id().value();
    if (cache && id < c.key_ctx.size() &&
        (c.key_ctx[id] == c.ctx ||
         (policy != 0 && c.key_policy[id] == policy && c.key_tasks[id] == job.task_changes()))) {
      std::copy_n(c.key_rows.data() + size_t{id} * w, w, row);
      c.key_ctx[id] = c.ctx;
      continue;
    }
    s.JobOrderKeys(job, row);
    row[m] = job.created();
    row[m + 1] = static_cast<int64_t>(id);
    if (cache) {
      if (id >= c.key_ctx.size()) {
        const size_t grown = size_t{id} + 1 + id / 2;
        c.key_ctx.resize(grown, 0);
        c.key_rows.resize(grown * w);
        c.key_policy.resize(grown, 0);
        c.key_tasks.resize(grown, 0);
      }
      c.key_ctx[id] = c.ctx;
      // Fixed while the job holds nothing; 0: asked again next session.
      c.key_policy[id] = job.allocated().IsZero() ? policy : 0;
      c.key_tasks[id] = job.task_changes();
      std::copy_n(row, w, c.key_rows.data() + size_t{id} * w);
    }
  }
  auto less = [w](const int64_t* x, const int64_t* y) {
    for (size_t k = 0; k < w; ++k) {
      if (x[k] != y[k]) return x[k] < y[k];
    }
    return false;
  };
  const int64_t* base = in.data();
  auto before = [&](uint32_t a, uint32_t b) { return less(base + size_t{a} * w, base + size_t{b} * w); };
  bool in_order = true;
  for (size_t i = 1; i < n && in_order; ++i) in_order = !before(static_cast<uint32_t>(i), static_cast<uint32_t>(i - 1));
  if (in_order) return;
  // The jobs whose row is the cache's (hits: in the cache's order, sorted
  // by their row there) and the others (misses: sorted here); then one
  // merge of the two sorted runs.
  if (c.width != w || !cache) {
    c.width = w;
    c.rows.clear();
    std::fill(c.pos.begin(), c.pos.end(), 0);
  }
  c.hits.clear();
  c.misses.clear();
  // The hits in the cache's order: many are marked by row and read in one
  // walk of the rows (no sort); a few (a filtered list) are sorted by row.
  const size_t cached = c.rows.size() / w;
  const bool walk = n * 8 >= cached;
  if (walk) c.hit_at.resize(cached, 0);
  c.packed.clear();
  for (size_t i = 0; i < n; ++i) {
    const uint32_t id = jobs[i]->id().value();
    const uint32_t r = id < c.pos.size() ? c.pos[id] : 0;
    if (r > 0 && std::equal(base + i * w, base + (i + 1) * w, c.rows.data() + size_t{r - 1} * w)) {
      if (walk) {
        c.hit_at[r - 1] = static_cast<uint32_t>(i + 1);
      } else {
        c.packed.push_back((uint64_t{r - 1} << 32) | i);
      }
    } else {
      c.misses.push_back(static_cast<uint32_t>(i));
    }
  }
  if (walk) {
    if (c.misses.size() < n) {
      for (size_t r = 0; r < cached; ++r) {
        if (c.hit_at[r] == 0) continue;
        c.hits.push_back(c.hit_at[r] - 1);
        c.hit_at[r] = 0;  // cleared as read: the next sort finds none set
      }
    }
  } else {
    std::sort(c.packed.begin(), c.packed.end());
    for (uint64_t h : c.packed) c.hits.push_back(static_cast<uint32_t>(h & 0xffffffffu));
  }
  std::sort(c.misses.begin(), c.misses.end(), before);
  c.order.clear();
  {
    size_t h = 0, k = 0;
    while (h < c.hits.size() || k < c.misses.size()) {
      const bool hit = k == c.misses.size() || (h < c.hits.size() && before(c.hits[h], c.misses[k]));
      c.order.push_back(hit ? c.hits[h++] : c.misses[k++]);
    }
  }
  c.out.resize(n);
  for (size_t i = 0; i < n; ++i) c.out[i] = jobs[c.order[i]];
  std::copy(c.out.begin(), c.out.end(), jobs);
  if (!cache || c.misses.empty()) return;  // the cache has every row already
  // The cache becomes its rows of jobs not sorted here (still sorted, maybe
  // stale: a lookup compares) merged with this sort's rows, unless those
  // outnumber these by far (then only this sort's).
  const size_t old = c.rows.size() / w;
  c.drop.assign(old, 0);
  size_t kept = old;
  for (uint32_t i : c.order) {
    const uint32_t id = static_cast<uint32_t>(base[size_t{i} * w + m + 1]);
    const uint32_t r = id < c.pos.size() ? c.pos[id] : 0;
    if (r > 0 && !c.drop[r - 1]) {
      c.drop[r - 1] = 1;
      --kept;
    }
  }
  const bool keep_old = kept <= 4 * n + 1024;
  c.next_rows.clear();
  c.next_rows.reserve((keep_old ? kept : 0) * w + n * w);
  {
    size_t r = 0, k = 0;
    auto skip = [&] {
      while (r < old && (!keep_old || c.drop[r])) ++r;
    };
    skip();
    while (r < old || k < n) {
      const int64_t* mine = k < n ? base + size_t{c.order[k]} * w : nullptr;
      const int64_t* theirs = r < old ? c.rows.data() + r * w : nullptr;
      if (theirs && (!mine || less(theirs, mine))) {
        c.next_rows.insert(c.next_rows.end(), theirs, theirs + w);
        ++r;
        skip();
      } else {
        c.next_rows.insert(c.next_rows.end(), mine, mine + w);
        ++k;
      }
    }
  }
  for (size_t r = 0; r < old; ++r) {
    const uint32_t id = static_cast<uint32_t>(c.rows[r * w + m + 1]);
    if (id < c.pos.size()) c.pos[id] = 0;
  }
  c.rows.swap(c.next_rows);
  for (size_t r = 0; r < c.rows.size() / w; ++r) {
    const uint32_t id = static_cast<uint32_t>(c.rows[r * w + m + 1]);
    if (id >= c.pos.size()) c.pos.resize(size_t{id} + 1 + id / 2, 0);
    c.pos[id] = static_cast<uint32_t>(r + 1);
  }
}

const std::vector<std::string>& KnownActions() {
  static const std::vector<std::string> kNames = {"enqueue", "allocate", "preempt", "reclaim", "elastic",
                                                  "backfill"};
  return kNames;
}

absl::StatusOr<std::unique_ptr<Action>> MakeAction(std::string_view name, const PluginArgs& args) {
  if (name == "enqueue" || name == "allocate") {
    RM_RETURN_IF_ERROR(args.Finish());
    if (name == "enqueue") return NewEnqueueAction();
    return NewAllocateAction();
  }
  if (name == "backfill") {
    RM_ASSIGN_OR_RETURN(auto a, ReadBackfillArgs(args));
    return NewBackfillAction(a);
  }
  if (name == "preempt" || name == "reclaim") {
    RM_ASSIGN_OR_RETURN(auto a, ReadEvictionArgs(args));
    return name == "preempt" ? NewPreemptAction(a) : NewReclaimAction(a);
  }
  if (name == "elastic") {
    RM_ASSIGN_OR_RETURN(auto a, ReadElasticArgs(args));
    return NewElasticAction(a);
  }
  return absl::NotFoundError(absl::StrCat("unknown action '", std::string(name), "' (known: ",
                                          absl::StrJoin(KnownActions(), ", "), ")"));
}

}  // namespace ringmaster::scheduler
