// Checks that the TSan build sees absl synchronization (absl_sync_annotations.cc)
// and still sees a race: `tsan_selftest MODE` has two threads share a counter
// and a payload, handed over by MODE:
//   mutex         absl::MutexLock around each access
//   reader        writers under MutexLock, a reader under ReaderMutexLock
//   await         the reader waits with Mutex::Await, then reads under the lock
//   condvar       the reader waits with CondVar::Wait
//   notification  the writer fills the payload, then Notify; the reader
//                 WaitForNotification and reads it without a lock
//   polled        as notification, the reader polls HasBeenNotified
//   await_timeout, condvar_timeout, lockwhen_timeout, notification_timeout
//                 as await, condvar, the reader's LockWhen and notification,
//                 through the ...WithTimeout forms, which Debian's abseil
//                 implements by calling the ...WithDeadline ones (a nested
//                 call the annotations must count once)
//   status        an absl::Status shared by two threads: one reads its
//                 message and drops it, then the other (no synchronization
//                 but the reference count) reads it and drops the last
//                 reference, which deletes it
//   none          no synchronization at all: TSan must report a data race
// After a handover both threads count under the mutex once more, so that a
// mutex left locked or unlocked twice by a wait is reported too. Every mode
// but `none` must exit 0 with no report (TSAN_OPTIONS halt_on_error=1 makes a
// report exit 66).
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <optional>
#include <string>
#include <thread>

#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"

namespace {

constexpr int kRounds = 20000;

struct Shared {
  absl::Mutex mu;
  absl::CondVar cv;
  absl::Notification done;
  int counter = 0;
  bool ready = false;
  std::string payload;
};

constexpr absl::Duration kLong = absl::Seconds(60);

// The `status` mode: a message long enough to live in the heap rep.
int ShareStatus() {
  std::optional<absl::Status> mine = absl::InternalError(std::string(100, 'x'));
  std::atomic<bool> dropped{false};  // relaxed: orders, but TSan sees no sync
  std::optional<absl::Status> theirs = *mine;
  std::thread other([&] {
    while (!dropped.load(std::memory_order_relaxed)) std::this_thread::yield();
    const std::string read(theirs->message());
    theirs.reset();  // the last reference: deletes the rep
    if (read.size() != 100) std::abort();
  });
  const std::string read(mine->message());
  mine.reset();
  dropped.store(true, std::memory_order_relaxed);
  other.join();
  std::printf("message of %zu bytes\n", read.size());
  return read.size() == 100 ? 0 : 1;
}

int Run(const std::string& mode) {
  if (mode == "status") return ShareStatus();
  Shared s;
  if (mode == "mutex" || mode == "none" || mode == "reader") {
    auto add = [&] {
      for (int i = 0; i < kRounds; ++i) {
        if (mode == "none") {
          ++s.counter;
        } else {
          absl::MutexLock lock(&s.mu);
          ++s.counter;
        }
      }
    };
    int seen = 0;
    std::thread a(add), b(add);
    if (mode == "reader") {
      for (int i = 0; i < kRounds; ++i) {
        absl::ReaderMutexLock lock(&s.mu);
        seen = s.counter;
      }
    }
    a.join();
    b.join();
    std::printf("counter %d (last read %d)\n", s.counter, seen);
    return mode == "none" || s.counter == 2 * kRounds ? 0 : 1;
  }
  const bool notified = mode == "notification" || mode == "polled" || mode == "notification_timeout";
  auto count = [&] {
    for (int i = 0; i < kRounds; ++i) {
      absl::MutexLock lock(&s.mu);
      ++s.counter;
    }
  };
  // The reader is waiting before the handover, so that each wait does wait:
  // it holds the mutex while the writer starts (the writer's lock waits for
  // the wait to release it); a Notification's or LockWhen's writer gives it
  // 50 ms to begin.
  const bool reader_first = !notified && mode != "lockwhen_timeout";
  if (reader_first) s.mu.Lock();
  std::thread writer([&] {
    if (!reader_first) std::this_thread::sleep_for(std::chrono::milliseconds(50));
    if (notified) {
      s.payload = "filled";
      s.done.Notify();
    } else {
      absl::MutexLock lock(&s.mu);
      s.payload = "filled";
      s.ready = true;
      if (mode == "condvar" || mode == "condvar_timeout") s.cv.Signal();
    }
    count();
  });
  std::string got;
  if (mode == "notification") {
    s.done.WaitForNotification();
    got = s.payload;
  } else if (mode == "notification_timeout") {
    // On a thread of its own: an inner lock the wait left held is then
    // reported when this thread's ~Notification takes it.
    std::thread waiter([&] {
      if (s.done.WaitForNotificationWithTimeout(kLong)) got = s.payload;
    });
    waiter.join();
  } else if (mode == "polled") {
    while (!s.done.HasBeenNotified()) std::this_thread::yield();
    got = s.payload;
  } else if (mode == "await" || mode == "await_timeout") {
    if (mode == "await") {
      s.mu.Await(absl::Condition(&s.ready));
    } else {
      s.mu.AwaitWithTimeout(absl::Condition(&s.ready), kLong);
    }
    got = s.payload;
    s.mu.Unlock();
  } else if (mode == "condvar" || mode == "condvar_timeout") {
    while (!s.ready) {
      if (mode == "condvar") {
        s.cv.Wait(&s.mu);
      } else {
        s.cv.WaitWithTimeout(&s.mu, kLong);
      }
    }
    got = s.payload;
    s.mu.Unlock();
  } else if (mode == "lockwhen_timeout") {
    s.mu.LockWhenWithTimeout(absl::Condition(&s.ready), kLong);
    got = s.payload;
    s.mu.Unlock();
  } else {
    if (reader_first) s.mu.Unlock();
    writer.join();
    std::fprintf(stderr, "unknown mode %s\n", mode.c_str());
    return 2;
  }
  count();
  writer.join();
  std::printf("payload %s, counter %d\n", got.c_str(), s.counter);
  return got == "filled" && s.counter == 2 * kRounds ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: tsan_selftest MODE (see the top of tsan_selftest.cc)\n");
    return 2;
  }
  return Run(argv[1]);
}
