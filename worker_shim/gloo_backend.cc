// Gloo backend; see gloo_backend.h.
#include "worker_shim/gloo_backend.h"

#include <gloo/allreduce.h>
#include <gloo/barrier.h>
#include <gloo/broadcast.h>
#include <gloo/math.h>
#include <gloo/common/error.h>
#include <gloo/transport/context.h>
#include <gloo/transport/tcp/address.h>
#include <gloo/transport/tcp/device.h>
#include <netinet/in.h>
#include <signal.h>
#include <string.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace ringmaster::shim {
namespace {

using ReduceFn = void (*)(void*, const void*, const void*, size_t);

template <typename T>
ReduceFn Pick(ReduceOp op) {
  return op == ReduceOp::kSum ? static_cast<ReduceFn>(&gloo::sum<T>)
                              : static_cast<ReduceFn>(&gloo::max<T>);
}

template <typename T>
void RunAllReduce(const std::shared_ptr<gloo::Context>& ctx, void* data,
                  size_t count, ReduceOp op, uint32_t tag) {
  gloo::AllreduceOptions opts(ctx);
  opts.setOutput(static_cast<T*>(data), count);
  opts.setReduceFunction(Pick<T>(op));
  opts.setTag(tag);
  if (count * sizeof(T) <= GlooBackend::kSmallAllReduceBytes) {
    opts.setAlgorithm(gloo::AllreduceOptions::Algorithm::BCUBE);
  }
  gloo::allreduce(opts);
}

constexpr char kRevokedMessage[] =
    "gloo: communicator revoked after a peer failed";

// True when this side dials the pair (self's address greater than the
// peer's), by the rule tcp::Pair::connect applies; only orders the connects,
// a wrong answer costs a wait, not correctness.
// memcmp of the addresses, then the port difference: tcp::Pair::connect's
// order. Sockaddr is sockaddr_in or sockaddr_in6.
template <typename Sockaddr, typename Addr>
bool Greater(const sockaddr_storage& a, const sockaddr_storage& b,
             Addr Sockaddr::*addr, in_port_t Sockaddr::*port) {
  const auto* sa = reinterpret_cast<const Sockaddr*>(&a);
  const auto* sb = reinterpret_cast<const Sockaddr*>(&b);
  int rv = memcmp(&(sa->*addr), &(sb->*addr), sizeof(Addr));
  if (rv == 0) rv = sa->*port - sb->*port;
  return rv > 0;
}

bool Dials(const std::vector<char>& self_bytes,
           const std::vector<char>& peer_bytes) {
  const gloo::transport::tcp::Address self(self_bytes);
  const gloo::transport::tcp::Address peer(peer_bytes);
  const sockaddr_storage& a = self.getSockaddr();
  const sockaddr_storage& b = peer.getSockaddr();
  if (a.ss_family == AF_INET && b.ss_family == AF_INET) {
    return Greater(a, b, &sockaddr_in::sin_addr, &sockaddr_in::sin_port);
  }
  if (a.ss_family == AF_INET6 && b.ss_family == AF_INET6) {
    return Greater(a, b, &sockaddr_in6::sin6_addr, &sockaddr_in6::sin6_port);
  }
  return true;
}

}  // namespace

absl::StatusOr<std::unique_ptr<GlooBackend>> GlooBackend::Create(
    GlooOptions options) {
  // Gloo's TCP transport writes with writev(), which raises SIGPIPE when the
  // peer has died; a dead peer must be an error we recover from, not our own
  // death. (Process-wide, as every networking library must do.)
  ::signal(SIGPIPE, SIG_IGN);
  try {
    gloo::transport::tcp::attr attr;
    attr.hostname = options.hostname;
    auto device = gloo::transport::tcp::CreateDevice(attr);
    auto poker = std::make_unique<LoopPoker>(
        std::static_pointer_cast<gloo::transport::tcp::Device>(device));
    return std::unique_ptr<GlooBackend>(new GlooBackend(
        std::move(options), std::move(device), std::move(poker)));
  } catch (const std::exception& e) {
    return absl::UnavailableError(
        absl::StrCat("gloo: cannot create TCP device: ", e.what()));
  }
}

