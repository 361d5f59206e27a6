// libFuzzer target: psw's command line. The input is split at newlines into arguments, which
// psw's own CLI11 app (every subcommand and option, cli/app.hpp) parses; no action runs (they
// would read files, simulate or connect to servers). Parse errors are CLI11's answer to bad
// arguments (psw exits 2); anything else escaping the parser is a finding.
#include <string>
#include <vector>

#include "app.hpp"
#include "fuzz_common.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace psw::cli;
  const std::string text = psw::fuzz::text_of(data, size);
  std::vector<std::string> args;
  std::size_t start = 0;
  while (start <= text.size() && args.size() < 64) {
    const std::size_t end = text.find('\n', start);
    args.push_back(text.substr(start, end == std::string::npos ? std::string::npos : end - start));
    if (end == std::string::npos) break;
    start = end + 1;
  }
  CLI::App app{kPswDescription};
  std::map<CLI::App*, Action> actions = setup_app(app, kPswCommands);
  std::vector<std::string> reversed(args.rbegin(), args.rend());  // CLI11 takes them last first
  psw::fuzz::expect_only_input_errors([&] {
    try {
      app.parse(reversed);
    } catch (const CLI::ParseError&) {
      // CLI11's message and exit code 2 (help requests are ParseErrors too).
    }
  });
  return 0;
}
