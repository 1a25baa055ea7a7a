// The daemon's journal (server/journal/journal.h): what is written comes back after
// a reopen, a name is taken once, concurrent durable writes share commits,
// a file that is not a journal is refused with its path and why, a damaged
// one (cut short, NULLs, wrong types) is an error naming table, row and
// column and never a crash, an empty or missing journal is refused unless a
// fresh start is asked for, and a live journal can be backed up.
#include "server/journal/journal.h"

#include <gtest/gtest.h>
#include <sqlite3.h>
#include <stdlib.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "tests/support/status_matchers.h"

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
  // Damages the closed journal by hand: runs `sql` on its file.
  void Damage(const std::string& sql) {
    sqlite3* db = nullptr;
    ASSERT_EQ(sqlite3_open((dir_ + "/journal.db").c_str(), &db), SQLITE_OK);
    ASSERT_EQ(sqlite3_exec(db, sql.c_str(), nullptr, nullptr, nullptr), SQLITE_OK) << sqlite3_errmsg(db);
    sqlite3_close(db);
  }
  // Each skipped row's message says what is wrong (`why`, in order) and in
  // which file.
  void ExpectSkipped(const std::vector<std::string>& skipped, const std::vector<std::string>& why) {
    ASSERT_EQ(skipped.size(), why.size());
    for (size_t i = 0; i < why.size(); ++i) {
      EXPECT_NE(skipped[i].find(why[i]), std::string::npos) << skipped[i];
      EXPECT_NE(skipped[i].find(dir_ + "/journal.db"), std::string::npos) << skipped[i];
    }
  }
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
  ASSERT_ERROR(j, absl::StatusCode::kDataLoss, "file is not a database; restore it from a backup");
  EXPECT_NE(j.status().message().find(dir_ + "/journal.db"), std::string::npos) << j.status();
  EXPECT_NE(j.status().message().find("not a database"), std::string::npos) << j.status();
}

TEST_F(JournalTest, AMissingDirectoryIsAnError) {
  auto j = Journal::Open(dir_ + "/absent");
  ASSERT_ERROR(j, absl::StatusCode::kNotFound, "is not a directory");
  EXPECT_NE(j.status().message().find("absent/journal.db"), std::string::npos) << j.status();
}

// What the error of a refused journal must say: the file, and how to start
// on purpose without it.
void ExpectRefusalNamesFileAndWayOut(const absl::Status& s, const std::string& file) {
  EXPECT_NE(s.message().find(file), std::string::npos) << s;
  EXPECT_NE(s.message().find("--fresh-state"), std::string::npos) << s;
}

TEST_F(JournalTest, AnEmptyJournalFileIsRefusedAndKept) {
  std::ofstream(dir_ + "/journal.db").close();  // 0 bytes
  auto j = Journal::Open(dir_);
  ASSERT_ERROR(j, absl::StatusCode::kFailedPrecondition, "is empty (0 bytes): what it held is lost, and serve does");
  EXPECT_EQ(j.status().code(), absl::StatusCode::kFailedPrecondition) << j.status();
  EXPECT_NE(j.status().message().find("empty (0 bytes)"), std::string::npos) << j.status();
  ExpectRefusalNamesFileAndWayOut(j.status(), dir_ + "/journal.db");
  EXPECT_EQ(std::filesystem::file_size(dir_ + "/journal.db"), 0u);  // not overwritten
}

TEST_F(JournalTest, AMissingJournalBesideItsWalIsRefused) {
  { auto j = *Journal::Open(dir_); ASSERT_TRUE(j->AddJob(Row("a", 1)).get().ok()); }
  std::ofstream(dir_ + "/journal.db-wal") << "left by a crash";
  std::filesystem::remove(dir_ + "/journal.db");
  auto j = Journal::Open(dir_);
  ASSERT_ERROR(j, absl::StatusCode::kFailedPrecondition, "holds a daemon's state (journal.db-wal): serve does not");
  EXPECT_NE(j.status().message().find("is missing"), std::string::npos) << j.status();
  EXPECT_NE(j.status().message().find("journal.db-wal"), std::string::npos) << j.status();
  ExpectRefusalNamesFileAndWayOut(j.status(), dir_ + "/journal.db");
  EXPECT_FALSE(std::filesystem::exists(dir_ + "/journal.db"));
}