void GlooBackend::Install(std::shared_ptr<gloo::Context> context,
                          int64_t generation, bool urgent_drop) {
  {
    absl::MutexLock lock(&active_mu_);
    active_ = context ? static_cast<MeshContext&>(*context).revocable()
                      : nullptr;
    active_generation_ = context ? generation : 0;
  }
  reaper_->Add(std::move(context_), urgent_drop);
  context_ = std::move(context);
  tag_ = 0;
}

bool GlooBackend::healthy() const {
  return context_ != nullptr && !TransportOf(context_).revoked();
}

void GlooBackend::Revoke(int64_t failure_generation) {
  std::shared_ptr<RevocableContext> target;
  {
    absl::MutexLock lock(&active_mu_);
    if (active_ == nullptr || active_generation_ >= failure_generation) return;
    target = active_;
  }
  target->Revoke(absl::StrCat("gloo: revoked: generation ", failure_generation,
                              " was published after a peer failed"));
}

absl::Status GlooBackend::Usable() {
  if (!context_) return absl::FailedPreconditionError("gloo: no communicator");
  if (TransportOf(context_).revoked()) {
    Install(nullptr, 0, /*urgent_drop=*/true);
    return absl::UnavailableError(kRevokedMessage);
  }
  return absl::OkStatus();
}

absl::Status GlooBackend::Fail(const std::exception& e, const char* what) {
  // The message before the drop: `e` may be the exception a pair of the
  // communicator stored (Gloo rethrows that one, not a copy), whose last
  // reference the reaper's thread drops once it has the communicator. The
  // catch keeps it alive until then, but by a reference count inside
  // libstdc++ that ThreadSanitizer cannot see; read first, the message is
  // ordered before the destruction by the hand-off to the reaper.
  absl::Status failed = absl::UnavailableError(absl::StrCat("gloo ", what, ": ", e.what()));
  Install(nullptr, 0, /*urgent_drop=*/true);
  return failed;
}

absl::Status GlooBackend::Reform(const ReformPlan& plan,
                                 gloo::rendezvous::Store& store) {
  Install(nullptr, 0, /*urgent_drop=*/false);
  DropPrepared();
  if (plan.rank < 0 || plan.rank >= plan.world_size) {
    return absl::InvalidArgumentError(absl::StrCat(
        "gloo: rank ", plan.rank, " not in a world of ", plan.world_size));
  }
  try {
    Install(Connect(plan, store), plan.generation, /*urgent_drop=*/false);
    return absl::OkStatus();
  } catch (const std::exception& e) {
    return Fail(e, "rendezvous");
  }
}

absl::Status GlooBackend::Prepare(const ReformPlan& plan,
                                  gloo::rendezvous::Store& store) {
  DropPrepared();
  if (plan.rank < 0 || plan.rank >= plan.world_size) {
    return absl::InvalidArgumentError(absl::StrCat(
        "gloo: rank ", plan.rank, " not in a world of ", plan.world_size));
  }
  try {
    // context_ belongs to the training thread: left alone here.
    auto ctx = Connect(plan, store);
    absl::MutexLock lock(&prepared_mu_);
    prepared_ = std::move(ctx);
    prepared_generation_ = plan.generation;
    return absl::OkStatus();
  } catch (const std::exception& e) {
    return absl::UnavailableError(
        absl::StrCat("gloo prepared rendezvous: ", e.what()));
  }
}

bool GlooBackend::AdoptPrepared(int64_t generation) {
  std::shared_ptr<gloo::Context> prepared;
  int64_t prepared_generation = 0;
  {
    absl::MutexLock lock(&prepared_mu_);
    prepared = std::move(prepared_);
    prepared_generation = prepared_generation_;
    prepared_generation_ = 0;
  }
  if (prepared == nullptr) return false;
  if (prepared_generation != generation) {
    reaper_->Add(std::move(prepared), /*urgent=*/true);
    return false;
  }
  Install(std::move(prepared), generation, /*urgent_drop=*/false);
  return true;
}

