#include "psw/common/output.hpp"

#include <fcntl.h>
#include <ftw.h>
#include <pthread.h>
#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstring>
#include <mutex>
#include <system_error>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "psw/common/error.hpp"

namespace psw {

namespace fs = std::filesystem;

namespace {

// "out/" and "out" name the same folder; the rename needs the name without the slash.
fs::path without_trailing_slash(const fs::path& p) {
  fs::path normal = p.lexically_normal();
  if (!normal.has_filename() && normal.has_parent_path()) normal = normal.parent_path();
  return normal;
}

void create_parent(const fs::path& path) {
  const fs::path parent = path.parent_path();
  if (parent.empty()) return;
  std::error_code ec;
  fs::create_directories(parent, ec);
  if (ec) throw InputError(parent.string() + ": cannot create the folder: " + ec.message());
}

// Note [Interrupted runs]
// ~~~~~~~~~~~~~~~~~~~~~~~
// A run stopped by SIGINT, SIGTERM or SIGHUP (Ctrl-C, `timeout`, a batch system's time limit)
// must not leave its staging folder behind (hundreds of MB for a day's trace with requests.csv).
// Every staged path is registered while it exists. The first StagedFolder or StagedFile
// installs a handler for those signals (only where their disposition is the default: an
// ignored SIGINT, as in a background job, stays ignored, and a handler of someone else, as
// psw serve's sigwait, stays in place). The handler only writes the signal's number to a pipe
// (async-signal-safe); a thread of its own, which has the signals blocked, reads it, removes
// the registered paths under the registry's lock, restores the default disposition and raises
// the signal again, so that the process ends as killed by it (exit status 128 + signal for a
// shell). commit() renames under the same lock, so a folder is either moved into place whole
// or removed, never half of each. SIGKILL cannot be caught: a later run into the same target
// removes the staging folders of processes that are gone (remove_stale_staging).

std::mutex& staging_mutex() {
  static std::mutex* m = new std::mutex;  // never destroyed: the watcher may run at exit
  return *m;
}
std::vector<fs::path>& staging_paths() {
  static auto* paths = new std::vector<fs::path>;
  return *paths;
}
int g_signal_pipe[2] = {-1, -1};
pid_t g_signal_owner = 0;  // the process whose watcher reads the pipe
constexpr int kStopSignals[] = {SIGINT, SIGTERM, SIGHUP};

extern "C" void on_stop_signal(int signal_number) {
  const int saved = errno;
  if (::getpid() != g_signal_owner) {
    // A child forked without exec inherits the handler and the pipe, not the watcher: it
    // must not wake its parent's cleanup. It ends by the signal, as it would have.
    struct sigaction action {};
    action.sa_handler = SIG_DFL;
    sigemptyset(&action.sa_mask);
    ::sigaction(signal_number, &action, nullptr);
    ::raise(signal_number);
    errno = saved;
    return;
  }
  const auto byte = static_cast<unsigned char>(signal_number);
  [[maybe_unused]] const ssize_t n = ::write(g_signal_pipe[1], &byte, 1);
  errno = saved;
}

[[noreturn]] void watch_stop_signals() {
  unsigned char byte = 0;
  while (::read(g_signal_pipe[0], &byte, 1) != 1) {
  }
  const int signal_number = byte;
  {
    std::lock_guard<std::mutex> lock(staging_mutex());
    for (const fs::path& p : staging_paths()) {
      // The run goes on writing meanwhile: a file created during the walk makes the folder's
      // removal fail, so a few rounds.
      for (int round = 0; round < 20; ++round) {
        std::error_code ec;
        remove_tree(p, ec);
        if (!ec && !fs::exists(fs::symlink_status(p, ec))) break;
      }
    }
    staging_paths().clear();
    // The lock stays held: no commit may start now; the process ends below.
    struct sigaction action {};
    action.sa_handler = SIG_DFL;
    sigemptyset(&action.sa_mask);
    ::sigaction(signal_number, &action, nullptr);
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, signal_number);
    ::pthread_sigmask(SIG_UNBLOCK, &set, nullptr);
    ::raise(signal_number);
    ::_exit(128 + signal_number);
  }
}

void install_stop_handler() {
  static std::once_flag once;
  std::call_once(once, [] {
    if (::pipe2(g_signal_pipe, O_CLOEXEC) != 0) return;  // no cleanup on signals; the run goes on
    g_signal_owner = ::getpid();
    sigset_t block, previous;
    sigemptyset(&block);
    for (int s : kStopSignals) sigaddset(&block, s);
    ::pthread_sigmask(SIG_BLOCK, &block, &previous);  // the watcher starts with them blocked
    try {
      std::thread(watch_stop_signals).detach();
    } catch (const std::system_error&) {
      ::pthread_sigmask(SIG_SETMASK, &previous, nullptr);
      return;
    }
    ::pthread_sigmask(SIG_SETMASK, &previous, nullptr);
    for (int s : kStopSignals) {
      struct sigaction current {};
      if (::sigaction(s, nullptr, &current) != 0) continue;
      if ((current.sa_flags & SA_SIGINFO) != 0 || current.sa_handler != SIG_DFL) continue;
      struct sigaction action {};
      action.sa_handler = on_stop_signal;
      sigemptyset(&action.sa_mask);
      action.sa_flags = SA_RESTART;
      ::sigaction(s, &action, nullptr);
    }
  });
}

void register_staging(const fs::path& path) {
  install_stop_handler();
  std::lock_guard<std::mutex> lock(staging_mutex());
  staging_paths().push_back(path);
}

void unregister_staging_locked(const fs::path& path) {
  auto& paths = staging_paths();
  for (auto it = paths.begin(); it != paths.end(); ++it) {
    if (*it == path) {
      paths.erase(it);
      return;
    }
  }
}

void unregister_staging(const fs::path& path) {
  std::lock_guard<std::mutex> lock(staging_mutex());
  unregister_staging_locked(path);
}

// Whether process `pid` exists (on this machine): kill(pid, 0) fails with ESRCH only when
// there is none.
bool process_alive(long pid) {
  if (pid <= 0 || pid > 0x3fffffff) return false;
  return ::kill(static_cast<pid_t>(pid), 0) == 0 || errno != ESRCH;
}

// The pid of `name` when it is `prefix` followed by digits only, else -1.
long pid_suffix(const std::string& name, const std::string& prefix) {
  if (name.size() <= prefix.size() || name.compare(0, prefix.size(), prefix) != 0) return -1;
  long pid = 0;
  for (std::size_t i = prefix.size(); i < name.size(); ++i) {
    if (name[i] < '0' || name[i] > '9' || pid > 0x3fffffff) return -1;
    pid = pid * 10 + (name[i] - '0');
  }
  return pid;
}

}  // namespace