TEST_F(JournalTest, AMissingJournalBesideTheDaemonsOtherStateIsRefused) {
  std::filesystem::create_directory(dir_ + "/executor");
  JournalOpenOptions o;
  o.other_state = {"executor"};
  auto j = Journal::Open(dir_, o);
  ASSERT_ERROR(j, absl::StatusCode::kFailedPrecondition, "holds a daemon's state (executor): serve does not start");
  EXPECT_NE(j.status().message().find("(executor)"), std::string::npos) << j.status();
  ExpectRefusalNamesFileAndWayOut(j.status(), dir_ + "/journal.db");
  // Foreign files are no state of ours: a first start beside them is fine.
  std::filesystem::remove(dir_ + "/executor");
  std::filesystem::create_directory(dir_ + "/lost+found");
  EXPECT_TRUE(Journal::Open(dir_, o).ok());
}

TEST_F(JournalTest, AFreshStartSetsTheOldJournalAsideNeverDeletesIt) {
  {
    auto j = *Journal::Open(dir_);
    ASSERT_TRUE(j->AddJob(Row("old", 1)).get().ok());
  }
  std::ofstream(dir_ + "/journal.db", std::ios::trunc).close();  // emptied: refused without fresh
  ASSERT_ERROR(Journal::Open(dir_), absl::StatusCode::kFailedPrecondition, "is empty (0 bytes): what it held is lost, and serve does");
  JournalOpenOptions o;
  o.fresh = true;
  auto j = Journal::Open(dir_, o);
  ASSERT_TRUE(j.ok()) << j.status();
  EXPECT_TRUE((*j)->Load()->jobs.empty());
  ASSERT_TRUE((*j)->AddJob(Row("new", 1)).get().ok());
  int aside = 0;
  for (const auto& e : std::filesystem::directory_iterator(dir_)) {
    if (e.path().filename().string().rfind("set-aside-", 0) != 0) continue;
    ++aside;
    EXPECT_TRUE(std::filesystem::exists(e.path() / "journal.db")) << e.path();
    EXPECT_EQ(std::filesystem::file_size(e.path() / "journal.db"), 0u);
  }
  EXPECT_EQ(aside, 1);
}

TEST_F(JournalTest, AReadOnlyJournalIsRefusedAtOpenNotAtTheFirstWrite) {
  if (::geteuid() == 0) GTEST_SKIP() << "root writes a 0444 file; journal_refusals mounts a read-only directory";
  { auto j = *Journal::Open(dir_); ASSERT_TRUE(j->AddJob(Row("a", 1)).get().ok()); }
  std::filesystem::permissions(dir_ + "/journal.db", std::filesystem::perms::owner_read);
  auto j = Journal::Open(dir_);
  ASSERT_FALSE(j.ok());
  EXPECT_NE(j.status().message().find("read-only"), std::string::npos) << j.status();
  std::filesystem::permissions(dir_, std::filesystem::perms::owner_read | std::filesystem::perms::owner_exec);
  auto k = Journal::Open(dir_);
  std::filesystem::permissions(dir_, std::filesystem::perms::owner_all);
  ASSERT_FALSE(k.ok());
  EXPECT_NE(k.status().message().find("state directory " + dir_ + " is not writable"), std::string::npos)
      << k.status();
}

