// The fake NCCL; see fake_nccl.h.
#include "tests/worker_shim/fake_nccl.h"

#include <algorithm>
#include <chrono>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace ringmaster::shim::testing {

// A communicator's shared state: its members and the exchange slots.
struct FakeNccl::Group {
  int n = 0;
  std::vector<std::string> owners;  // by rank, filled as ranks join
  int joined = 0;
  int64_t round = 0;
  int arrived = 0;
  int departed = 0;
  bool distributing = false;
  bool broken = false;
  std::vector<std::vector<char>> slots;
};

// One rank's handle; ncclComm_t points at it.
struct FakeNccl::Comm {
  std::shared_ptr<Group> group;
  int rank = 0;
  std::string owner;
  bool revoked = false;
  bool aborted = false;
  int polls_left = 0;
  bool never_completes = false;
  ncclResult_t async = ncclSuccess;
};

namespace {

constexpr auto kTimeout = std::chrono::seconds(20);

FakeNccl::Comm* AsComm(ncclComm_t c) {
  return reinterpret_cast<FakeNccl::Comm*>(c);
}
ncclComm_t AsNccl(FakeNccl::Comm* c) { return reinterpret_cast<ncclComm_t>(c); }

size_t ElemSize(ncclDataType_t t) {
  switch (t) {
    case ncclInt8:
    case ncclUint8:
      return 1;
    case ncclFloat16:
    case ncclBfloat16:
      return 2;
    case ncclInt32:
    case ncclUint32:
    case ncclFloat32:
      return 4;
    default:
      return 8;
  }
}

template <typename T>
void Reduce(std::vector<std::vector<char>>& all, void* out, size_t count,
            ncclRedOp_t op) {
  T* o = static_cast<T*>(out);
  for (size_t i = 0; i < count; ++i) {
    T acc = reinterpret_cast<const T*>(all[0].data())[i];
    for (size_t r = 1; r < all.size(); ++r) {
      const T v = reinterpret_cast<const T*>(all[r].data())[i];
      acc = op == ncclSum ? acc + v : std::max(acc, v);
    }
    o[i] = acc;
  }
}

}  // namespace

FakeNccl::FakeNccl() = default;
FakeNccl::~FakeNccl() = default;

void FakeNccl::Record(const std::string& who, std::string call) {
  std::lock_guard<std::mutex> lock(mu_);
  logs_[who].push_back(std::move(call));
}

std::vector<std::string> FakeNccl::Log(const std::string& participant) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = logs_.find(participant);
  return it == logs_.end() ? std::vector<std::string>() : it->second;
}

void FakeNccl::ClearLogs() {
  std::lock_guard<std::mutex> lock(mu_);
  logs_.clear();
}

void FakeNccl::Kill(const std::string& participant) {
  std::lock_guard<std::mutex> lock(mu_);
  dead_.insert(participant);
  for (auto& [key, g] : groups_) {
    if (std::find(g->owners.begin(), g->owners.end(), participant) !=
        g->owners.end()) {
      g->broken = true;
    }
  }
  cv_.notify_all();
}

ncclResult_t FakeNccl::Exchange(Comm* comm, const void* in, size_t bytes,
                                std::vector<std::vector<char>>* all) {
  std::unique_lock<std::mutex> lock(mu_);
  Group& g = *comm->group;
  auto broken = [&] { return g.broken || comm->revoked || comm->aborted; };
  if (!cv_.wait_for(lock, kTimeout, [&] { return !g.distributing || broken(); }) ||
      broken()) {
    g.broken = true;
    cv_.notify_all();
    return ncclRemoteError;
  }
  const int64_t round = g.round;
  g.slots[comm->rank].assign(static_cast<const char*>(in),
                             static_cast<const char*>(in) + bytes);
  if (++g.arrived == g.n) {
    g.distributing = true;
    cv_.notify_all();
  }
  if (!cv_.wait_for(lock, kTimeout, [&] {
        return (g.distributing && g.round == round) || broken();
      }) ||
      broken()) {
    g.broken = true;
    cv_.notify_all();
    return ncclRemoteError;
  }
  *all = g.slots;
  if (++g.departed == g.n) {
    g.arrived = g.departed = 0;
    g.distributing = false;
    ++g.round;
    cv_.notify_all();
  }
  return ncclSuccess;
}

