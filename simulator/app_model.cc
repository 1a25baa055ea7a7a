// Application models read from measured tables (app_model.h).
#include "simulator/app_model.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <limits>
#include <map>
#include <mutex>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "simulator/trace_table.h"
#include "topology/node_lists.h"

namespace ringmaster::simulator {
namespace {

constexpr int kMaxReplicas = 64;
constexpr int kMaxNodes = 16;  // configurations above are looked up at 16 nodes

// The digits of a placement rotated to their smallest form.
std::string Normalize(std::string digits) {
  std::string best = digits;
  for (size_t i = 1; i < digits.size(); ++i) {
    std::rotate(digits.begin(), digits.begin() + 1, digits.end());
    best = std::min(best, digits);
  }
  return best;
}

double Lerp(double a, double b, double t) { return a + (b - a) * t; }

// Reads the named columns of every row as numbers > 0 (or >= 0 with
// `zero_ok`); errors "file:line: column: ...".
absl::StatusOr<std::vector<std::vector<double>>> ReadNumbers(const TraceTable& t,
                                                             const std::vector<std::string>& names,
                                                             const std::vector<bool>& zero_ok) {
  std::vector<int> cols;
  for (const std::string& n : names) {
    RM_ASSIGN_OR_RETURN(auto c, t.RequireColumn(n));
    cols.push_back(c);
  }
  std::vector<std::vector<double>> out;
  for (const TableRow& r : t.rows()) {
    std::vector<double> row;
    for (size_t i = 0; i < cols.size(); ++i) {
      RM_ASSIGN_OR_RETURN(auto v, t.Double(r, cols[i], names[i], 0, true));
      if (!std::isfinite(v) || v < 0 || (v == 0 && !zero_ok[i])) {
        return t.Error(r.line, names[i], zero_ok[i] ? "must be a number >= 0" : "must be a number > 0");
      }
      row.push_back(v);
    }
    out.push_back(std::move(row));
  }
  if (out.empty()) return absl::InvalidArgumentError(absl::StrCat(t.filename(), ": no rows"));
  return out;
}

}  // namespace

StepTime AppModel::Curve::At(double local_bsz) const {
  if (local_bsz <= bsz.front()) return {step.front(), sync.front()};
  if (local_bsz >= bsz.back()) return {step.back(), sync.back()};
  const size_t hi = std::upper_bound(bsz.begin(), bsz.end(), local_bsz) - bsz.begin();
  const size_t lo = hi - 1;
  const double t = (local_bsz - bsz[lo]) / (bsz[hi] - bsz[lo]);
  return {Lerp(step[lo], step[hi], t), Lerp(sync[lo], sync[hi], t)};
}

absl::StatusOr<std::shared_ptr<const AppModel>> AppModel::Load(const std::string& dir) {
  auto model = std::make_shared<AppModel>();
  model->name_ = std::filesystem::path(dir).filename().string();
  if (model->name_.empty()) model->name_ = std::filesystem::path(dir).parent_path().filename().string();
  // Per-point sums: placements by normalized digits, configurations by
  // (nodes, GPUs), each at a local batch.
  std::map<std::string, std::map<double, StepTime>> by_placement;
  std::map<std::pair<int, int>, std::map<double, std::pair<StepTime, int>>> means;
  {
    const std::string path = dir + "/placements.csv";
    RM_ASSIGN_OR_RETURN(auto text, topology::ReadTextFile(path));
    const TraceTable t = TraceTable::Split(text, path, ',', true);
    RM_ASSIGN_OR_RETURN(auto col, t.RequireColumn("placement"));
    RM_ASSIGN_OR_RETURN(auto rows, ReadNumbers(t, {"local_bsz", "step_time", "sync_time"}, {false, false, true}));
    model->min_local_ = std::numeric_limits<int>::max();
    for (size_t i = 0; i < t.rows().size(); ++i) {
      const TableRow& r = t.rows()[i];
      RM_ASSIGN_OR_RETURN(auto p, t.Text(r, col, "placement", true));
      if (p.size() > 64 || p.find_first_not_of("123456789") != std::string_view::npos) {
        return t.Error(r.line, "placement", "must be the GPUs of each node, digits 1-9 (e.g. 22)");
      }
      const std::vector<double>& v = rows[i];
      if (v[2] > v[1]) return t.Error(r.line, "sync_time", "must not exceed step_time");
      if (v[0] != std::floor(v[0])) return t.Error(r.line, "local_bsz", "must be a whole number");
      const std::string key = Normalize(std::string(p));
      if (!by_placement[key].emplace(v[0], StepTime{v[1], v[2]}).second) {
        return t.Error(r.line, "local_bsz", absl::StrCat("placement ", std::string(p), " at ", v[0], " given twice"));
      }
      int gpus = 0;
      for (char c : key) gpus += c - '0';
      auto& [sum, n] = means[{std::min<int>(kMaxNodes, static_cast<int>(key.size())), gpus}][v[0]];
      sum.step_s += v[1];
      sum.sync_s += v[2];
      ++n;
      model->min_local_ = std::min(model->min_local_, static_cast<int>(v[0]));
      model->max_local_ = std::max(model->max_local_, static_cast<int>(v[0]));
    }
  }
  const std::string scal_path = dir + "/scalability.csv";
  if (std::filesystem::exists(scal_path)) {
    RM_ASSIGN_OR_RETURN(auto text, topology::ReadTextFile(scal_path));
    const TraceTable t = TraceTable::Split(text, scal_path, ',', true);
    RM_ASSIGN_OR_RETURN(auto rows, ReadNumbers(t, {"num_nodes", "num_replicas", "local_bsz", "step_time", "sync_time"},
                                               {false, false, false, false, true}));
    for (size_t i = 0; i < rows.size(); ++i) {
      const std::vector<double>& v = rows[i];
      const int line = t.rows()[i].line;
      if (v[0] != std::floor(v[0])) return t.Error(line, "num_nodes", "must be a whole number");
      if (v[1] != std::floor(v[1]) || v[1] < v[0]) {
        return t.Error(line, "num_replicas", "must be a whole number >= num_nodes");
      }
      if (v[4] > v[3]) return t.Error(line, "sync_time", "must not exceed step_time");
      auto& [sum, n] = means[{std::min<int>(kMaxNodes, static_cast<int>(v[0])), static_cast<int>(v[1])}][v[2]];
      sum.step_s += v[3];
      sum.sync_s += v[4];
      ++n;
    }
  }
  for (const auto& [key, points] : by_placement) {
    Curve& c = model->placements_[key];
    for (const auto& [b, st] : points) {
      c.bsz.push_back(b);
      c.step.push_back(st.step_s);
      c.sync.push_back(st.sync_s);
    }
  }
  for (const auto& [key, points] : means) {
    Curve& c = model->configs_[key];
    for (const auto& [b, sum] : points) {
      c.bsz.push_back(b);
      c.step.push_back(sum.first.step_s / sum.second);
      c.sync.push_back(sum.first.sync_s / sum.second);
    }
  }
  // Validation runs, one per batch size.
  std::map<int, std::vector<std::vector<double>>> runs;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(dir, ec)) {
    const std::string file = entry.path().filename().string();
    if (file.rfind("validation-", 0) != 0 || entry.path().extension() != ".csv") continue;
    const std::string b = file.substr(11, file.size() - 11 - 4);
    int batch = 0;
    if (!absl::SimpleAtoi(b, &batch) || batch < 1) {
      return absl::InvalidArgumentError(
          absl::StrCat(entry.path().string(), ": name: expected validation-<global batch size>.csv"));
    }
    RM_ASSIGN_OR_RETURN(auto text, topology::ReadTextFile(entry.path().string()));
    const TraceTable t = TraceTable::Split(text, entry.path().string(), ',', true);
    RM_ASSIGN_OR_RETURN(auto rows, ReadNumbers(t, {"progress", "grad_sqr", "grad_var"}, {false, true, true}));
    for (size_t i = 1; i < rows.size(); ++i) {
      if (rows[i][0] <= rows[i - 1][0]) {
        return t.Error(t.rows()[i].line, "progress", "must increase from one epoch to the next");
      }
    }
    runs[batch] = std::move(rows);
  }
  if (ec) return absl::InvalidArgumentError(absl::StrCat(dir, ": cannot list: ", ec.message()));
  if (runs.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(dir, ": no validation-<B>.csv (one per trained batch size)"));
  }
  size_t epochs = std::numeric_limits<size_t>::max();
  for (const auto& [b, rows] : runs) epochs = std::min(epochs, rows.size());
  const std::string limits_path = dir + "/limits.csv";
  if (std::filesystem::exists(limits_path)) {
    RM_ASSIGN_OR_RETURN(auto text, topology::ReadTextFile(limits_path));
    const TraceTable t = TraceTable::Split(text, limits_path, ',', true);
    if (t.rows().size() != 1) return absl::InvalidArgumentError(absl::StrCat(limits_path, ": expected one row"));
    const TableRow& r = t.rows()[0];
    int64_t max_epochs = 0, lo = 0, hi = 0;
    for (auto [name, def, out] : {std::tuple{"max_epochs", static_cast<int64_t>(epochs), &max_epochs},
                                  {"min_local_bsz", int64_t{model->min_local_}, &lo},
                                  {"max_local_bsz", int64_t{model->max_local_}, &hi}}) {
      RM_ASSIGN_OR_RETURN(auto v, t.Int(r, t.Column(name), name, def, false));
      if (v < 1) return t.Error(r.line, name, "must be >= 1");
      *out = v;
    }
    if (max_epochs > static_cast<int64_t>(epochs)) {
      return t.Error(r.line, "max_epochs", absl::StrCat("the validation files have only ", epochs, " epochs"));
    }
    if (lo > hi) return t.Error(r.line, "min_local_bsz", "must not exceed max_local_bsz");
    epochs = static_cast<size_t>(max_epochs);
    model->min_local_ = static_cast<int>(lo);
    model->max_local_ = static_cast<int>(hi);
  }
  for (const auto& [b, rows] : runs) {
    model->batch_sizes_.push_back(b);
    model->grad_sqr_.emplace_back();
    model->grad_var_.emplace_back();
    for (size_t e = 0; e < epochs; ++e) {
      model->grad_sqr_.back().push_back(rows[e][1]);
      model->grad_var_.back().push_back(rows[e][2]);
    }
  }
  for (size_t e = 0; e < epochs; ++e) {
    double p = std::numeric_limits<double>::infinity();
    for (const auto& [b, rows] : runs) p = std::min(p, rows[e][0]);
    model->epoch_end_.push_back(p);
  }
  for (size_t e = 1; e < epochs; ++e) {
    if (model->epoch_end_[e] <= model->epoch_end_[e - 1]) {
      return absl::InvalidArgumentError(
          absl::StrCat(dir, ": epoch ", e + 1, " needs no more progress than epoch ", e, " (smallest over the validation files)"));
    }
  }
  return std::shared_ptr<const AppModel>(std::move(model));
}