std::vector<fs::path> remove_stale_staging(const fs::path& target) {
  std::vector<fs::path> removed;
  const fs::path t = without_trailing_slash(target);
  const std::string name = t.filename().string();
  if (name.empty() || name == "." || name == "..") return removed;
  const fs::path parent = t.has_parent_path() ? t.parent_path() : fs::path(".");
  std::error_code ec;
  const bool target_exists = fs::exists(fs::symlink_status(t, ec));
  fs::directory_iterator it(parent, ec);
  if (ec) return removed;
  for (const fs::directory_entry& entry : it) {
    const std::string entry_name = entry.path().filename().string();
    long pid = pid_suffix(entry_name, name + ".tmp-");
    // An older run moved aside (`.old-<pid>`) is stale only once the target is in place again;
    // without the target it is the only copy of that run, and stays.
    if (pid < 0 && target_exists) pid = pid_suffix(entry_name, name + ".old-");
    if (pid < 0 || pid == static_cast<long>(::getpid()) || process_alive(pid)) continue;
    std::error_code remove_ec;
    remove_tree(entry.path(), remove_ec);
    if (!remove_ec) removed.push_back(entry.path());
  }
  return removed;
}

void remove_tree(const fs::path& path, std::error_code& ec) noexcept {
  ec.clear();
  // Depth first (a folder after its contents), not following links; a file or a link as `path`
  // is one entry.
  const auto remove_entry = [](const char* entry, const struct stat*, int kind, FTW*) -> int {
    const int status = kind == FTW_DP ? ::rmdir(entry) : ::unlink(entry);
    return status != 0 && errno != ENOENT ? errno : 0;
  };
  const int failed = ::nftw(path.c_str(), remove_entry, 16, FTW_DEPTH | FTW_PHYS);
  if (failed > 0) {
    ec.assign(failed, std::generic_category());
  } else if (failed < 0 && errno != ENOENT) {
    ec.assign(errno, std::generic_category());
  }
}

