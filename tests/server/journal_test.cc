// The daemon's journal (server/journal.h): what is written comes back after
// a reopen, a name is taken once, concurrent durable writes share commits,
// and a file that is not a journal is refused with its path and why.
#include "server/journal.h"

#include <gtest/gtest.h>
#include <sqlite3.h>
#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <thread>

namespace ringmaster::server {
namespace {

class JournalTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/rm_journal_XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::string dir_;
};

JournaledJob Row(const std::string& name, int64_t seq) {
  JournaledJob j;
  j.name = name;
  j.seq = seq;
  j.spec = std::string("spec\0bytes-", 11) + name;  // binary-safe
  j.created_ms = 1000 + seq;
  return j;
}

TEST_F(JournalTest, WhatWasCommittedComesBackAfterReopen) {
  {
    auto j = *Journal::Open(dir_);
    ASSERT_TRUE(j->Load()->jobs.empty());
    ASSERT_TRUE(j->AddJob(Row("a", 1)).get().ok());
    ASSERT_TRUE(j->AddJob(Row("b", 2)).get().ok());
    j->SetPlacement("a", 2, 3, {{0, 0, "node-0000", {0, 1}}, {1, 0, "node-0001", {7}}});
    ASSERT_TRUE(j->SetPhase("b", 5, /*terminal=*/true).get().ok());
    ASSERT_TRUE(j->SetPolicy("actions: allocate\n").get().ok());
    ASSERT_TRUE(j->Flush().ok());
  }
  auto j = *Journal::Open(dir_);
  Recovered r = *j->Load();
  ASSERT_EQ(r.jobs.size(), 2u);
  EXPECT_EQ(r.jobs[0].name, "a");
  EXPECT_EQ(r.jobs[0].spec, Row("a", 1).spec);
  EXPECT_EQ(r.jobs[0].created_ms, 1001);
  EXPECT_EQ(r.jobs[0].phase, 2);
  EXPECT_EQ(r.jobs[0].generation, 3);
  std::vector<JournaledTask> want = {{0, 0, "node-0000", {0, 1}}, {1, 0, "node-0001", {7}}};
  EXPECT_EQ(r.jobs[0].tasks, want);
  EXPECT_EQ(r.jobs[1].name, "b");
  EXPECT_EQ(r.jobs[1].phase, 5);
  EXPECT_TRUE(r.jobs[1].tasks.empty());
  EXPECT_EQ(r.policy_yaml, "actions: allocate\n");
}

TEST_F(JournalTest, ANameIsTakenOnce) {
  auto j = *Journal::Open(dir_);
  ASSERT_TRUE(j->AddJob(Row("a", 1)).get().ok());
  absl::Status again = j->AddJob(Row("a", 2)).get();
  EXPECT_EQ(again.code(), absl::StatusCode::kAlreadyExists) << again;
  EXPECT_EQ(j->Load()->jobs.size(), 1u);
}

// 8 writers x 50 durable submissions: every one is in, and they shared
// transactions (fewer commits than submissions).
TEST_F(JournalTest, ConcurrentSubmissionsShareCommits) {
  auto j = *Journal::Open(dir_);
  std::vector<std::thread> writers;
  for (int w = 0; w < 8; ++w) {
    writers.emplace_back([&, w] {
      for (int i = 0; i < 50; ++i) {
        ASSERT_TRUE(j->AddJob(Row("w" + std::to_string(w) + "-" + std::to_string(i), w * 50 + i + 1)).get().ok());
      }
    });
  }
  for (auto& t : writers) t.join();
  EXPECT_EQ(j->Load()->jobs.size(), 400u);
  EXPECT_LT(j->commits(), 400);
}

TEST_F(JournalTest, AFileThatIsNotAJournalIsRefusedWithItsPath) {
  {
    std::ofstream junk(dir_ + "/journal.db");
    junk << std::string(4096, 'x');
  }
  auto j = Journal::Open(dir_);
  ASSERT_FALSE(j.ok());
  EXPECT_NE(j.status().message().find(dir_ + "/journal.db"), std::string::npos) << j.status();
  EXPECT_NE(j.status().message().find("not a database"), std::string::npos) << j.status();
}

TEST_F(JournalTest, AMissingDirectoryIsAnError) {
  auto j = Journal::Open(dir_ + "/absent");
  ASSERT_FALSE(j.ok());
  EXPECT_NE(j.status().message().find("absent/journal.db"), std::string::npos) << j.status();
}

TEST_F(JournalTest, BadTaskRowsAreReportedNotTrusted) {
  {
    auto j = *Journal::Open(dir_);
    ASSERT_TRUE(j->AddJob(Row("a", 1)).get().ok());
    j->SetPlacement("a", 2, 1, {{0, 0, "node-0000", {0}}});
    ASSERT_TRUE(j->Flush().ok());
  }
  // Damage one row the way a hand edit would.
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open((dir_ + "/journal.db").c_str(), &db), SQLITE_OK);
  ASSERT_EQ(sqlite3_exec(db, "UPDATE tasks SET gpus='0,x'", nullptr, nullptr, nullptr), SQLITE_OK);
  sqlite3_close(db);
  auto j = *Journal::Open(dir_);
  auto r = j->Load();
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("job 'a' task 0: bad gpus '0,x'"), std::string::npos) << r.status();
}

TEST_F(JournalTest, ExtenderStateKeepsItsOrderAcrossOverwritesAndDeletes) {
  std::vector<double> commits;
  {
    auto j = *Journal::Open(dir_);
    j->SetCommitObserver([&](double s) { commits.push_back(s); });
    j->PutExtenderState("node", "n1", "{\"n\":1}");
    j->PutExtenderState("gang", "ml/a", "first");
    j->PutExtenderState("gang", "ml/b", std::string("bin\0ary", 7));
    j->PutExtenderState("node", "n1", "{\"n\":2}");  // overwritten: keeps its place
    j->PutExtenderState("gang", "ml/a", "");          // removed
    j->PutExtenderState("gang", "ml/absent", "");     // removing nothing is fine
    ASSERT_TRUE(j->Flush().ok());
  }
  ASSERT_FALSE(commits.empty());
  for (double s : commits) EXPECT_GE(s, 0.0);
  auto j = *Journal::Open(dir_);
  const std::vector<ExtenderRecord> got = j->Load()->extender;
  EXPECT_EQ(got, (std::vector<ExtenderRecord>{{"node", "n1", "{\"n\":2}"},
                                              {"gang", "ml/b", std::string("bin\0ary", 7)}}));
}

}  // namespace
}  // namespace ringmaster::server
