// gloo_probe: raw Gloo, nothing of ours: two forked ranks, a TCP device on
// 127.0.0.1, a FileStore rendezvous, and gloo::allreduce (float sum, in
// place) of COUNT floats, called back to back from the process's main
// thread and, in alternate blocks, handed to one worker thread and waited
// for (as torch's ProcessGroupGloo runs its collectives). Prints rank 0's
// mean wall and process CPU per call for each block. It separates Gloo's
// own latency on a machine from the shim's (docs/BENCHMARKS.md, "Where
// that time goes"):
//   gloo_probe STORE_DIR [COUNT=256] [CALLS=300] [ROUNDS=4] [TIMEOUT_MS=30000]
// STORE_DIR must be an empty directory.
#include <gloo/allreduce.h>
#include <gloo/math.h>
#include <gloo/rendezvous/context.h>
#include <gloo/rendezvous/file_store.h>
#include <gloo/transport/tcp/device.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace {

// Runs one job at a time on its own thread; Run() waits for it.
class Worker {
 public:
  Worker() : thread_([this] { Loop(); }) {}
  ~Worker() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }
  void Run(std::function<void()> job) {
    std::unique_lock<std::mutex> lock(mu_);
    done_ = false;
    job_ = std::move(job);
    cv_.notify_all();
    cv_.wait(lock, [this] { return done_; });
  }

 private:
  void Loop() {
    std::unique_lock<std::mutex> lock(mu_);
    while (true) {
      cv_.wait(lock, [this] { return job_ != nullptr || stop_; });
      if (stop_) return;
      std::function<void()> job = std::move(job_);
      job_ = nullptr;
      lock.unlock();
      job();
      lock.lock();
      done_ = true;
      cv_.notify_all();
    }
  }
  std::mutex mu_;
  std::condition_variable cv_;
  std::function<void()> job_;
  bool done_ = false;
  bool stop_ = false;
  std::thread thread_;
};

long Arg(int argc, char** argv, int i, long fallback) {
  return argc > i ? std::atol(argv[i]) : fallback;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr,
                 "usage: gloo_probe STORE_DIR [COUNT] [CALLS] [ROUNDS] "
                 "[TIMEOUT_MS]\n");
    return 2;
  }
  const std::string dir = argv[1];
  const auto count = static_cast<size_t>(Arg(argc, argv, 2, 256));
  const long calls = Arg(argc, argv, 3, 300);
  const long rounds = Arg(argc, argv, 4, 4);
  const long timeout_ms = Arg(argc, argv, 5, 30000);
  if (count == 0 || calls <= 0 || rounds <= 0 || timeout_ms <= 0) {
    std::fprintf(stderr, "gloo_probe: COUNT, CALLS, ROUNDS, TIMEOUT_MS > 0\n");
    return 2;
  }
  const pid_t child = fork();
  if (child < 0) {
    std::perror("fork");
    return 1;
  }
  const int rank = child == 0 ? 1 : 0;
  try {
    gloo::transport::tcp::attr attr;
    attr.hostname = "127.0.0.1";
    auto device = gloo::transport::tcp::CreateDevice(attr);
    gloo::rendezvous::FileStore store(dir);
    auto ctx = std::make_shared<gloo::rendezvous::Context>(rank, 2);
    ctx->setTimeout(std::chrono::milliseconds(timeout_ms));
    ctx->connectFullMesh(store, device);
    std::vector<float> buf(count, 1.0f);
    uint32_t tag = 0;
    auto once = [&] {
      gloo::AllreduceOptions opts(ctx);
      opts.setOutput(buf.data(), buf.size());
      opts.setReduceFunction(
          static_cast<void (*)(void*, const void*, const void*, size_t)>(
              &gloo::sum<float>));
      opts.setTag(++tag);
      gloo::allreduce(opts);
      for (float& v : buf) v = 1.0f;
    };
    Worker worker;
    for (int i = 0; i < 50; ++i) once();
    for (long r = 0; r < rounds; ++r) {
      for (const bool on_worker : {false, true}) {
        const auto t0 = std::chrono::steady_clock::now();
        const std::clock_t c0 = std::clock();
        for (long i = 0; i < calls; ++i) {
          if (on_worker) {
            worker.Run(once);
          } else {
            once();
          }
        }
        const double wall =
            std::chrono::duration<double, std::micro>(
                std::chrono::steady_clock::now() - t0)
                .count() /
            static_cast<double>(calls);
        const double cpu = static_cast<double>(std::clock() - c0) /
                           CLOCKS_PER_SEC * 1e6 / static_cast<double>(calls);
        if (rank == 0) {
          std::printf("{\"caller\":\"%s\",\"floats\":%zu,\"wall_us\":%.1f,"
                      "\"cpu_us\":%.1f}\n",
                      on_worker ? "worker_thread" : "main_thread", count, wall,
                      cpu);
          std::fflush(stdout);
        }
      }
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "gloo_probe rank %d: %s\n", rank, e.what());
    if (rank == 0) waitpid(child, nullptr, 0);
    return 1;
  }
  if (rank == 0) {
    int status = 0;
    waitpid(child, &status, 0);
    return WIFEXITED(status) ? WEXITSTATUS(status) : 1;
  }
  return 0;
}