BatchPlan AppModel::Plan(int batch, int replicas) const {
  BatchPlan p;
  const int local = (batch + replicas - 1) / replicas;
  p.accum_steps = (local + max_local_ - 1) / max_local_ - 1;
  if (replicas == 1 && batch > init_batch()) p.accum_steps = std::max(1, p.accum_steps);
  const int count = replicas * (p.accum_steps + 1);
  p.micro_batch = (local + p.accum_steps) / (p.accum_steps + 1);
  p.micro_batch = std::max(1, std::min(p.micro_batch, max_batch() / count));
  p.batch = count * p.micro_batch;
  return p;
}

bool AppModel::AtNodes(int nodes, int replicas, double local_bsz, StepTime* out) const {
  auto lo = configs_.end();
  auto hi = configs_.end();
  for (auto it = configs_.lower_bound({nodes, 0}); it != configs_.end() && it->first.first == nodes; ++it) {
    if (it->first.second <= replicas) lo = it;
    if (it->first.second >= replicas) {
      hi = it;
      break;
    }
  }
  if (lo == configs_.end() || hi == configs_.end()) return false;
  const StepTime a = lo->second.At(local_bsz);
  if (lo == hi) {
    *out = a;
    return true;
  }
  const StepTime b = hi->second.At(local_bsz);
  const double t = static_cast<double>(replicas - lo->first.second) / (hi->first.second - lo->first.second);
  *out = {Lerp(a.step_s, b.step_s, t), Lerp(a.sync_s, b.sync_s, t)};
  return true;
}