// Tables created by hand without the NOT NULL constraints, holding what a
// damaged or hand-edited file can hold: each bad value is an error naming
// the table, the row and the column, never a crash or a silent 0.
TEST_F(JournalTest, NullsAndWrongTypesNameTheTableRowAndColumn) {
  struct Case {
    const char* sql;
    const char* want;
  };
  const Case cases[] = {
      {"INSERT INTO jobs VALUES(NULL, 1, x'00', 1, 0, 0)", "table jobs, row 1, column name: NULL, expected text"},
      {"INSERT INTO jobs VALUES('a', 1, NULL, 1, 0, 0)", "table jobs, row 1 (job 'a'), column spec: NULL, expected bytes"},
      {"INSERT INTO jobs VALUES('a', 1, x'00', 1, 'Running', 0)",
       "table jobs, row 1 (job 'a'), column phase: text, expected an integer"},
      {"INSERT INTO jobs VALUES('a', 1, x'00', 1, 0, 0), ('b', 2, x'00', 1, 0, -3)",
       "table jobs, row 2 (job 'b'), column generation: -3 is out of range"},
      {"INSERT INTO tasks VALUES('a', 0, 0, NULL, '0')", "table tasks, row 1 (job 'a' task 0), column node: NULL"},
      {"INSERT INTO tasks VALUES('a', 0, 1.5, 'n', '0')",
       "table tasks, row 1 (job 'a' task 0), column role: a real, expected an integer"},
      {"INSERT INTO tasks VALUES('a', 0, 0, 'n', NULL)", "table tasks, row 1 (job 'a' task 0), column gpus: NULL"},
      {"INSERT INTO extender_state VALUES('gang', NULL, 'x')", "table extender_state, row 1, column name: NULL"},
      {"INSERT INTO extender_state VALUES('gang', 'ml/a', NULL)",
       "table extender_state, row 1 (gang 'ml/a'), column value: NULL"},
      {"INSERT INTO meta VALUES('policy', NULL)", "table meta, row 1 (key 'policy'), column value: NULL"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.sql);
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directory(dir_);
    sqlite3* db = nullptr;
    ASSERT_EQ(sqlite3_open((dir_ + "/journal.db").c_str(), &db), SQLITE_OK);
    const std::string sql = absl::StrCat(
        "CREATE TABLE meta (key TEXT PRIMARY KEY, value BLOB);"
        "CREATE TABLE jobs (name TEXT, seq INTEGER, spec BLOB, created INTEGER, phase INTEGER, generation INTEGER);"
        "CREATE TABLE tasks (job TEXT, task INTEGER, role INTEGER, node TEXT, gpus TEXT);"
        "CREATE TABLE extender_state (kind TEXT, name TEXT, value BLOB);"
        "INSERT INTO meta VALUES('schema', '1');",
        c.sql, ";");
    ASSERT_EQ(sqlite3_exec(db, sql.c_str(), nullptr, nullptr, nullptr), SQLITE_OK) << sqlite3_errmsg(db);
    sqlite3_close(db);
    auto j = Journal::Open(dir_);
    ASSERT_TRUE(j.ok()) << j.status();
    auto r = (*j)->Load();
    ASSERT_ERROR(r, absl::StatusCode::kDataLoss, "");
    EXPECT_EQ(r.status().code(), absl::StatusCode::kDataLoss);
    EXPECT_NE(r.status().message().find(c.want), std::string::npos) << r.status();
    ExpectRefusalNamesFileAndWayOut(r.status(), dir_ + "/journal.db");
  }
}

// The state a kill -9 leaves after a clean restart (journal.db, and the WAL
// of what came since, copied while the journal is open), then journal.db
// cut short in the middle of each page in turn (as `truncate -s 50%` does):
// every cut opens and loads, or is an error naming the file; none crashes.
// (Such cuts make SQLite hand out rows with NULL columns.)
TEST_F(JournalTest, AJournalCutShortWithItsWalKeptIsAnErrorNeverACrash) {
  const std::string image = dir_ + "/image";
  std::filesystem::create_directory(image);
  auto write = [](Journal& j, int i) {
    JournaledJob row = Row("job-" + std::to_string(i), i + 1);
    row.spec.append(100 + (i * 37) % 9000, 's');  // some rows spill onto overflow pages
    ASSERT_TRUE(j.AddJob(row).get().ok());
    j.SetPlacement(row.name, 2, 1, {{0, 0, "node-" + std::to_string(i % 4), {int16_t(i % 8)}}});
    j.PutExtenderState("node", "n" + std::to_string(i), std::string(200 + (i * 106) % 10000, 'v'));
    ASSERT_TRUE(j.Flush().ok());
  };
  {
    auto j = *Journal::Open(dir_);
    ASSERT_TRUE(j->Load().ok());
    for (int i = 0; i < 25; ++i) write(*j, i);
  }  // closed: checkpointed into journal.db
  {
    auto j = *Journal::Open(dir_);
    for (int i = 25; i < 50; ++i) write(*j, i);
    for (const char* f : {"journal.db", "journal.db-wal"}) {
      std::filesystem::copy_file(dir_ + "/" + f, image + "/" + f);
    }
  }
  const uintmax_t size = std::filesystem::file_size(image + "/journal.db");
  ASSERT_GT(size, 16u * 4096) << "the image should span many pages";
  int refused = 0, cuts = 0;
  for (uintmax_t cut = 2048; cut < size; cut += 4096) {
    SCOPED_TRACE(cut);
    const std::string d = dir_ + "/cut";
    std::filesystem::remove_all(d);
    std::filesystem::create_directory(d);
    for (const char* f : {"journal.db", "journal.db-wal"}) std::filesystem::copy_file(image + "/" + f, d + "/" + f);
    std::filesystem::resize_file(d + "/journal.db", cut);
    ++cuts;
    auto j = Journal::Open(d);
    absl::Status s = j.ok() ? (*j)->Load().status() : j.status();
    if (s.ok()) continue;
    ++refused;
    EXPECT_NE(s.message().find(d + "/journal.db"), std::string::npos) << s;
    EXPECT_NE(s.message().find("--fresh-state"), std::string::npos) << s;
  }
  EXPECT_GT(refused, 0) << "no cut of " << cuts << " was noticed";
}