int FakeNccl::HangingComms() const {
  std::lock_guard<std::mutex> lock(mu_);
  int n = 0;
  for (const auto& c : comms_) {
    if (c->never_completes && !c->revoked && !c->aborted) ++n;
  }
  return n;
}

bool FakeNccl::Gather(Comm* comm, const void* send, size_t bytes,
                      std::vector<std::vector<char>>* all,
                      ncclResult_t* result) {
  if (comm->revoked || comm->aborted) {
    *result = ncclInvalidUsage;
    return false;
  }
  if (faults_.collectives_hang) {
    std::lock_guard<std::mutex> lock(mu_);
    comm->never_completes = true;  // enqueued; GetAsyncError says InProgress
    *result = ncclSuccess;
    return false;
  }
  if (ncclResult_t r = Exchange(comm, send, bytes, all); r != ncclSuccess) {
    std::lock_guard<std::mutex> lock(mu_);
    comm->async = r;  // surfaces through GetAsyncError, like NCCL
    *result = ncclSuccess;
    return false;
  }
  return true;
}

std::shared_ptr<FakeNccl::Group> FakeNccl::InitGroup(const std::string& key,
                                                     int n) {
  auto& g = groups_[key];
  if (!g) {
    g = std::make_shared<Group>();
    g->n = n;
    g->owners.resize(n);
    g->slots.resize(n);
  }
  return g;
}

