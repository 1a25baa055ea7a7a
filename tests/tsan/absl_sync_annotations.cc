// ThreadSanitizer builds only (RINGMASTER_TSAN, docs/TESTING.md): tells TSan
// when an absl::Mutex is locked and unlocked.
//
// Debian's abseil is not built with -fsanitize=thread, so its Mutex (an atomic
// word and futexes inside libabsl_synchronization.so) is invisible to TSan:
// every access guarded by an absl::Mutex, in ringmaster and in gRPC (whose
// gpr_mu / grpc_core::Mutex are absl::Mutex), would be reported as a race.
// This shared library, linked first into every target of the TSan build,
// defines the Mutex, CondVar and Notification members that live in the .so;
// each calls the real one (dlsym RTLD_NEXT) inside the annotations an
// instrumented abseil makes itself (ABSL_TSAN_MUTEX_* in absl's mutex.cc):
// __tsan_mutex_pre/post_lock and _unlock, whose ignore region also covers the
// Conditions absl evaluates inside the call. The inline parts of absl (the
// Mutex constructor's __tsan_mutex_create, MutexLock, HasBeenNotified's
// acquire load) are compiled into our instrumented code and need nothing.
//
// Only the outermost of these calls on a thread is annotated. Debian's abseil
// calls its own exported functions through the PLT, so they come back here:
// every ...WithTimeout calls its ...WithDeadline, and Notification's members
// lock and unlock its inner Mutex. Annotated twice, a CondVar wait unlocked
// the mutex twice ("unlock of an unlocked mutex" in gRPC's timer thread) and
// a Notification waited on with a timeout stayed locked once ("double lock"
// at its destructor).
//
// Also absl::Status: its heap rep's reference count is dropped in
// libabsl_status.so (Status::UnrefNonInlined, an acq_rel fetch_sub TSan
// cannot see), so the thread that deletes a shared rep, as the journal's
// writer does with the status of a write it reported, raced every earlier
// reader of its message. Each drop is annotated as the release and acquire an
// instrumented abseil's fetch_sub would be. (tests/tsan.supp's
// called_from_lib for libabsl_status does not cover it: UnrefNonInlined ends
// in a tail jump to operator delete, whose caller is then our code.)
//
// tests/tsan/tsan_selftest.cc checks both ways that this works: a counter
// guarded by an absl::Mutex is clean, the same counter unguarded is a race;
// its modes cover the nested calls and a Status shared between threads.
#include <dlfcn.h>
#include <sanitizer/tsan_interface.h>

#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"

namespace {

#define RM_TSAN_STR2(x) #x
#define RM_TSAN_STR(x) RM_TSAN_STR2(x)

// The real function `absl::<ns>::<rest>`; `rest` is the Itanium mangling after
// the inline namespace, e.g. "5Mutex4LockEv". Aborts when it is not there (a
// new abseil): the TSan build would otherwise report every guarded access.
void* Real(const char* rest, bool is_const = false) {
  const std::string ns = RM_TSAN_STR(ABSL_OPTION_INLINE_NAMESPACE_NAME);
  const std::string name = std::string(is_const ? "_ZNK" : "_ZN") + "4absl" +
                           std::to_string(ns.size()) + ns + rest;
  void* fn = dlsym(RTLD_NEXT, name.c_str());
  if (fn == nullptr) {
    std::fprintf(stderr, "absl_sync_annotations: %s not found: %s\n", name.c_str(), dlerror());
    std::abort();
  }
  return fn;
}

template <typename Fn>
Fn RealFn(const char* rest, bool is_const = false) {
  return reinterpret_cast<Fn>(Real(rest, is_const));
}

// Counts this thread's calls in progress into the functions below: only the
// outermost is annotated (see the top).
thread_local int tls_depth = 0;

class Outermost {
 public:
  Outermost() : outermost_(tls_depth++ == 0) {}
  ~Outermost() { --tls_depth; }
  Outermost(const Outermost&) = delete;
  Outermost& operator=(const Outermost&) = delete;
  explicit operator bool() const { return outermost_; }

