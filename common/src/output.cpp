#include "psw/common/output.hpp"

#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <system_error>

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

}  // namespace

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
  staging_ = temporary_sibling(target_);
  fs::remove_all(staging_, ec);  // a leftover of a killed process that had our pid
  if (!fs::create_directory(staging_, ec) || ec) {
    throw InputError(staging_.string() + ": cannot create the output folder: " +
                     (ec ? ec.message() : std::string("it exists")));
  }
}

StagedFolder::~StagedFolder() {
  if (committed_) return;
  std::error_code ec;
  fs::remove_all(staging_, ec);
}

void StagedFolder::commit() {
  PSW_CHECK(!committed_, target_.string(), ": committed twice");
  std::error_code ec;
  if (fs::exists(fs::symlink_status(target_, ec))) {
    // rename(2) cannot replace a non-empty folder: move the older run aside, then remove it.
    const fs::path old = temporary_sibling(target_, "old");
    fs::remove_all(old, ec);
    fs::rename(target_, old, ec);
    if (ec) throw Error(target_.string() + ": cannot move the earlier output aside: " + ec.message());
    fs::rename(staging_, target_, ec);
    if (ec) {
      std::error_code back;
      fs::rename(old, target_, back);
      throw Error(target_.string() + ": cannot move the new output into place: " + ec.message());
    }
    committed_ = true;
    fs::remove_all(old, ec);
    if (ec) throw Error(old.string() + ": cannot remove the earlier output: " + ec.message());
    return;
  }
  fs::rename(staging_, target_, ec);
  if (ec) throw Error(target_.string() + ": cannot move the new output into place: " + ec.message());
  committed_ = true;
}

StagedFile::StagedFile(fs::path target) : target_(std::move(target)) {
  std::error_code ec;
  const fs::file_status status = fs::symlink_status(target_, ec);
  const bool renamable = !fs::exists(status) || fs::is_regular_file(status);
  create_parent(target_);
  staging_ = renamable ? temporary_sibling(target_) : target_;
}

StagedFile::~StagedFile() {
  if (committed_ || staging_ == target_) return;
  std::error_code ec;
  fs::remove(staging_, ec);
}

void StagedFile::commit() {
  PSW_CHECK(!committed_, target_.string(), ": committed twice");
  if (staging_ != target_) {
    std::error_code ec;
    fs::rename(staging_, target_, ec);
    if (ec) throw Error(target_.string() + ": cannot move the new file into place: " + ec.message());
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
