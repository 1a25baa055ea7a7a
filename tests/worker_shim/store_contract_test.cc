// The gloo::rendezvous::Store contract, run over Gloo's own HashStore (the
// reference) and over KvStore (the coordinator's key-value service through
// gRPC on 127.0.0.1).
#include <gloo/common/error.h>
#include <gloo/rendezvous/hash_store.h>
#include <gtest/gtest.h>

#include <thread>

#include "server/coordinator/coordinator_service.h"
#include "worker_shim/kv_store.h"

namespace ringmaster::shim {
namespace {

struct HashStoreTraits {
  struct Env {
    gloo::rendezvous::HashStore store;
    gloo::rendezvous::Store& get() { return store; }
  };
};

// A one-worker job on an in-process coordinator; the store is generation 1.
struct KvStoreTraits {
  struct Env {
    Env() {
      server::CoordinatorOptions o;
      o.max_value_bytes = 4096;
      server = *server::CoordinatorServer::Start("127.0.0.1:0", o);
      ClientOptions c;
      c.address = server->address();
      c.job = "store-test";
      c.worker_id = "w";
      c.desired_workers = 1;
      client = *CoordinatorClient::Connect(c);
      EXPECT_TRUE(client->WaitForGeneration(1, absl::Seconds(10)).ok());
      store = std::make_unique<KvStore>(*client, 1, absl::Seconds(10));
    }
    gloo::rendezvous::Store& get() { return *store; }
    std::unique_ptr<server::CoordinatorServer> server;
    std::unique_ptr<CoordinatorClient> client;
    std::unique_ptr<KvStore> store;
  };
};

template <typename T>
class StoreContract : public ::testing::Test {
 protected:
  typename T::Env env_;
};
using Stores = ::testing::Types<HashStoreTraits, KvStoreTraits>;
TYPED_TEST_SUITE(StoreContract, Stores);

TYPED_TEST(StoreContract, SetThenGetReturnsTheBytes) {
  auto& s = this->env_.get();
  std::vector<char> value = {'a', '\0', 'b', '\xff'};  // binary-safe
  s.set("k", value);
  s.wait({"k"});
  EXPECT_EQ(s.get("k"), value);
  s.set("k2", std::vector<char>(1024, 'z'));
  s.wait({"k2"});
  EXPECT_EQ(s.get("k2").size(), 1024u);
}

TYPED_TEST(StoreContract, GetAndWaitBlockUntilAnotherThreadSets) {
  auto& s = this->env_.get();
  std::thread writer([&s] {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    s.set("late", {'1'});
    s.set("later", {'2'});
  });
  s.wait({"late", "later"}, std::chrono::milliseconds(5000));
  EXPECT_EQ(s.get("late"), std::vector<char>{'1'});
  EXPECT_EQ(s.get("later"), std::vector<char>{'2'});
  writer.join();
}

TYPED_TEST(StoreContract, WaitForMissingKeyTimesOutWithAnError) {
  auto& s = this->env_.get();
  const auto start = std::chrono::steady_clock::now();
  EXPECT_ANY_THROW(s.wait({"never"}, std::chrono::milliseconds(100)));
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5));
}

// KvStore-only: what Gloo's stores cannot express.
TEST(KvStore, OversizedValuesAndSupersededGenerationsAreErrors) {
  KvStoreTraits::Env env;
  try {
    env.store->set("big", std::vector<char>(5000, 'x'));  // limit 4096
    FAIL() << "oversized value accepted";
  } catch (const gloo::IoException& e) {
    EXPECT_NE(std::string(e.what()).find("exceeds the limit"),
              std::string::npos)
        << e.what();
  }
  std::thread resizer([&env] {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    (void)env.client->ReportFailure(1, "", "test");  // generation 2
  });
  const auto start = std::chrono::steady_clock::now();
  try {
    env.store->wait({"never"}, std::chrono::milliseconds(20000));
    FAIL() << "wait survived a new generation";
  } catch (const gloo::IoException& e) {
    EXPECT_NE(std::string(e.what()).find("superseded"), std::string::npos);
  }
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5));
  resizer.join();
  KvStore stale(*env.client, 1);
  EXPECT_THROW(stale.set("k", {'1'}), gloo::IoException);
}

// One wait for several keys is one round trip, and the gets after it are
// answered from what it fetched: Gloo's full mesh costs each rank two round
// trips (set, wait), not one per peer.
TEST(KvStore, WaitFetchesTheValuesSoTheGetsAfterItAreFree) {
  KvStoreTraits::Env env;
  env.store->set("a", {'1'});
  env.store->set("b", {'2', '2'});
  KvStore reader(*env.client, 1, absl::Seconds(10));
  reader.wait({"a", "b"});
  EXPECT_EQ(reader.rpcs(), 1);
  EXPECT_EQ(reader.get("a"), std::vector<char>({'1'}));
  EXPECT_EQ(reader.get("b"), std::vector<char>({'2', '2'}));
  EXPECT_EQ(reader.rpcs(), 1);
  // A key it did not wait for still costs a round trip.
  env.store->set("c", {'3'});
  EXPECT_EQ(reader.get("c"), std::vector<char>({'3'}));
  EXPECT_EQ(reader.rpcs(), 2);
}

}  // namespace
}  // namespace ringmaster::shim