void GlooBackend::DropPrepared() {
  std::shared_ptr<gloo::Context> prepared;
  {
    absl::MutexLock lock(&prepared_mu_);
    prepared = std::move(prepared_);
    prepared_generation_ = 0;
  }
  // Peers may already use their side of it: urgent, so they learn at once.
  reaper_->Add(std::move(prepared), /*urgent=*/true);
}

void GlooBackend::Abort() {
  Install(nullptr, 0, /*urgent_drop=*/true);
  DropPrepared();
}

std::shared_ptr<gloo::Context> GlooBackend::Connect(
    const ReformPlan& plan, gloo::rendezvous::Store& store) {
  auto ctx = std::make_shared<MeshContext>(plan.rank, plan.world_size);
  ctx->setTimeout(std::chrono::milliseconds(
      absl::ToInt64Milliseconds(options_.timeout)));
  {
    absl::MutexLock lock(&forming_mu_);
    forming_generation_ = plan.generation;
    forming_ = nullptr;
    interrupted_ = newest_interrupt_ > plan.generation;
  }
  absl::Cleanup done = [this] {
    absl::MutexLock lock(&forming_mu_);
    forming_generation_ = 0;
  };
  ConnectFullMesh(*ctx, plan, store);
  return ctx;
}

bool GlooBackend::SetForming(gloo::transport::Context* forming) {
  absl::MutexLock lock(&forming_mu_);
  forming_ = forming;
  forming_awaited_ = -1;
  return !interrupted_;
}

bool GlooBackend::SetAwaited(int peer) {
  absl::MutexLock lock(&forming_mu_);
  forming_awaited_ = peer;
  return !interrupted_;
}

void GlooBackend::Interrupt(int64_t newer_generation) {
  absl::MutexLock lock(&forming_mu_);
  newest_interrupt_ = std::max(newest_interrupt_, newer_generation);
  if (forming_generation_ == 0 || forming_generation_ >= newer_generation) {
    return;
  }
  interrupted_ = true;
  if (forming_ == nullptr || forming_awaited_ < 0) return;
  // The listening pair whose peer may never dial would wait out the connect
  // timeout; closing it ends that wait (connect() returns normally: the
  // caller checks interrupted_ afterwards). Only that one: closing a pair
  // that dialled or was dialled resets a connection the peer's device loop
  // may not have taken yet, and Gloo's loop then aborts the process
  // (getpeername on a reset socket fails a GLOO_ENFORCE in
  // Pair::handleConnected, which nothing catches on the loop's thread).
  forming_->getPair(forming_awaited_)->close();
}