TEST_F(JournalTest, ALiveJournalIsBackedUpWithEverythingCommitted) {
  const std::string out = dir_ + "/backup";
  std::filesystem::create_directory(out);
  auto j = *Journal::Open(dir_);  // stays open: the backup reads the live journal and its WAL
  ASSERT_TRUE(j->AddJob(Row("a", 1)).get().ok());
  ASSERT_TRUE(j->AddJob(Row("b", 2)).get().ok());
  j->SetPlacement("a", 2, 1, {{0, 0, "node-0000", {3}}});
  j->PutExtenderState("gang", "ml/a", "members");
  ASSERT_TRUE(j->SetPolicy("actions: allocate\n").get().ok());
  ASSERT_TRUE(j->Flush().ok());
  auto done = BackupJournal(dir_, out);
  ASSERT_TRUE(done.ok()) << done.status();
  EXPECT_EQ(done->to, out + "/journal.db");
  EXPECT_EQ(done->jobs, 2);
  EXPECT_EQ(done->extender, 1);
  ASSERT_TRUE(j->AddJob(Row("after", 3)).get().ok());  // the journal goes on
  auto copy = *Journal::Open(out);
  Recovered got = *copy->Load();
  Recovered want = *j->Load();
  ASSERT_EQ(got.jobs.size(), 2u);
  EXPECT_EQ(got.jobs[0].name, "a");
  EXPECT_EQ(got.jobs[0].tasks, want.jobs[0].tasks);
  EXPECT_EQ(got.jobs[1].spec, want.jobs[1].spec);
  EXPECT_EQ(got.extender, want.extender);
  EXPECT_EQ(got.policy_yaml, "actions: allocate\n");
  // A journal is never overwritten by a backup.
  auto again = BackupJournal(dir_, out);
  ASSERT_ERROR(again, absl::StatusCode::kAlreadyExists, "exists; a backup never overwrites a journal");
  EXPECT_EQ(again.status().code(), absl::StatusCode::kAlreadyExists) << again.status();
}

TEST_F(JournalTest, BadTaskRowsAreReportedNotTrusted) {
  {
    auto j = *Journal::Open(dir_);
    ASSERT_TRUE(j->AddJob(Row("a", 1)).get().ok());
    j->SetPlacement("a", 2, 1, {{0, 0, "node-0000", {0}}});
    ASSERT_TRUE(j->Flush().ok());
  }
  // Damage one row the way a hand edit would.
  Damage("UPDATE tasks SET gpus='0,x'");
  auto j = *Journal::Open(dir_);
  auto r = j->Load();
  ASSERT_ERROR(r, absl::StatusCode::kDataLoss, "table tasks, row 1 (job 'a' task 0), column gpus: bad gpus");
  EXPECT_NE(r.status().message().find("table tasks, row 1 (job 'a' task 0), column gpus: bad gpus '0,x'"),
            std::string::npos)
      << r.status();
}

