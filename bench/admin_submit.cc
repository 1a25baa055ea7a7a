// Load generator for the admin API's SubmitJob (bench/admin_journal.sh):
// sends N one-task jobs named PREFIX-i from T threads over one channel and
// prints the acknowledged rate. Every OK answer means the job is journaled.
//
//   admin_submit HOST:PORT N T [PREFIX] [GPUS]
#include <grpcpp/grpcpp.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "api/admin.grpc.pb.h"

int main(int argc, char** argv) {
  if (argc < 4) {
    std::fprintf(stderr, "usage: admin_submit HOST:PORT N THREADS [PREFIX] [GPUS]\n");
    return 2;
  }
  const std::string server = argv[1];
  const long n = std::atol(argv[2]);
  const int threads = std::atoi(argv[3]);
  const std::string prefix = argc > 4 ? argv[4] : "bench";
  const int gpus = argc > 5 ? std::atoi(argv[5]) : 1;
  auto channel = grpc::CreateChannel(server, grpc::InsecureChannelCredentials());
  auto stub = ringmaster::admin::Admin::NewStub(channel);
  std::atomic<long> next{0}, ok{0}, failed{0};
  const auto start = std::chrono::steady_clock::now();
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t) {
    pool.emplace_back([&] {
      for (long i = next++; i < n; i = next++) {
        ringmaster::admin::SubmitJobRequest req;
        auto* job = req.mutable_job();
        job->set_name(prefix + "-" + std::to_string(i));
        auto* role = job->add_roles();
        role->set_replicas(1);
        role->set_gpu_count(gpus);
        ringmaster::admin::SubmitJobResponse resp;
        grpc::ClientContext ctx;
        ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
        grpc::Status s = stub->SubmitJob(&ctx, req, &resp);
        if (s.ok()) {
          ++ok;
        } else if (failed++ == 0) {
          std::fprintf(stderr, "first failure: %s\n", s.error_message().c_str());
        }
      }
    });
  }
  for (auto& t : pool) t.join();
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf("submitted %ld jobs (%ld failed) in %.2f s with %d threads: %.0f jobs/s\n", ok.load(), failed.load(), secs,
              threads, ok.load() / secs);
  return failed.load() == 0 ? 0 : 1;
}
