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
//   none          no synchronization at all: TSan must report a data race
// Every mode but `none` must exit 0 with no report (TSAN_OPTIONS
// halt_on_error=1 makes a report exit 66).
#include <cstdio>
#include <cstring>
#include <string>
#include <thread>

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

int Run(const std::string& mode) {
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
  std::thread writer([&] {
    if (mode == "notification" || mode == "polled") {
      s.payload = "filled";
      s.done.Notify();
      return;
    }
    absl::MutexLock lock(&s.mu);
    s.payload = "filled";
    s.ready = true;
    if (mode == "condvar") s.cv.Signal();
  });
  std::string got;
  if (mode == "notification") {
    s.done.WaitForNotification();
    got = s.payload;
  } else if (mode == "polled") {
    while (!s.done.HasBeenNotified()) std::this_thread::yield();
    got = s.payload;
  } else if (mode == "await") {
    absl::MutexLock lock(&s.mu);
    s.mu.Await(absl::Condition(&s.ready));
    got = s.payload;
  } else if (mode == "condvar") {
    absl::MutexLock lock(&s.mu);
    while (!s.ready) s.cv.Wait(&s.mu);
    got = s.payload;
  } else {
    writer.join();
    std::fprintf(stderr, "unknown mode %s\n", mode.c_str());
    return 2;
  }
  writer.join();
  std::printf("payload %s\n", got.c_str());
  return got == "filled" ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: tsan_selftest mutex|reader|await|condvar|notification|polled|none\n");
    return 2;
  }
  return Run(argv[1]);
}