void GlooBackend::ConnectFullMesh(gloo::Context& ctx_base,
                                  const ReformPlan& plan,
                                  gloo::rendezvous::Store& store) {
  auto& ctx = static_cast<MeshContext&>(ctx_base);
  const int rank = plan.rank;
  const int size = plan.world_size;
  std::shared_ptr<gloo::transport::Context> inner =
      device_->createContext(rank, size);
  inner->setTimeout(ctx.getTimeout());  // the pairs take it from here
  auto transport = std::make_shared<RevocableContext>(std::move(inner));
  transport->setTimeout(ctx.getTimeout());
  // 1. A pair per peer; the key holds their addresses in peer order.
  std::vector<char> mine;
  std::vector<std::vector<char>> self_addr(size);
  for (int i = 0; i < size; ++i) {
    if (i == rank) continue;
    self_addr[i] = transport->createPair(i)->address().bytes();
    mine.insert(mine.end(), self_addr[i].begin(), self_addr[i].end());
  }
  // Declared after `transport`, so it withdraws it before it is destroyed.
  absl::Cleanup withdraw = [this] { SetForming(nullptr); };
  if (!SetForming(transport.get())) {
    throw gloo::IoException("interrupted by a newer generation");
  }
  std::vector<std::string> keys;
  for (int i = 0; i < size; ++i) {
    if (i != rank) keys.push_back(std::to_string(i));
  }
  if (size > 1) {
    store.set(std::to_string(rank), mine);
    // 2. All peers' addresses in one wait.
    store.wait(keys, ctx.getTimeout());
  }
  std::vector<std::vector<char>> peer_addr(size);
  for (int i = 0; i < size; ++i) {
    if (i == rank) continue;
    std::vector<char> all = store.get(std::to_string(i));
    // Peer i lists the addresses of its pairs for ranks 0..size-1 but i;
    // this rank's is at position rank (or rank - 1 past i).
    const size_t n = all.size() / static_cast<size_t>(size - 1);
    const size_t at = static_cast<size_t>(rank > i ? rank - 1 : rank) * n;
    if (n == 0 || all.size() % static_cast<size_t>(size - 1) != 0) {
      throw gloo::IoException(absl::StrCat("bad address list from rank ", i));
    }
    peer_addr[i].assign(all.begin() + static_cast<ptrdiff_t>(at),
                        all.begin() + static_cast<ptrdiff_t>(at + n));
  }
  // 3. Dial first, then accept: no rank waits for a peer that is itself
  // still waiting for another. Each dial closes the pair's listening socket,
  // which waits for the device loop's next tick (up to 10 ms when the loop
  // is idle); poking the loop every millisecond meanwhile cut the 16-rank
  // rendezvous from about 80 to 65-70 ms. (Dialling from a thread a pair
  // measured no faster on 2 cores.) An interrupted rendezvous stops before
  // its next pair; of the pairs in progress, Interrupt() closes only the
  // one accepting a dial (a dial ends by itself: the peer's pair accepts
  // it, or is gone and refuses it).
  std::atomic<bool> dialled{false};
  std::thread poker([&] {
    while (!dialled.load()) {
      poker_->Poke();
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
  });
  absl::Cleanup stop_poking = [&] {
    dialled = true;
    if (poker.joinable()) poker.join();
  };
  for (const bool dial : {true, false}) {
    for (int i = 0; i < size; ++i) {
      if (i == rank || Dials(self_addr[i], peer_addr[i]) != dial) continue;
      if (!SetAwaited(dial ? -1 : i)) {
        throw gloo::IoException("interrupted by a newer generation");
      }
      transport->getPair(i)->connect(peer_addr[i]);
    }
    if (dial) std::move(stop_poking).Invoke();
  }
  if (!SetForming(nullptr)) {
    throw gloo::IoException("interrupted by a newer generation");
  }
  ctx.Adopt(device_, std::move(transport));
}

template <typename Body>
absl::Status GlooBackend::Collective(const char* what, Body&& body) {
  RM_RETURN_IF_ERROR(Usable());
  try {
    body();
    return absl::OkStatus();
  } catch (const std::exception& e) {
    return Fail(e, what);
  }
}

absl::Status GlooBackend::AllReduce(void* data, size_t count, DataType type,
                                    ReduceOp op) {
  return Collective("allreduce", [&] {
    if (count == 0) return;
    switch (type) {
      case DataType::kFloat32:
        RunAllReduce<float>(context_, data, count, op, ++tag_);
        break;
      case DataType::kFloat64:
        RunAllReduce<double>(context_, data, count, op, ++tag_);
        break;
      case DataType::kInt64:
        RunAllReduce<int64_t>(context_, data, count, op, ++tag_);
        break;
    }
  });
}

absl::Status GlooBackend::Broadcast(void* data, size_t bytes, int root) {
  if (context_ && (root < 0 || root >= context_->size)) {
    return absl::InvalidArgumentError(absl::StrCat("gloo: bad root ", root));
  }
  return Collective("broadcast", [&] {
    if (bytes == 0) return;
    gloo::BroadcastOptions opts(context_);
    opts.setOutput(static_cast<char*>(data), bytes);
    opts.setRoot(root);
    opts.setTag(++tag_);
    gloo::broadcast(opts);
  });
}

absl::Status GlooBackend::Barrier() {
  return Collective("barrier", [&] {
    gloo::BarrierOptions opts(context_);
    opts.setTag(++tag_);
    gloo::barrier(opts);
  });
}

}  // namespace ringmaster::shim