// A write nobody waits for that fails is reported as it fails (serve logs
// it), and Flush still returns it.
TEST_F(JournalTest, AFailedUnwaitedWriteIsReportedAsItFails) {
  auto j = *Journal::Open(dir_);
  ASSERT_TRUE(j->AddJob(Row("a", 1)).get().ok());
  std::mutex mu;
  std::vector<std::string> seen;
  j->SetErrorObserver([&](const absl::Status& s) {
    std::lock_guard<std::mutex> lock(mu);
    seen.emplace_back(s.message());
  });
  j->SetPlacement("a", 2, 1, {{0, 0, "n", {0}}, {0, 0, "n", {1}}});  // task 0 twice: the second row breaks the key
  const absl::Status flushed = j->Flush();
  EXPECT_NE(flushed.message().find("recording a task"), std::string::npos) << flushed;
  std::lock_guard<std::mutex> lock(mu);
  ASSERT_EQ(seen.size(), 1u);
  EXPECT_EQ(seen[0], flushed.message());
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

TEST_F(JournalTest, QueueUsageIsReplacedWholeAndABadRowIsSkippedNeverRefused) {
  const std::vector<JournaledQueueUsage> want = {{"a", 20'000.25, 3'600'000, 2000}, {"b", 1.5, 3'600'000, 2000}};
  {
    auto j = *Journal::Open(dir_);
    ASSERT_TRUE(j->Load()->queue_usage.empty());
    j->SetQueueUsage({{"a", 20'774.8, 3'600'000, 1000}, {"gone", 5, 3'600'000, 1000}});
    j->SetQueueUsage({{"b", 1.5, 3'600'000, 2000}, {"a", 20'000.25, 3'600'000, 2000}});  // "gone" is gone
    ASSERT_TRUE(j->Flush().ok());
  }
  {
    auto j = *Journal::Open(dir_);
    Recovered r = *j->Load();
    EXPECT_EQ(r.queue_usage, want);  // by name, the doubles exact
    EXPECT_TRUE(r.skipped.empty());
  }
  // Rows damaged by hand: each is skipped with what and where; the others
  // load and the journal opens (history, not acknowledgements).
  Damage(
      "INSERT INTO queue_usage VALUES('c', 'lots', 3600000, 1), ('d', -2, 3600000, 1), "
      "('e', 1, 0, 1), ('f', 1, 3600000, 'noon'), ('g', 9e999, 3600000, 1)");
  auto j = *Journal::Open(dir_);
  auto r = j->Load();
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->queue_usage, want);
  const std::vector<std::string> why = {
      "table queue_usage, row 3 (queue 'c'), column gpu_seconds: text, expected a real",
      "table queue_usage, row 4 (queue 'd'), column gpu_seconds: -2 is out of range",
      "table queue_usage, row 5 (queue 'e'), column half_life_ms: 0 is out of range",
      "table queue_usage, row 6 (queue 'f'), column valued_at: text, expected an integer",
      "table queue_usage, row 7 (queue 'g'), column gpu_seconds: inf is out of range",
  };
  ExpectSkipped(r->skipped, why);
  // An empty SetQueueUsage (a policy without a half-life) empties the table.
  j->SetQueueUsage({});
  ASSERT_TRUE(j->Flush().ok());
  j.reset();
  EXPECT_TRUE((*Journal::Open(dir_))->Load()->queue_usage.empty());
}

JournaledEndedJob Ended(const std::string& name, int64_t started, int64_t stopped) {
  return {.seq = 0, .name = name, .queue = "q-" + name, .min_gpu_milli = 8000, .phase = 3,
          .attained_milli_ms = 8000 * (stopped - started), .started_ms = started, .last_stopped_ms = stopped,
          .ended_at_ms = stopped + 1};
}

TEST_F(JournalTest, EndedJobsComeBackInTheirOrderTheLastKeptAndABadRowIsSkippedNeverRefused) {
  std::vector<JournaledEndedJob> want;
  {
    auto j = *Journal::Open(dir_);
    ASSERT_TRUE(j->Load()->ended_jobs.empty());
    // z ends before a: their order is the writes', not the names'.
    j->AddEndedJobs({Ended("z", 0, 10), Ended("a", 5, 20)}, 3);
    j->AddEndedJobs({Ended("m", -1, -1)}, 3);  // as written: what it teaches is the reader's call
    j->AddEndedJobs({Ended("b", 30, 40), Ended("c", 1'700'000'000'000, 1'700'000'360'000)}, 3);  // z, a dropped
    ASSERT_TRUE(j->Flush().ok());
    for (const auto& [name, seq] : std::vector<std::pair<std::string, int64_t>>{{"m", 3}, {"b", 4}, {"c", 5}}) {
      want.push_back(name == "m" ? Ended("m", -1, -1) : name == "b" ? Ended("b", 30, 40)
                                                                    : Ended("c", 1'700'000'000'000, 1'700'000'360'000));
      want.back().seq = seq;
    }
  }
  {
    auto j = *Journal::Open(dir_);
    Recovered r = *j->Load();
    EXPECT_EQ(r.ended_jobs, want);
    EXPECT_TRUE(r.ended_skipped.empty());
    // The next write goes on from the largest seq.
    j->AddEndedJobs({Ended("d", 50, 60)}, 3);
    ASSERT_TRUE(j->Flush().ok());
    r = *j->Load();
    ASSERT_EQ(r.ended_jobs.size(), 3u);
    EXPECT_EQ(r.ended_jobs.back().name, "d");
    EXPECT_EQ(r.ended_jobs.back().seq, 6);
    want.erase(want.begin());
    want.push_back(r.ended_jobs.back());
  }
  // Rows damaged by hand: each is skipped with what and where; the others
  // load and the journal opens.
  Damage(
      "INSERT INTO ended_jobs VALUES(7, 'e', 'q', 'eight', 3, 0, 0, 0, 0), "
      "(8, 'f', 'q', 1000, 3, -5, 0, 0, 0), (9, 'g', 'q', 1000, 3, 0, -2, 0, 0), "
      "(10, 'h', 'q', 1000, 3, 0, 0, 1.5, 0), (11, x'00ff', 'q', 1000, 3, 0, 0, 0, 0)");
  auto j = *Journal::Open(dir_);
  auto r = j->Load();
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->ended_jobs, want);
  const std::vector<std::string> why = {
      "table ended_jobs, row 4 (seq 7, job 'e'), column min_gpu_milli: text, expected an integer",
      "table ended_jobs, row 5 (seq 8, job 'f'), column attained_milli_ms: -5 is out of range",
      "table ended_jobs, row 6 (seq 9, job 'g'), column started: -2 is out of range",
      "table ended_jobs, row 7 (seq 10, job 'h'), column last_stopped: a real, expected an integer",
      "table ended_jobs, row 8 (seq 11), column job: a blob, expected text",
  };
  ExpectSkipped(r->ended_skipped, why);
  EXPECT_TRUE(r->skipped.empty()) << "queue_usage's list is its own";
  // Keeping 1 drops every row below the new one, damaged or not.
  j->AddEndedJobs({Ended("i", 70, 80)}, 1);
  ASSERT_TRUE(j->Flush().ok());
  j.reset();
  const Recovered after = *(*Journal::Open(dir_))->Load();
  EXPECT_TRUE(after.ended_skipped.empty());
  ASSERT_EQ(after.ended_jobs.size(), 1u);
  EXPECT_EQ(after.ended_jobs[0].name, "i");
  EXPECT_EQ(after.ended_jobs[0].seq, 12);
}

JournaledJobHistory History(const std::string& name, int64_t attained, int64_t at, bool running) {
  return {.name = name, .attained_milli_ms = attained, .attained_at_ms = at, .held_gpu_milli = running ? 8000 : 0,
          .running = running, .started_ms = at - 100, .last_stopped_ms = running ? -1 : at, .last_resize_ms = at - 100,
          .yielded_to = {}};
}

TEST_F(JournalTest, JobHistoriesAreUpsertedAndDroppedAndABadRowIsSkippedNeverRefused) {
  JournaledJobHistory a = History("a", 8'000'000, 1'700'000'000'000, true);
  // Names with the separator and a length prefix's characters in them.
  a.yielded_to = {"b", "x:1", std::string("n\0l", 3), "12:34"};
  JournaledJobHistory b = History("b", 0, 500, false);
  {
    auto j = *Journal::Open(dir_);
    const Recovered r = *j->Load();
    EXPECT_TRUE(r.histories.empty());
    EXPECT_EQ(r.history_seen_ms, -1);
    j->SetJobHistories({History("a", 1, 2, false), b, History("c", 3, 4, true)}, {}, 600);
    j->SetJobHistories({a}, {"c", "never-written"}, 1'700'000'000'500);  // a's row replaced, c's gone
    ASSERT_TRUE(j->Flush().ok());
  }
  {
    auto j = *Journal::Open(dir_);
    const Recovered r = *j->Load();
    EXPECT_EQ(r.histories, (std::vector<JournaledJobHistory>{a, b}));
    EXPECT_EQ(r.history_seen_ms, 1'700'000'000'500);
    EXPECT_TRUE(r.history_skipped.empty());
  }
  // Rows damaged by hand: each is skipped with the job and the column; the
  // others load and the journal opens.
  Damage(
      "INSERT INTO job_history VALUES('d', -1, 0, 0, 0, -1, -1, -1, ''), ('e', 0, 0, 'lots', 0, -1, -1, -1, ''), "
      "('f', 0, 0, 0, 2, -1, -1, -1, ''), ('g', 0, 0, 0, 0, -7, -1, -1, ''), ('h', 0, 0, 0, 0, -1, -1, 2.5, ''), "
      "('i', 0, 0, 0, 0, -1, -1, -1, '5:ab'), ('j', 0, 0, 0, 0, -1, -1, -1, 'x')");
  auto j = *Journal::Open(dir_);
  auto r = j->Load();
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->histories, (std::vector<JournaledJobHistory>{a, b}));
  ExpectSkipped(r->history_skipped,
                {
                    "table job_history, row 3 (job 'd'), column attained_milli_ms: -1 is out of range",
                    "table job_history, row 4 (job 'e'), column held_gpu_milli: text, expected an integer",
                    "table job_history, row 5 (job 'f'), column running: 2 is out of range",
                    "table job_history, row 6 (job 'g'), column started: -7 is out of range",
                    "table job_history, row 7 (job 'h'), column last_resize: a real, expected an integer",
                    "table job_history, row 8 (job 'i'), column yielded_to: bad names '5:ab'",
                    "table job_history, row 9 (job 'j'), column yielded_to: bad names 'x'",
                });
  EXPECT_TRUE(r->ended_skipped.empty() && r->skipped.empty()) << "the other tables' lists are their own";
}

// A journal written before job_history (schema version 1 without it, and
// without meta's history_seen) opens, loads with no histories, and then
// keeps them.
TEST_F(JournalTest, AJournalWrittenBeforeJobHistoryOpensAndGetsIt) {
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open((dir_ + "/journal.db").c_str(), &db), SQLITE_OK);
  ASSERT_EQ(sqlite3_exec(db,
                         "CREATE TABLE meta (key TEXT PRIMARY KEY, value BLOB NOT NULL) WITHOUT ROWID;"
                         "CREATE TABLE jobs (name TEXT PRIMARY KEY, seq INTEGER NOT NULL, spec BLOB NOT NULL, "
                         "created INTEGER NOT NULL, phase INTEGER NOT NULL, generation INTEGER NOT NULL) WITHOUT ROWID;"
                         "CREATE TABLE tasks (job TEXT NOT NULL, task INTEGER NOT NULL, role INTEGER NOT NULL, "
                         "node TEXT NOT NULL, gpus TEXT NOT NULL, PRIMARY KEY (job, task)) WITHOUT ROWID;"
                         "INSERT INTO meta VALUES('schema', '1');"
                         "INSERT INTO jobs VALUES('old', 1, x'00', 5, 2, 1);"
                         "INSERT INTO tasks VALUES('old', 0, 0, 'node-0', '0,1');",
                         nullptr, nullptr, nullptr),
            SQLITE_OK)
      << sqlite3_errmsg(db);
  sqlite3_close(db);
  {
    auto j = Journal::Open(dir_);
    ASSERT_TRUE(j.ok()) << j.status();
    auto r = (*j)->Load();
    ASSERT_TRUE(r.ok()) << r.status();
    ASSERT_EQ(r->jobs.size(), 1u);
    EXPECT_EQ(r->jobs[0].tasks.size(), 1u);
    EXPECT_TRUE(r->histories.empty());
    EXPECT_TRUE(r->history_skipped.empty());
    EXPECT_EQ(r->history_seen_ms, -1);
    (*j)->SetJobHistories({History("old", 42, 700, true)}, {}, 9);
    ASSERT_TRUE((*j)->Flush().ok());
  }
  const Recovered r = *(*Journal::Open(dir_))->Load();
  EXPECT_TRUE(r.history_skipped.empty());
  EXPECT_EQ(r.histories, (std::vector<JournaledJobHistory>{History("old", 42, 700, true)}));
  EXPECT_EQ(r.history_seen_ms, 9);
}

}  // namespace
}  // namespace ringmaster::server