StepTime AppModel::Interpolated(int nodes, int replicas, double local_bsz) const {
  nodes = std::min(nodes, kMaxNodes);
  StepTime here;
  if (AtNodes(nodes, replicas, local_bsz, &here)) return here;
  // The nearest node counts below and above that have a bracket at `replicas`.
  StepTime below, above;
  int n_below = -1, n_above = -1;
  for (int n = nodes - 1; n >= 1 && n_below < 0; --n) {
    if (AtNodes(n, replicas, local_bsz, &below)) n_below = n;
  }
  for (int n = nodes + 1; n <= kMaxNodes && n_above < 0; ++n) {
    if (AtNodes(n, replicas, local_bsz, &above)) n_above = n;
  }
  if (n_below > 0 && n_above > 0) {
    const double t = static_cast<double>(nodes - n_below) / (n_above - n_below);
    return {Lerp(below.step_s, above.step_s, t), Lerp(below.sync_s, above.sync_s, t)};
  }
  if (n_below > 0) return below;
  if (n_above > 0) return above;
  // Outside every bracket: the nearest configuration (GPUs first, then nodes).
  auto best = configs_.begin();
  auto dist = [&](const std::pair<int, int>& k) {
    return std::pair{std::abs(k.second - replicas), std::abs(k.first - nodes)};
  };
  for (auto it = configs_.begin(); it != configs_.end(); ++it) {
    if (dist(it->first) < dist(best->first)) best = it;
  }
  return best->second.At(local_bsz);
}

