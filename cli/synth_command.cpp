// psw synth: write a synthetic model profile of any depth.
#include <iostream>
#include <memory>

#include "commands.hpp"
#include "psw/common/config.hpp"
#include "psw/common/error.hpp"
#include "psw/common/synthetic.hpp"

namespace psw::cli {

namespace {

// The deepest profile synth writes: 100,000 layers are a YAML file of about 20 MiB, well within
// what psw reads back (64 MiB), and the optimal planner takes seconds on them; 5,000 blocks
// are at most 100,000 layers too (20 per CNN stage, 8 per transformer block).
constexpr std::size_t kMaxSynthLayers = 100'000;
constexpr std::size_t kMaxSynthBlocks = 5'000;

struct SynthOptions {
  std::string kind;
  std::size_t blocks = 0;  // transformer blocks or CNN stages
  std::size_t layers = 0;  // exact layer count instead
  int batch = 8;
  std::string out_path;
};

void run_synth(const SynthOptions& o) {
  const SyntheticKind kind = parse_synthetic_kind(o.kind);
  if ((o.blocks == 0) == (o.layers == 0)) {
    throw InputError("give exactly one of --blocks (blocks or stages) and --layers");
  }
  const ModelProfile model =
      o.layers > 0 ? make_synthetic_layers(kind, o.layers, o.batch)
                   : (kind == SyntheticKind::Transformer ? make_synthetic_transformer(o.blocks, o.batch)
                                                         : make_synthetic_cnn(o.blocks, o.batch));
  const std::string text = "# Synthetic profile written by `psw synth`.\n" + to_yaml(model);
  if (o.out_path.empty()) {
    std::cout << text;
  } else {
    save_text(o.out_path, text);
  }
}

}  // namespace

Action add_synth_command(CLI::App& app) {
  auto options = std::make_shared<SynthOptions>();
  CLI::App* cmd = app.add_subcommand("synth", "Write a synthetic model profile (transformer or CNN) of any depth");
  cmd->add_option("--kind", options->kind, "transformer | cnn")->required();
  cmd->add_option("--blocks", options->blocks, "Transformer blocks, or CNN stages")
      ->check(CLI::Range(std::size_t{1}, kMaxSynthBlocks));
  cmd->add_option("--layers", options->layers, "Exact number of layers")->check(CLI::Range(std::size_t{1}, kMaxSynthLayers));
  cmd->add_option("--batch", options->batch, "Batch size")->check(CLI::Range(1, 1 << 20))->capture_default_str();
  cmd->add_option("--out", options->out_path, "Output YAML (standard output if omitted)");
  return [options] { run_synth(*options); };
}

}  // namespace psw::cli