 private:
  const bool outermost_;
};

// A held absl::Mutex's word (its one member): kMuWriter (0x8) when a writer
// holds it, else readers do. Await and CondVar::Wait accept either mode.
unsigned HeldMode(const absl::Mutex* mu) {
  const auto* word = reinterpret_cast<const std::atomic<intptr_t>*>(mu);
  return (word->load(std::memory_order_relaxed) & 0x8) != 0 ? 0 : __tsan_mutex_read_lock;
}

// Around a call that releases a held mutex and takes it again before it
// returns (Await, CondVar::Wait).
template <typename F>
auto ReleasedDuring(absl::Mutex* mu, F call) {
  const Outermost outermost;
  if (!outermost) return call();
  const unsigned mode = HeldMode(mu);
  __tsan_mutex_pre_unlock(mu, mode);
  __tsan_mutex_post_unlock(mu, mode);
  __tsan_mutex_pre_lock(mu, mode);
  auto result = call();
  __tsan_mutex_post_lock(mu, mode, 0);
  return result;
}

// Around a call that returns holding the mutex (Lock, LockWhen...).
template <typename F>
auto Acquire(absl::Mutex* mu, unsigned mode, F call) {
  const Outermost outermost;
  if (!outermost) return call();
  __tsan_mutex_pre_lock(mu, mode);
  auto result = call();
  __tsan_mutex_post_lock(mu, mode, 0);
  return result;
}

// Around a call that returns holding the mutex only when it returns true.
template <typename F>
bool TryAcquire(absl::Mutex* mu, unsigned mode, F call) {
  const Outermost outermost;
  if (!outermost) return call();
  __tsan_mutex_pre_lock(mu, mode | __tsan_mutex_try_lock);
  const bool locked = call();
  __tsan_mutex_post_lock(mu, mode | __tsan_mutex_try_lock | (locked ? 0 : __tsan_mutex_try_lock_failed), 0);
  return locked;
}

void Release(absl::Mutex* mu, unsigned mode, void (*real)(absl::Mutex*)) {
  const Outermost outermost;
  if (!outermost) return real(mu);
  __tsan_mutex_pre_unlock(mu, mode);
  real(mu);
  __tsan_mutex_post_unlock(mu, mode);
}

// Notify's store to notified_yet_ is uninstrumented, but HasBeenNotified's
// acquire load of it is inline in our code: release on that address.
const void* NotifiedWord(const absl::Notification* n) {
  static_assert(sizeof(absl::Notification) == 2 * sizeof(absl::Mutex),
                "Notification is no longer { Mutex mutex_; atomic<bool> notified_yet_; }");
  return reinterpret_cast<const char*>(n) + sizeof(absl::Mutex);
}

}  // namespace