StepTime AppModel::Throughput(const std::vector<int>& placement, double local_bsz) const {
  std::string digits;
  int nodes = 0, gpus = 0;
  bool single_digits = true;
  for (int g : placement) {
    if (g <= 0) continue;
    ++nodes;
    gpus += g;
    if (g > 9) single_digits = false;
    digits.push_back(static_cast<char>('0' + std::min(g, 9)));
  }
  if (nodes == 0) return {};
  if (single_digits) {
    auto it = placements_.find(Normalize(digits));
    if (it != placements_.end()) return it->second.At(local_bsz);
  }
  return Interpolated(nodes, gpus, local_bsz);
}

double AppModel::Gain(int batch, int epoch) const {
  const size_t hi = std::lower_bound(batch_sizes_.begin(), batch_sizes_.end(), batch) - batch_sizes_.begin();
  double sqr = 0, var = 0;
  if (hi == 0) {
    sqr = grad_sqr_[0][epoch];
    var = grad_var_[0][epoch];
  } else if (hi == batch_sizes_.size()) {
    sqr = grad_sqr_.back()[epoch];
    var = grad_var_.back()[epoch];
  } else {
    const size_t lo = hi - 1;
    const double t = static_cast<double>(batch - batch_sizes_[lo]) / (batch_sizes_[hi] - batch_sizes_[lo]);
    sqr = Lerp(grad_sqr_[lo][epoch], grad_sqr_[hi][epoch], t);
    var = Lerp(grad_var_[lo][epoch], grad_var_[hi][epoch], t);
  }
  const double scale = static_cast<double>(batch) / init_batch();
  const double den = var / scale + sqr;
  return den > 0 ? (var + sqr) / den : 1.0;
}

double AppModel::Goodput(const std::vector<int>& placement, int batch, int epoch) const {
  int replicas = 0;
  for (int g : placement) replicas += std::max(0, g);
  if (replicas == 0) return 0;
  const BatchPlan plan = Plan(batch, replicas);
  const StepTime st = Throughput(placement, plan.micro_batch);
  const double total = st.step_s + plan.accum_steps * (st.step_s - st.sync_s);
  return total > 0 ? Gain(plan.batch, epoch) / total : 0;
}

int AppModel::MaxReplicas(int batch) const {
  for (int r = kMaxReplicas; r > 1; --r) {
    if ((batch + r - 1) / r >= min_local_) return r;
  }
  return 1;
}

absl::StatusOr<AppModels> LoadAppModels(const std::string& dir) {
  AppModels out;
  std::error_code ec;
  std::vector<std::filesystem::path> folders;
  for (const auto& entry : std::filesystem::directory_iterator(dir, ec)) {
    if (entry.is_directory() && std::filesystem::exists(entry.path() / "placements.csv")) {
      folders.push_back(entry.path());
    }
  }
  if (ec) return absl::InvalidArgumentError(absl::StrCat(dir, ": cannot list: ", ec.message()));
  std::sort(folders.begin(), folders.end());
  for (const auto& f : folders) {
    RM_ASSIGN_OR_RETURN(out[f.filename().string()], AppModel::Load(f.string()));
  }
  if (out.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat(dir, ": no application models (subfolders with a placements.csv; docs/TRACE_FORMAT.md)"));
  }
  return out;
}

