// Checked writes and staged output folders (Notes [Checked writes], [Atomic output folders]).
#include <gtest/gtest.h>
#include <unistd.h>

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

}  // namespace