std::string path_relative_to(const fs::path& path, const fs::path& base) {
  std::error_code ec;
  const fs::path absolute = fs::absolute(path, ec).lexically_normal();
  if (ec) return path.string();
  const fs::path from = fs::weakly_canonical(fs::absolute(base, ec), ec);
  if (ec) return absolute.string();
  const fs::path to = fs::weakly_canonical(absolute, ec);
  if (ec) return absolute.string();
  if (to.root_name() != from.root_name()) return absolute.string();
  const fs::path relative = to.lexically_relative(from);
  if (relative.empty()) return absolute.string();
  return relative.generic_string();
}

fs::path temporary_sibling(const fs::path& path, const char* what) {
  fs::path p = without_trailing_slash(path);
  p += std::string(".") + what + "-" + std::to_string(::getpid());
  return p;
}

OutputFile::OutputFile(fs::path path) : path_(std::move(path)) {
  file_ = std::fopen(path_.c_str(), "wb");
  if (file_ == nullptr) {
    throw InputError(path_.string() + ": cannot open for writing: " + std::strerror(errno));
  }
}

OutputFile::~OutputFile() {
  if (file_ != nullptr) std::fclose(file_);
}

void OutputFile::fail(int error) {
  if (file_ != nullptr) std::fclose(file_);
  file_ = nullptr;
  throw Error(path_.string() + ": write failed: " + std::strerror(error));
}

void OutputFile::write(std::string_view data) {
  PSW_CHECK(file_ != nullptr, path_.string(), ": write after close");
  if (data.empty()) return;
  errno = 0;
  if (std::fwrite(data.data(), 1, data.size(), file_) != data.size()) fail(errno != 0 ? errno : EIO);
}

void OutputFile::close() {
  if (file_ == nullptr) return;
  errno = 0;
  if (std::fflush(file_) != 0 || std::ferror(file_) != 0) fail(errno != 0 ? errno : EIO);
  std::FILE* f = file_;
  file_ = nullptr;
  errno = 0;
  if (std::fclose(f) != 0) throw Error(path_.string() + ": write failed: " + std::strerror(errno != 0 ? errno : EIO));
}

void save_text(const fs::path& path, const std::string& text) {
  create_parent(path);
  OutputFile out(path);
  out.write(text);
  out.close();
}