absl::Status AttachAppModels(std::vector<TraceJob>& trace, const AppModels& models, bool elastic,
                             std::string_view trace_name) {
  for (TraceJob& j : trace) {
    if (j.application.empty()) continue;
    auto bad = [&](std::string_view field, std::string_view what) {
      return absl::InvalidArgumentError(absl::StrCat(std::string(trace_name), ":", j.line, ": ", std::string(field), ": ", std::string(what)));
    };
    auto it = models.find(j.application);
    if (it == models.end()) {
      std::string names;
      for (const auto& [n, m] : models) absl::StrAppend(&names, names.empty() ? "" : ", ", n);
      return bad("application", absl::StrCat("no model '", j.application, "' (models: ", names.empty() ? "none; give --apps DIR" : names, ")"));
    }
    if (j.batch_size < 1) return bad("batch_size", "a job with an application model needs its global batch size");
    if (j.gpus() < 1) return bad("tasks", "a job with an application model needs at least one GPU");
    j.app = it->second;
    j.spec.speed = AppSpeedModel(j.app, j.batch_size);
    // One GPU per task: the model's speed depends on the GPUs of each node.
    const int gpus = j.gpus();
    j.worker().replicas = gpus;
    j.worker().gpu.count = 1;
    j.spec.size = elastic ? scheduler::GangSize::FromBounds(1, std::max(gpus, j.app->MaxReplicas(j.batch_size)), gpus)
                          : scheduler::GangSize{};
    if (j.reform_pause_s < 0) j.reform_pause_s = kAppReformPauseS;
  }
  return absl::OkStatus();
}

namespace {

class AppSpeed : public scheduler::SpeedModel {
 public:
  AppSpeed(std::shared_ptr<const AppModel> model, int batch) : model_(std::move(model)), batch_(batch) {}
  double Rate(int gpus, int nodes) const override {
    if (gpus < 1 || nodes < 1 || nodes > gpus) return 0;
    const std::pair<int, int> key(gpus, nodes);
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (auto it = rates_.find(key); it != rates_.end()) return it->second;
    }
    std::vector<int> placement(nodes, gpus / nodes);
    for (int i = 0; i < gpus % nodes; ++i) ++placement[i];
    const double r = model_->Goodput(placement, batch_, 0);
    std::lock_guard<std::mutex> lock(mu_);
    rates_.emplace(key, r);
    return r;
  }
  std::string Describe() const override {
    return absl::StrCat("measured: ", model_->name(), " at global batch ", batch_);
  }

 private:
  std::shared_ptr<const AppModel> model_;
  int batch_;
  mutable std::mutex mu_;
  mutable std::map<std::pair<int, int>, double> rates_;
};

}  // namespace

std::shared_ptr<const scheduler::SpeedModel> AppSpeedModel(std::shared_ptr<const AppModel> model, int batch) {
  return std::make_shared<AppSpeed>(std::move(model), batch);
}

void AppRun::SetPlacement(std::vector<int> placement) {
  if (placement == placement_) return;
  placement_ = std::move(placement);
  rate_.assign(model_->max_epochs(), -1);
}

double AppRun::Rate(int epoch) const {
  if (placement_.empty()) return 0;
  double& r = rate_[epoch];
  if (r < 0) r = model_->Goodput(placement_, batch_, epoch);
  return r;
}

void AppRun::Advance(double seconds) {
  while (seconds > 0 && !finished()) {
    const double rate = Rate(epoch_);
    if (rate <= 0) return;
    const double need = (model_->EpochEnd(epoch_) - progress_) / rate;
    if (need > seconds) {
      progress_ += rate * seconds;
      return;
    }
    seconds -= need;
    progress_ = model_->EpochEnd(epoch_);
    ++epoch_;
  }
}

double AppRun::SecondsToFinish() const {
  double total = 0;
  double at = progress_;
  for (int e = epoch_; e < model_->max_epochs(); ++e) {
    const double rate = Rate(e);
    if (rate <= 0) return std::numeric_limits<double>::infinity();
    total += (model_->EpochEnd(e) - at) / rate;
    at = model_->EpochEnd(e);
  }
  return total;
}

}  // namespace ringmaster::simulator