NcclApi FakeNccl::Api(const std::string& me) {
  NcclApi api;
  api.error_string = [](ncclResult_t) { return "fake nccl error"; };
  api.get_unique_id = [this, me](ncclUniqueId* id) {
    Record(me, "GetUniqueId");
    std::memset(id, 0, sizeof(*id));
    std::lock_guard<std::mutex> lock(mu_);
    const std::string text = absl::StrCat("fake-id-", next_id_++);
    std::memcpy(id->internal, text.data(), text.size());
    return ncclSuccess;
  };
  api.comm_init_rank_config = [this, me](ncclComm_t* out, int n,
                                         ncclUniqueId id, int rank,
                                         ncclConfig_t* config) {
    Record(me, absl::StrCat("InitRankConfig(n=", n, ",rank=", rank,
                            ",blocking=", config->blocking, ")"));
    if (rank < 0 || rank >= n) return ncclInvalidArgument;
    std::unique_lock<std::mutex> lock(mu_);
    auto g = InitGroup(std::string(id.internal), n);
    g->owners[rank] = me;
    ++g->joined;
    cv_.notify_all();
    // NCCL init synchronizes all ranks; the fake does it before returning.
    cv_.wait_for(lock, kTimeout, [&] { return g->joined >= g->n; });
    auto comm = std::make_unique<Comm>();
    comm->group = g;
    comm->rank = rank;
    comm->owner = me;
    comm->polls_left = faults_.in_progress_polls;
    comm->never_completes = faults_.init_never_completes;
    if (g->joined < g->n) comm->async = ncclRemoteError;
    *out = AsNccl(comm.get());
    comms_.push_back(std::move(comm));
    return ncclInProgress;  // non-blocking: completion is polled
  };
  api.comm_shrink = [this, me](ncclComm_t parent, int* excl, int count,
                               ncclComm_t* out, ncclConfig_t* config,
                               int flags) {
    std::vector<int> list(excl, excl + count);
    Record(me, absl::StrCat("Shrink(exclude=[", absl::StrJoin(list, ","),
                            "],flags=", flags, ",blocking=", config->blocking,
                            ")"));
    Comm* p = AsComm(parent);
    if (count <= 0 ||
        std::find(list.begin(), list.end(), p->rank) != list.end()) {
      return ncclInvalidArgument;
    }
    if (faults_.fail_shrink) return ncclInternalError;
    std::sort(list.begin(), list.end());
    const int below = static_cast<int>(
        std::lower_bound(list.begin(), list.end(), p->rank) - list.begin());
    std::unique_lock<std::mutex> lock(mu_);
    const std::string key =
        absl::StrCat("shrink:", reinterpret_cast<uintptr_t>(p->group.get()),
                     ":", absl::StrJoin(list, ","));
    auto g = InitGroup(key, p->group->n - count);
    const int rank = p->rank - below;
    g->owners[rank] = me;
    ++g->joined;
    cv_.notify_all();
    cv_.wait_for(lock, kTimeout, [&] { return g->joined >= g->n; });
    auto comm = std::make_unique<Comm>();
    comm->group = g;
    comm->rank = rank;
    comm->owner = me;
    comm->polls_left = faults_.in_progress_polls;
    if (g->joined < g->n) comm->async = ncclRemoteError;
    *out = AsNccl(comm.get());
    comms_.push_back(std::move(comm));
    return ncclInProgress;
  };
  api.comm_revoke = [this, me](ncclComm_t c, int flags) {
    Record(me, absl::StrCat("Revoke(flags=", flags, ")"));
    std::lock_guard<std::mutex> lock(mu_);
    if (AsComm(c)->revoked || AsComm(c)->aborted) return ncclInvalidArgument;
    AsComm(c)->revoked = true;
    AsComm(c)->never_completes = false;  // in-flight work is stopped
    AsComm(c)->async = ncclSuccess;
    cv_.notify_all();
    return ncclSuccess;
  };
  api.comm_abort = [this, me](ncclComm_t c) {
    Record(me, "Abort");
    std::lock_guard<std::mutex> lock(mu_);
    AsComm(c)->aborted = true;
    // Peers blocked in a collective with this rank see it gone.
    AsComm(c)->group->broken = true;
    cv_.notify_all();
    return ncclSuccess;
  };
  api.comm_get_async_error = [this](ncclComm_t c, ncclResult_t* out) {
    std::lock_guard<std::mutex> lock(mu_);
    Comm* comm = AsComm(c);
    if (comm->async != ncclSuccess) {
      *out = comm->async;
    } else if (comm->never_completes || comm->polls_left > 0) {
      if (comm->polls_left > 0) --comm->polls_left;
      *out = ncclInProgress;
    } else {
      *out = ncclSuccess;
    }
    return ncclSuccess;
  };
  api.all_reduce = [this](const void* send, void* recv, size_t count,
                          ncclDataType_t type, ncclRedOp_t op, ncclComm_t c,
                          cudaStream_t) {
    std::vector<std::vector<char>> all;
    if (ncclResult_t r; !Gather(AsComm(c), send, count * ElemSize(type), &all, &r)) {
      return r;
    }
    switch (type) {
      case ncclFloat32:
        Reduce<float>(all, recv, count, op);
        break;
      case ncclFloat64:
        Reduce<double>(all, recv, count, op);
        break;
      case ncclInt64:
        Reduce<int64_t>(all, recv, count, op);
        break;
      default:
        return ncclInvalidArgument;
    }
    return ncclSuccess;
  };
  api.broadcast = [this](const void* send, void* recv, size_t count,
                         ncclDataType_t type, int root, ncclComm_t c,
                         cudaStream_t) {
    std::vector<std::vector<char>> all;
    if (ncclResult_t r; !Gather(AsComm(c), send, count * ElemSize(type), &all, &r)) {
      return r;
    }
    std::memcpy(recv, all[root].data(), all[root].size());
    return ncclSuccess;
  };
  api.stream_create = [] { return reinterpret_cast<cudaStream_t>(0x1); };
  api.stream_destroy = [](cudaStream_t) {};
  api.stream_query = [](cudaStream_t) { return 0; };
  api.device_alloc = [](size_t bytes) { return ::operator new(bytes); };
  api.device_free = [](void* p) { ::operator delete(p); };
  return api;
}

}  // namespace ringmaster::shim::testing
