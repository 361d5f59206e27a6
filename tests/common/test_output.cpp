// Checked writes and staged output folders (Notes [Checked writes], [Atomic output folders]).
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <csignal>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "psw/common/error.hpp"
#include "psw/common/output.hpp"

namespace fs = std::filesystem;

namespace {

std::string read(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

// A fresh folder per test, removed afterwards.
class OutputTest : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = fs::temp_directory_path() /
            ("psw-output-test-" + std::to_string(::getpid()) + "-" +
             ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(root_);
    fs::create_directories(root_);
  }
  void TearDown() override { fs::remove_all(root_); }
  fs::path root_;
};

TEST_F(OutputTest, SaveTextToAFullDeviceFailsNamingTheFile) {
  if (!fs::exists("/dev/full")) GTEST_SKIP() << "no /dev/full";
  try {
    psw::save_text("/dev/full", "a small text that fits in the stream's buffer\n");
    FAIL() << "no error on /dev/full";
  } catch (const psw::InputError& e) {
    FAIL() << "a write failure is not bad input: " << e.what();
  } catch (const psw::Error& e) {
    EXPECT_NE(std::string(e.what()).find("/dev/full: write failed: No space left on device"), std::string::npos)
        << e.what();
  }
}

TEST_F(OutputTest, OutputFileToAFullDeviceFailsAtTheLatestOnClose) {
  if (!fs::exists("/dev/full")) GTEST_SKIP() << "no /dev/full";
  psw::OutputFile out("/dev/full");
  EXPECT_THROW(
      {
        out.write("x");
        out.close();
      },
      psw::Error);
}

// remove_tree: a folder with what is in it, links removed and not followed; a file; a missing
// path is no error; a folder it may not empty is one, naming why.
TEST_F(OutputTest, RemoveTreeRemovesAFolderAndNotWhatItsLinksPointTo) {
  const fs::path tree = root_ / "tree";
  const fs::path outside = root_ / "outside";
  fs::create_directories(tree / "a" / "b");
  fs::create_directories(outside);
  psw::save_text(tree / "a" / "b" / "deep.txt", "x");
  psw::save_text(tree / "top.txt", "y");
  psw::save_text(outside / "kept.txt", "z");
  fs::create_directory_symlink(outside, tree / "a" / "link");
  std::error_code ec;
  psw::remove_tree(tree, ec);
  EXPECT_FALSE(ec) << ec.message();
  EXPECT_FALSE(fs::exists(fs::symlink_status(tree)));
  EXPECT_EQ(read(outside / "kept.txt"), "z");
  psw::remove_tree(tree, ec);  // gone already
  EXPECT_FALSE(ec) << ec.message();
  psw::remove_tree(outside / "kept.txt", ec);
  EXPECT_FALSE(ec) << ec.message();
  EXPECT_TRUE(fs::exists(outside));
  EXPECT_FALSE(fs::exists(outside / "kept.txt"));
  if (::geteuid() != 0) {  // root may remove what the permissions forbid
    fs::create_directories(outside / "locked" / "inner");
    fs::permissions(outside / "locked", fs::perms::owner_read | fs::perms::owner_exec);
    psw::remove_tree(outside / "locked", ec);
    EXPECT_TRUE(ec);
    fs::permissions(outside / "locked", fs::perms::owner_all);
  }
}

TEST_F(OutputTest, SaveTextWritesAndCreatesFolders) {
  psw::save_text(root_ / "a" / "b.txt", "hello\n");
  EXPECT_EQ(read(root_ / "a" / "b.txt"), "hello\n");
}

TEST_F(OutputTest, StagedFolderAppearsOnlyOnCommit) {
  const fs::path target = root_ / "run";
  {
    psw::StagedFolder folder(target, "marker");
    psw::save_text(folder.path() / "marker", "new\n");
    EXPECT_FALSE(fs::exists(target));
    folder.commit();
  }
  EXPECT_EQ(read(target / "marker"), "new\n");
  EXPECT_FALSE(fs::exists(psw::temporary_sibling(target)));
}

TEST_F(OutputTest, StagedFolderReplacesAnOlderRunWhole) {
  const fs::path target = root_ / "run";
  psw::save_text(target / "marker", "old\n");
  psw::save_text(target / "only-in-old.txt", "old\n");
  {
    psw::StagedFolder folder(target, "marker");
    psw::save_text(folder.path() / "marker", "new\n");
    folder.commit();
  }
  EXPECT_EQ(read(target / "marker"), "new\n");
  EXPECT_FALSE(fs::exists(target / "only-in-old.txt"));
  EXPECT_FALSE(fs::exists(psw::temporary_sibling(target, "old")));
}

TEST_F(OutputTest, StagedFolderNotCommittedLeavesTheOlderRunAndNoTemporaryFolder) {
  const fs::path target = root_ / "run";
  psw::save_text(target / "marker", "old\n");
  {
    psw::StagedFolder folder(target, "marker");
    psw::save_text(folder.path() / "marker", "new\n");
    // no commit: the run failed
  }
  EXPECT_EQ(read(target / "marker"), "old\n");
  EXPECT_FALSE(fs::exists(psw::temporary_sibling(target)));
}

TEST_F(OutputTest, StagedFolderRefusesToReplaceAForeignFolder) {
  const fs::path target = root_ / "home";
  psw::save_text(target / "thesis.tex", "precious\n");
  EXPECT_THROW(psw::StagedFolder(target, "marker"), psw::InputError);
  EXPECT_EQ(read(target / "thesis.tex"), "precious\n");
  psw::save_text(root_ / "file", "x");
  EXPECT_THROW(psw::StagedFolder(root_ / "file", "marker"), psw::InputError);
}

TEST_F(OutputTest, StagedFileRenamesRegularFilesAndWritesDevicesInPlace) {
  const fs::path target = root_ / "trace.json";
  psw::save_text(target, "old\n");
  {
    psw::StagedFile file(target);
    EXPECT_NE(file.path(), target);
    psw::save_text(file.path(), "new\n");
    EXPECT_EQ(read(target), "old\n");  // until commit
  }
  EXPECT_EQ(read(target), "old\n");  // not committed: the older file stays
  {
    psw::StagedFile file(target);
    psw::save_text(file.path(), "new\n");
    file.commit();
  }
  EXPECT_EQ(read(target), "new\n");
  if (fs::exists("/dev/null")) {
    psw::StagedFile device("/dev/null");
    EXPECT_EQ(device.path(), fs::path("/dev/null"));
  }
}

// The pid of a process that has ended (forked, exited, reaped): no process has it now.
pid_t dead_pid() {
  const pid_t child = ::fork();
  if (child == 0) ::_exit(0);
  int status = 0;
  ::waitpid(child, &status, 0);
  return child;
}

// Note [Interrupted runs]: a run killed with SIGKILL leaves DIR.tmp-<pid>; the next run into DIR
// removes it (and a moved-aside DIR.old-<pid> once DIR is back), but never a live process's
// folder, another target's, or a name that is not <target>.tmp-<digits>.
TEST_F(OutputTest, StagingOfDeadProcessesIsRemovedByTheNextRun) {
  const fs::path target = root_ / "run";
  const std::string dead = std::to_string(dead_pid());
  const fs::path stale = root_ / ("run.tmp-" + dead);
  const fs::path stale_old = root_ / ("run.old-" + dead);
  const fs::path live = root_ / ("run.tmp-" + std::to_string(::getppid()));  // our parent is alive
  const fs::path other = root_ / ("other.tmp-" + dead);
  const fs::path not_a_pid = root_ / "run.tmp-12ab";
  for (const fs::path& p : {stale, stale_old, live, other, not_a_pid}) psw::save_text(p / "requests.csv", "x\n");
  psw::save_text(target / "marker", "old\n");
  {
    psw::StagedFolder folder(target, "marker");
    EXPECT_FALSE(fs::exists(stale));
    EXPECT_FALSE(fs::exists(stale_old));
    EXPECT_TRUE(fs::exists(live));
    EXPECT_TRUE(fs::exists(other));
    EXPECT_TRUE(fs::exists(not_a_pid));
    psw::save_text(folder.path() / "marker", "new\n");
    folder.commit();
  }
  EXPECT_EQ(read(target / "marker"), "new\n");
}

// A child forked without exec inherits the stop handler but not the thread that cleans up:
// a signal to the child ends the child alone, and the parent's staging folder stays.
TEST_F(OutputTest, SignalToAForkedChildLeavesTheParentsStaging) {
  psw::StagedFolder folder(root_ / "run", "marker");  // installs the handler
  const pid_t child = ::fork();
  if (child == 0) {
    ::sleep(10);  // the signal ends it sooner; bounded, should the parent die instead
    ::_exit(0);
  }
  ASSERT_GT(child, 0);
  ::kill(child, SIGTERM);
  int status = 0;
  ::waitpid(child, &status, 0);
  EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGTERM) << status;
  ::usleep(200'000);  // time for a wrongly woken cleanup to act
  EXPECT_TRUE(fs::exists(folder.path()));
}

TEST_F(OutputTest, MovedAsideRunWithoutItsTargetIsKept) {
  // Killed between moving DIR aside and moving the new run in: DIR.old-<pid> is the only copy.
  const fs::path old = root_ / ("run.old-" + std::to_string(dead_pid()));
  psw::save_text(old / "marker", "old\n");
  EXPECT_TRUE(psw::remove_stale_staging(root_ / "run").empty());
  EXPECT_TRUE(fs::exists(old));
}

TEST_F(OutputTest, StaleTemporaryFileOfADeadProcessIsRemoved) {
  const fs::path target = root_ / "trace.json";
  const fs::path stale = root_ / ("trace.json.tmp-" + std::to_string(dead_pid()));
  psw::save_text(stale, "partial");
  {
    psw::StagedFile file(target);
    EXPECT_FALSE(fs::exists(stale));
  }
}

// Generated files name paths relative to where they lie (Note [Resolved configs]).
TEST_F(OutputTest, PathRelativeToAFolder) {
  psw::save_text(root_ / "configs" / "hw.yaml", "x");
  fs::create_directories(root_ / "results" / "run");
  EXPECT_EQ(psw::path_relative_to(root_ / "configs" / "hw.yaml", root_ / "results" / "run"), "../../configs/hw.yaml");
  EXPECT_EQ(psw::path_relative_to(root_ / "results" / "run" / "a.csv", root_ / "results" / "run"), "a.csv");
  // Through a symbolic link to the folder: the `..` steps are the link target's.
  fs::create_directory_symlink(root_ / "results" / "run", root_ / "link");
  EXPECT_EQ(psw::path_relative_to(root_ / "configs" / "hw.yaml", root_ / "link"), "../../configs/hw.yaml");
}

}  // namespace