namespace absl {
ABSL_NAMESPACE_BEGIN

using Cond = const Condition&;

// As an instrumented abseil's destructor does (ABSL_TSAN_MUTEX_DESTROY): TSan
// then reports a Mutex destroyed while held, and forgets it, so that a later
// Mutex at the same address starts with no history.
Mutex::~Mutex() {
  static auto real = RealFn<void (*)(Mutex*)>("5MutexD2Ev");
  real(this);
  __tsan_mutex_destroy(this, __tsan_mutex_not_static);
}

void Mutex::Lock() {
  static auto real = RealFn<void (*)(Mutex*)>("5Mutex4LockEv");
  Acquire(this, 0, [&] { real(this); return 0; });
}
void Mutex::ReaderLock() {
  static auto real = RealFn<void (*)(Mutex*)>("5Mutex10ReaderLockEv");
  Acquire(this, __tsan_mutex_read_lock, [&] { real(this); return 0; });
}
bool Mutex::TryLock() {
  static auto real = RealFn<bool (*)(Mutex*)>("5Mutex7TryLockEv");
  return TryAcquire(this, 0, [&] { return real(this); });
}
bool Mutex::ReaderTryLock() {
  static auto real = RealFn<bool (*)(Mutex*)>("5Mutex13ReaderTryLockEv");
  return TryAcquire(this, __tsan_mutex_read_lock, [&] { return real(this); });
}
void Mutex::Unlock() {
  static auto real = RealFn<void (*)(Mutex*)>("5Mutex6UnlockEv");
  Release(this, 0, real);
}
void Mutex::ReaderUnlock() {
  static auto real = RealFn<void (*)(Mutex*)>("5Mutex12ReaderUnlockEv");
  Release(this, __tsan_mutex_read_lock, real);
}

void Mutex::LockWhen(Cond cond) {
  static auto real = RealFn<void (*)(Mutex*, Cond)>("5Mutex8LockWhenERKNS0_9ConditionE");
  Acquire(this, 0, [&] { real(this, cond); return 0; });
}
void Mutex::ReaderLockWhen(Cond cond) {
  static auto real = RealFn<void (*)(Mutex*, Cond)>("5Mutex14ReaderLockWhenERKNS0_9ConditionE");
  Acquire(this, __tsan_mutex_read_lock, [&] { real(this, cond); return 0; });
}
// The ...WithTimeout / ...WithDeadline forms return holding the mutex either
// way; their result is the condition's.
bool Mutex::LockWhenWithTimeout(Cond cond, Duration timeout) {
  static auto real = RealFn<bool (*)(Mutex*, Cond, Duration)>(
      "5Mutex19LockWhenWithTimeoutERKNS0_9ConditionENS0_8DurationE");
  return Acquire(this, 0, [&] { return real(this, cond, timeout); });
}
bool Mutex::LockWhenWithDeadline(Cond cond, Time deadline) {
  static auto real = RealFn<bool (*)(Mutex*, Cond, Time)>(
      "5Mutex20LockWhenWithDeadlineERKNS0_9ConditionENS0_4TimeE");
  return Acquire(this, 0, [&] { return real(this, cond, deadline); });
}
bool Mutex::ReaderLockWhenWithTimeout(Cond cond, Duration timeout) {
  static auto real = RealFn<bool (*)(Mutex*, Cond, Duration)>(
      "5Mutex25ReaderLockWhenWithTimeoutERKNS0_9ConditionENS0_8DurationE");
  return Acquire(this, __tsan_mutex_read_lock, [&] { return real(this, cond, timeout); });
}
bool Mutex::ReaderLockWhenWithDeadline(Cond cond, Time deadline) {
  static auto real = RealFn<bool (*)(Mutex*, Cond, Time)>(
      "5Mutex26ReaderLockWhenWithDeadlineERKNS0_9ConditionENS0_4TimeE");
  return Acquire(this, __tsan_mutex_read_lock, [&] { return real(this, cond, deadline); });
}

void Mutex::Await(Cond cond) {
  static auto real = RealFn<void (*)(Mutex*, Cond)>("5Mutex5AwaitERKNS0_9ConditionE");
  ReleasedDuring(this, [&] { real(this, cond); return 0; });
}
bool Mutex::AwaitWithTimeout(Cond cond, Duration timeout) {
  static auto real = RealFn<bool (*)(Mutex*, Cond, Duration)>(
      "5Mutex16AwaitWithTimeoutERKNS0_9ConditionENS0_8DurationE");
  return ReleasedDuring(this, [&] { return real(this, cond, timeout); });
}
bool Mutex::AwaitWithDeadline(Cond cond, Time deadline) {
  static auto real = RealFn<bool (*)(Mutex*, Cond, Time)>(
      "5Mutex17AwaitWithDeadlineERKNS0_9ConditionENS0_4TimeE");
  return ReleasedDuring(this, [&] { return real(this, cond, deadline); });
}

void CondVar::Wait(Mutex* mu) {
  static auto real = RealFn<void (*)(CondVar*, Mutex*)>("7CondVar4WaitEPNS0_5MutexE");
  ReleasedDuring(mu, [&] { real(this, mu); return 0; });
}
bool CondVar::WaitWithTimeout(Mutex* mu, Duration timeout) {
  static auto real = RealFn<bool (*)(CondVar*, Mutex*, Duration)>(
      "7CondVar15WaitWithTimeoutEPNS0_5MutexENS0_8DurationE");
  return ReleasedDuring(mu, [&] { return real(this, mu, timeout); });
}
bool CondVar::WaitWithDeadline(Mutex* mu, Time deadline) {
  static auto real = RealFn<bool (*)(CondVar*, Mutex*, Time)>(
      "7CondVar16WaitWithDeadlineEPNS0_5MutexENS0_4TimeE");
  return ReleasedDuring(mu, [&] { return real(this, mu, deadline); });
}

void Notification::Notify() {
  static auto real = RealFn<void (*)(Notification*)>("12Notification6NotifyEv");
  const Outermost outermost;
  if (outermost) __tsan_release(const_cast<void*>(NotifiedWord(this)));
  real(this);
}
void Notification::WaitForNotification() const {
  static auto real = RealFn<void (*)(const Notification*)>("12Notification19WaitForNotificationEv", true);
  const Outermost outermost;
  real(this);
  if (outermost) __tsan_acquire(const_cast<void*>(NotifiedWord(this)));
}
bool Notification::WaitForNotificationWithTimeout(Duration timeout) const {
  static auto real = RealFn<bool (*)(const Notification*, Duration)>(
      "12Notification30WaitForNotificationWithTimeoutENS0_8DurationE", true);
  const Outermost outermost;
  const bool notified = real(this, timeout);
  if (notified && outermost) __tsan_acquire(const_cast<void*>(NotifiedWord(this)));
  return notified;
}
bool Notification::WaitForNotificationWithDeadline(Time deadline) const {
  static auto real = RealFn<bool (*)(const Notification*, Time)>(
      "12Notification31WaitForNotificationWithDeadlineENS0_4TimeE", true);
  const Outermost outermost;
  const bool notified = real(this, deadline);
  if (notified && outermost) __tsan_acquire(const_cast<void*>(NotifiedWord(this)));
  return notified;
}

// Dropping a reference to a shared rep (the last one deletes it): each drop
// publishes what this thread did with the rep and takes what the earlier
// droppers did, as the uninstrumented fetch_sub(acq_rel) inside does, so that
// the deleting thread comes after every reader of the message.
void Status::UnrefNonInlined(uintptr_t rep) {
  static auto real = RealFn<void (*)(uintptr_t)>("6Status15UnrefNonInlinedEm");
  void* rep_address = RepToPointer(rep);
  __tsan_release(rep_address);
  __tsan_acquire(rep_address);
  real(rep);
}

ABSL_NAMESPACE_END
}  // namespace absl