StagedFolder::StagedFolder(fs::path target, std::string marker) : target_(without_trailing_slash(target)) {
  const std::string name = target_.filename().string();
  if (name.empty() || name == "." || name == "..") {
    throw InputError(target.string() + ": an output folder must have a name of its own (not '.', '..' or '/')");
  }
  std::error_code ec;
  const fs::file_status status = fs::symlink_status(target_, ec);
  if (fs::exists(status)) {
    if (!fs::is_directory(status)) {
      throw InputError(target_.string() + ": exists and is not a folder; refusing to replace it");
    }
    const bool empty = fs::is_empty(target_, ec);
    if (!empty && !fs::exists(target_ / marker)) {
      throw InputError(target_.string() + ": exists and is not an earlier output (it has no " + marker +
                       "); refusing to replace it: remove it or choose another --out");
    }
  }
  create_parent(target_);
  remove_stale_staging(target_);  // Note [Interrupted runs]: leftovers of killed runs
  staging_ = temporary_sibling(target_);
  remove_tree(staging_, ec);  // a leftover of a killed process that had our pid
  register_staging(staging_);
  if (!fs::create_directory(staging_, ec) || ec) {
    unregister_staging(staging_);
    throw InputError(staging_.string() + ": cannot create the output folder: " +
                     (ec ? ec.message() : std::string("it exists")));
  }
}

StagedFolder::~StagedFolder() {
  if (committed_) return;
  std::lock_guard<std::mutex> lock(staging_mutex());
  std::error_code ec;
  remove_tree(staging_, ec);
  unregister_staging_locked(staging_);
}

void StagedFolder::commit() {
  PSW_CHECK(!committed_, target_.string(), ": committed twice");
  // Note [Interrupted runs]: a signal's cleanup waits for the renames, or they for it.
  std::lock_guard<std::mutex> lock(staging_mutex());
  std::error_code ec;
  if (fs::exists(fs::symlink_status(target_, ec))) {
    // rename(2) cannot replace a non-empty folder: move the older run aside, then remove it.
    const fs::path old = temporary_sibling(target_, "old");
    remove_tree(old, ec);
    fs::rename(target_, old, ec);
    if (ec) throw Error(target_.string() + ": cannot move the earlier output aside: " + ec.message());
    fs::rename(staging_, target_, ec);
    if (ec) {
      std::error_code back;
      fs::rename(old, target_, back);
      throw Error(target_.string() + ": cannot move the new output into place: " + ec.message());
    }
    committed_ = true;
    unregister_staging_locked(staging_);
    remove_tree(old, ec);
    if (ec) throw Error(old.string() + ": cannot remove the earlier output: " + ec.message());
    return;
  }
  fs::rename(staging_, target_, ec);
  if (ec) throw Error(target_.string() + ": cannot move the new output into place: " + ec.message());
  committed_ = true;
  unregister_staging_locked(staging_);
}

StagedFile::StagedFile(fs::path target) : target_(std::move(target)) {
  std::error_code ec;
  const fs::file_status status = fs::symlink_status(target_, ec);
  const bool renamable = !fs::exists(status) || fs::is_regular_file(status);
  create_parent(target_);
  if (renamable) {
    remove_stale_staging(target_);  // Note [Interrupted runs]
    staging_ = temporary_sibling(target_);
    register_staging(staging_);
  } else {
    staging_ = target_;
  }
}

StagedFile::~StagedFile() {
  if (committed_ || staging_ == target_) return;
  std::lock_guard<std::mutex> lock(staging_mutex());
  std::error_code ec;
  fs::remove(staging_, ec);
  unregister_staging_locked(staging_);
}

void StagedFile::commit() {
  PSW_CHECK(!committed_, target_.string(), ": committed twice");
  if (staging_ != target_) {
    std::lock_guard<std::mutex> lock(staging_mutex());
    std::error_code ec;
    fs::rename(staging_, target_, ec);
    if (ec) throw Error(target_.string() + ": cannot move the new file into place: " + ec.message());
    unregister_staging_locked(staging_);
  }
  committed_ = true;
}

std::string csv_field(std::string_view value) {
  if (value.find_first_of(",\"\n\r") == std::string_view::npos) return std::string(value);
  std::string out = "\"";
  for (char c : value) {
    if (c == '"') out += '"';
    out += c;
  }
  return out + "\"";
}

std::string shortest_number(double value) { return nlohmann::json(value).dump(); }

}  // namespace psw
