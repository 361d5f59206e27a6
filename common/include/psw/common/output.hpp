#pragma once
// Writing outputs so that a failure is never mistaken for success, and never leaves a half
// run behind.
//
// Note [Checked writes]
// ~~~~~~~~~~~~~~~~~~~~~
// A buffered stream reports a full device (ENOSPC) or an I/O error only when it flushes, which
// for a small file is at close. Every writer here flushes and closes explicitly and checks
// each step; a failure is a psw::Error "<file>: write failed: <strerror>" (exit code 1). A file
// that cannot be opened (missing folder, no permission) is the user's input: InputError.
//
// Note [Atomic output folders]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// `psw sim --out DIR` and `psw sweep --out DIR` write into a temporary sibling folder
// `DIR.tmp-<pid>` and rename it onto DIR only once everything is written and closed; an older
// DIR is moved aside first (`DIR.old-<pid>`), then removed, so DIR holds one whole run or the
// older run, never a mix, and a failed run leaves the older DIR as it was and no temporary
// folder. An existing DIR is replaced only if it is empty or holds an earlier run of the same
// kind (its marker file), so that a mistyped --out cannot delete an unrelated folder.
// A run stopped by a signal removes its temporary folder, and a later run into the same DIR
// removes those of runs killed outright (Note [Interrupted runs] in common/src/output.cpp).

#include <cstdio>
#include <filesystem>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

namespace psw {

// Writes `text` to `path` (creating its parent folders), checked (Note [Checked writes]).
void save_text(const std::filesystem::path& path, const std::string& text);

// A file written in pieces, each write checked; close() flushes and checks.
class OutputFile {
 public:
  explicit OutputFile(std::filesystem::path path);  // InputError when it cannot be opened
  ~OutputFile();                                    // closes unchecked (error paths only)
  OutputFile(const OutputFile&) = delete;
  OutputFile& operator=(const OutputFile&) = delete;

  void write(std::string_view data);  // Error naming the file and the system's reason
  void close();                       // flush and close, checked; idempotent
  const std::filesystem::path& path() const { return path_; }

 private:
  [[noreturn]] void fail(int error);
  std::filesystem::path path_;
  std::FILE* file_ = nullptr;
};

// A folder written under a temporary name and renamed onto its target on commit()
// (Note [Atomic output folders]). `marker`: the file whose presence shows that an existing
// target is an earlier output of this kind and may be replaced.
class StagedFolder {
 public:
  StagedFolder(std::filesystem::path target, std::string marker);
  ~StagedFolder();  // removes the temporary folder unless committed
  StagedFolder(const StagedFolder&) = delete;
  StagedFolder& operator=(const StagedFolder&) = delete;

  const std::filesystem::path& path() const { return staging_; }  // write here
  const std::filesystem::path& target() const { return target_; }
  void commit();

 private:
  std::filesystem::path target_;
  std::filesystem::path staging_;
  bool committed_ = false;
};

// A single file written under a temporary sibling name and renamed onto `target` on commit(),
// where that is safe: when the target is absent or a regular file. Anything else (a device
// such as /dev/null or /dev/full, a pipe, a symbolic link) is written in place.
class StagedFile {
 public:
  explicit StagedFile(std::filesystem::path target);
  ~StagedFile();  // removes the temporary file unless committed
  StagedFile(const StagedFile&) = delete;
  StagedFile& operator=(const StagedFile&) = delete;

  const std::filesystem::path& path() const { return staging_; }  // write here
  void commit();

 private:
  std::filesystem::path target_;
  std::filesystem::path staging_;
  bool committed_ = false;
};

// Removes `target`'s temporary siblings (`<target>.tmp-<pid>`, and `<target>.old-<pid>` where
// `target` exists) whose process is no longer alive on this machine: the leftovers of runs
// killed with SIGKILL or by a power cut (Note [Interrupted runs]). Returns what it removed.
// StagedFolder and StagedFile call it before they stage.
std::vector<std::filesystem::path> remove_stale_staging(const std::filesystem::path& target);

// Removes `path` and, if it is a folder, everything in it (symbolic links themselves, never what
// they point to), as std::filesystem::remove_all(path, ec) does; a missing `path` is no error.
// Written on POSIX calls because a process that loads the PyTorch wheel's LibTorch (2.5 and
// later: pytorch/pytorch#133437) may bind std::filesystem's names to the copies that library
// exports, and its remove_all called a null address on the GPU host (a GPU test's cleanup).
void remove_tree(const std::filesystem::path& path, std::error_code& ec) noexcept;

// `path` as a generated file records it: relative to the folder `base` (`..` steps included,
// symbolic links resolved on both sides), so that the file and what it names can move together
// (a clone of the project elsewhere); absolute where no relative path leads there (another
// root). Generic separators ('/').
std::string path_relative_to(const std::filesystem::path& path, const std::filesystem::path& base);

// `path` + ".tmp-<pid>" (the temporary names above).
std::filesystem::path temporary_sibling(const std::filesystem::path& path, const char* what = "tmp");

// A CSV field as RFC 4180 writes it: quoted (with inner quotes doubled) when it holds a comma,
// a quote or a line break, as is otherwise.
std::string csv_field(std::string_view value);

// A double as the JSON library prints it: the shortest text that reads back the same value
// (the number format of sweep.csv and comparison.csv).
std::string shortest_number(double value);

}  // namespace psw
