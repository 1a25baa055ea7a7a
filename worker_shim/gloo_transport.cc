// Gloo transport wrapper, loop poker and reaper; see gloo_transport.h.
#include "worker_shim/gloo_transport.h"

#include <gloo/common/error.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/str_cat.h"

namespace ringmaster::shim {

RevocableContext& TransportOf(const std::shared_ptr<gloo::Context>& ctx) {
  return *static_cast<MeshContext&>(*ctx).revocable();
}

void ClosePairsAtOnce(gloo::transport::Context& t) {
  std::vector<std::thread> closers;
  for (int i = 0; i < t.size; ++i) {
    if (i == t.rank) continue;
    gloo::transport::Pair* pair = t.getPair(i).get();
    if (pair != nullptr) closers.emplace_back([pair] { pair->close(); });
  }
  for (auto& c : closers) c.join();
}

LoopPoker::LoopPoker(std::shared_ptr<gloo::transport::tcp::Device> device)
    : device_(std::move(device)) {
  const int fd = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (fd < 0) {
    throw gloo::IoException(absl::StrCat("eventfd: ", strerror(errno)));
  }
  {
    absl::MutexLock lock(&mu_);
    fd_ = fd;
  }
  device_->registerDescriptor(fd, EPOLLIN, this);
}

LoopPoker::~LoopPoker() {
  int fd = -1;
  {
    absl::MutexLock lock(&mu_);
    fd = fd_;
  }
  device_->unregisterDescriptor(fd, this);
  absl::MutexLock lock(&mu_);
  ::close(fd_);
  fd_ = -1;
}

void LoopPoker::Poke() {
  absl::MutexLock lock(&mu_);
  if (fd_ < 0) return;
  const uint64_t one = 1;
  (void)!::write(fd_, &one, sizeof(one));
}

void LoopPoker::handleEvents(int events) {
  (void)events;
  absl::MutexLock lock(&mu_);
  if (fd_ < 0) return;
  uint64_t count = 0;
  (void)!::read(fd_, &count, sizeof(count));
}

class RevocableContext::Buffer final : public gloo::transport::UnboundBuffer {
 public:
  Buffer(RevocableContext* owner,
         std::unique_ptr<gloo::transport::UnboundBuffer> inner)
      : UnboundBuffer(inner->ptr, inner->size),
        owner_(owner),
        inner_(std::move(inner)) {}

  bool waitRecv(int* rank, std::chrono::milliseconds timeout) override {
    return Tracked([&] { return inner_->waitRecv(rank, timeout); });
  }
  bool waitSend(int* rank, std::chrono::milliseconds timeout) override {
    return Tracked([&] { return inner_->waitSend(rank, timeout); });
  }
  void abortWaitRecv() override { inner_->abortWaitRecv(); }
  void abortWaitSend() override { inner_->abortWaitSend(); }
  void send(int dst, uint64_t slot, size_t offset, size_t nbytes) override {
    inner_->send(dst, slot, offset, nbytes);
  }
  void recv(int src, uint64_t slot, size_t offset, size_t nbytes) override {
    inner_->recv(src, slot, offset, nbytes);
  }
  void recv(std::vector<int> srcs, uint64_t slot, size_t offset,
            size_t nbytes) override {
    inner_->recv(std::move(srcs), slot, offset, nbytes);
  }
  // Ends the current wait (it throws, see Tracked()).
  void Abort() {
    inner_->abortWaitRecv();
    inner_->abortWaitSend();
  }

 private:
  // A wait registers with the owner for its duration (creating a buffer
  // costs nothing more than the wrapper: a one-rank all-reduce, which never
  // waits, stays as fast as raw Gloo's); one that Revoke() aborted, or that
  // begins after it, throws the revocation.
  template <typename Wait>
  bool Tracked(Wait wait) {
    owner_->BeginWait(this);
    absl::Cleanup end = [this] { owner_->EndWait(this); };
    if (wait()) return true;
    owner_->ThrowIfRevoked();
    return false;
  }

  RevocableContext* owner_;  // outlives the buffer: gloo::Context holds both
  std::unique_ptr<gloo::transport::UnboundBuffer> inner_;
};

RevocableContext::RevocableContext(
    std::shared_ptr<gloo::transport::Context> inner)
    : gloo::transport::Context(inner->rank, inner->size),
      inner_(std::move(inner)) {}

RevocableContext::~RevocableContext() = default;

std::unique_ptr<gloo::transport::Pair>& RevocableContext::getPair(int rank) {
  return inner_->getPair(rank);
}

std::unique_ptr<gloo::transport::Pair>& RevocableContext::createPair(
    int rank) {
  return inner_->createPair(rank);
}

std::unique_ptr<gloo::transport::UnboundBuffer>
RevocableContext::createUnboundBuffer(void* ptr, size_t size) {
  return std::make_unique<Buffer>(this, inner_->createUnboundBuffer(ptr, size));
}

void RevocableContext::BeginWait(Buffer* buffer) {
  absl::MutexLock lock(&mu_);
  if (revoked_.load(std::memory_order_relaxed)) {
    throw gloo::IoException(why_);
  }
  waiting_.push_back(buffer);
}

void RevocableContext::EndWait(Buffer* buffer) {
  absl::MutexLock lock(&mu_);
  waiting_.erase(std::remove(waiting_.begin(), waiting_.end(), buffer),
                 waiting_.end());
}

void RevocableContext::ThrowIfRevoked() const {
  std::string why;
  {
    absl::MutexLock lock(&mu_);
    if (!revoked_.load(std::memory_order_relaxed)) return;
    why = why_;
  }
  throw gloo::IoException(why);
}

void RevocableContext::Revoke(const std::string& why) {
  {
    absl::MutexLock lock(&mu_);
    if (revoked_.load(std::memory_order_relaxed)) return;
    why_ = why;
    revoked_.store(true, std::memory_order_release);
  }
  ClosePairsAtOnce(*inner_);
  absl::MutexLock lock(&mu_);
  for (Buffer* b : waiting_) b->Abort();
}

ContextReaper::ContextReaper() : thread_([this] { Run(); }) {}

ContextReaper::~ContextReaper() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
  }
  thread_.join();
}

void ContextReaper::Add(std::shared_ptr<gloo::Context> context,
                        bool urgent) {
  if (context == nullptr) return;
  absl::MutexLock lock(&mu_);
  doomed_.push_back({std::move(context), urgent});
}

void ContextReaper::Run() {
  while (true) {
    std::vector<Doomed> batch;
    {
      absl::MutexLock lock(&mu_);
      auto ready = [this]() ABSL_SHARED_LOCKS_REQUIRED(mu_) {
        return stopping_ || !doomed_.empty();
      };
      mu_.Await(absl::Condition(&ready));
      if (doomed_.empty()) return;  // stopping, nothing left
      batch.swap(doomed_);
    }
    for (const auto& [ctx, urgent] : batch) {
      if (urgent) ClosePairsAtOnce(TransportOf(ctx));
    }
    batch.clear();
  }
}

}  // namespace ringmaster::shim
