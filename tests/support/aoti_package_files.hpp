#pragma once
// The AOTInductor packages of tests/exec_cuda/make_aoti_package.py, for the GPU tests that load
// or serve one (Note [AOTInductor packages]).
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <stdexcept>
#include <string>
#include <system_error>

#include "psw/common/output.hpp"

namespace psw::test_support {

// The script's files (three small models compiled: about 100 s on an H100 host), made once for
// every test process of every test binary (ctest runs each test in its own) and the script's
// version: made aside, then renamed into place, so that a process never sees half of them. POSIX
// calls, not std::filesystem's (Note on remove_tree in psw/common/output.hpp: the wheel's LibTorch).
inline const std::filesystem::path& aoti_package_dir() {
  namespace fs = std::filesystem;
  static const fs::path dir = [] {
    const fs::path script = fs::path(PSW_SOURCE_DIR) / "tests/exec_cuda/make_aoti_package.py";
    struct stat info {};
    if (::stat(script.c_str(), &info) != 0) throw std::runtime_error(script.string() + ": missing");
    const fs::path d = fs::temp_directory_path() / ("psw-aoti-packages-" + std::to_string(info.st_mtime));
    if (::stat(d.c_str(), &info) == 0 && S_ISDIR(info.st_mode)) return d;
    const fs::path aside = d.string() + "-" + std::to_string(::getpid());
    const std::string command = "python3 " + script.string() + " " + aside.string() + " > " +
                                (fs::temp_directory_path() / "psw-aoti-make.log").string() + " 2>&1";
    if (std::system(command.c_str()) != 0) {
      throw std::runtime_error("could not make the AOTInductor packages (" + command +
                               "): the GPU host's python3 needs PyTorch 2.6 or later");
    }
    if (::rename(aside.c_str(), d.c_str()) != 0) {  // another process put its own there first: either will do
      std::error_code ec;
      remove_tree(aside, ec);
    }
    return d;
  }();
  return dir;
}

}  // namespace psw::test_support
