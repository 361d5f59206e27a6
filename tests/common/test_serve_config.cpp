// psw serve's config (serve_config.hpp): the shipped files, the models' dtypes and decoders, and
// where their profiles are looked up. The errors of bad files are the cli tests' (bad_serve.*,
// tests/data/bad-serve/).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "input_error.hpp"
#include "psw/common/serve_config.hpp"

namespace psw {
namespace {

using test_support::input_error_of;

const std::filesystem::path kRoot = PSW_SOURCE_DIR;

TEST(ServeConfig, EveryShippedConfigParsesAndNamesProfilesThatExist) {
  int files = 0;
  for (const auto& entry : std::filesystem::directory_iterator(kRoot / "configs/serve")) {
    if (entry.path().extension() != ".yaml") continue;
    ++files;
    const ServeConfig config = load_serve_config(entry.path());
    EXPECT_TRUE(std::filesystem::is_regular_file(config.hardware)) << entry.path();
    for (const auto& model : config.models) {
      EXPECT_TRUE(std::filesystem::is_regular_file(config.profile_path(model)))
          << entry.path() << ": " << config.profile_path(model);
      if (model.decoder) {
        EXPECT_TRUE(std::filesystem::is_regular_file(model.decoder_file)) << entry.path();
      }
    }
  }
  EXPECT_GE(files, 3);
}

// Note [Repository load]: a model entry given to a running server is read as the config's own
// entries are, its paths against the config's folder, its errors naming the load and the key.
TEST(ServeConfig, AModelEntryParsesAsTheConfigsOwn) {
  const ServeConfig config = load_serve_config(kRoot / "configs/serve/host-small.yaml");
  const ServedModelConfig json = parse_served_model_entry(config, R"({"name": "resnet152", "batch": 2, "dtype": "bf16"})", "load");
  EXPECT_EQ(json.name, "resnet152");
  EXPECT_EQ(json.batch, 2);
  EXPECT_EQ(json.dtype, "bf16");
  const ServedModelConfig yaml = parse_served_model_entry(config, "name: llama-tiny\ndecoder: ../zoo/llama-tiny.yaml\n", "load");
  ASSERT_TRUE(yaml.decoder.has_value());
  EXPECT_EQ(yaml.decoder_file, (kRoot / "configs/zoo/llama-tiny.yaml").lexically_normal());
  const auto expect_error = [&](const std::string& text, const std::string& origin, const std::string& part) {
    const std::string message = input_error_of([&] { parse_served_model_entry(config, text, origin); });
    EXPECT_NE(message.find(part), std::string::npos) << message;
  };
  expect_error("name: x\nwidth: 3\n", "the load of 'x'", "the load of 'x'");
  expect_error("name: x\nwidth: 3\n", "load", "width");
  expect_error("[1, 2]", "load", "load:1: expected a mapping of keys at the top level");
  expect_error("name: x\nbatch: 0\n", "load", "batch");
  EXPECT_TRUE(repository_load_refusal(Mechanism::PipeSwitch).empty());
  EXPECT_NE(repository_load_refusal(Mechanism::UnifiedMemory).find("managed memory"), std::string::npos);
  EXPECT_NE(repository_load_refusal(Mechanism::NoIpcOptimization).find("per-group handles"), std::string::npos);
}

TEST(ServeConfig, DecodersInBf16ServeAPromptOfTheirLength) {
  const ServeConfig config = load_serve_config(kRoot / "configs/serve/h200-llm.yaml");
  ASSERT_EQ(config.models.size(), 3u);
  const ServedModelConfig& eight = config.models[1];
  EXPECT_EQ(eight.name, "llama-8b");
  EXPECT_EQ(eight.dtype, "bf16");
  ASSERT_TRUE(eight.decoder.has_value());
  EXPECT_EQ(eight.decoder->vocabulary, 128256);
  EXPECT_EQ(eight.prompt_tokens, 512);
  EXPECT_EQ(eight.model_argument(), (kRoot / "configs/zoo/llama-8b.yaml").lexically_normal().string());
  EXPECT_EQ(config.profile_path(eight), (kRoot / "configs/models/h200/bf16/llama-8b.yaml").lexically_normal());
  // A built-in model in fp32: its name, its profile at the folder's top.
  const ServedModelConfig& resnet = config.models[2];
  EXPECT_FALSE(resnet.decoder.has_value());
  EXPECT_EQ(resnet.dtype, "fp32");
  EXPECT_EQ(resnet.prompt_tokens, 0);
  EXPECT_EQ(resnet.model_argument(), "resnet152");
  EXPECT_EQ(config.profile_path(resnet), (kRoot / "configs/models/h200/resnet152.yaml").lexically_normal());
}

TEST(ServeConfig, ADecodersPromptDefaultsToTheExampleLengthWithinItsPositions) {
  const std::filesystem::path origin = kRoot / "configs/serve/inline.yaml";
  const ServeConfig config = parse_serve_config(R"(hardware: ../hardware/h200-pcie5.yaml
profiles: ../models/h200
models:
  - name: llama-tiny
    decoder: ../zoo/llama-tiny.yaml
)",
                                                origin);
  EXPECT_EQ(config.models.at(0).prompt_tokens, 128);
  EXPECT_EQ(config.models.at(0).dtype, "fp32");
  // A prompt leaves one position for the first generated token: llama-tiny holds 256.
  const std::string too_long = input_error_of([&] {
    parse_serve_config(R"(hardware: ../hardware/h200-pcie5.yaml
profiles: ../models/h200
models:
  - name: llama-tiny
    decoder: ../zoo/llama-tiny.yaml
    prompt_tokens: 256
)",
                       origin);
  });
  EXPECT_NE(too_long.find("inline.yaml:6: key 'models[0].prompt_tokens': must be between 1 and 255, got 256"),
            std::string::npos)
      << too_long;
}

// Note [Prompt buckets]: by default powers of two up to the longest prompt; given, ascending
// and ending at the longest; not for models that take inputs of a fixed size.
TEST(ServeConfig, PromptBucketsAscendToTheLongestPrompt) {
  const std::filesystem::path origin = kRoot / "configs/serve/inline.yaml";
  const std::string head = R"(hardware: ../hardware/h200-pcie5.yaml
profiles: ../models/h200
models:
  - name: llama-tiny
    decoder: ../zoo/llama-tiny.yaml
)";
  EXPECT_EQ(parse_serve_config(head, origin).models.at(0).prompt_buckets,
            (std::vector<std::int64_t>{16, 32, 64, 128, 255}));
  EXPECT_EQ(parse_serve_config(head + "    prompt_buckets: [8, 255]\n", origin).models.at(0).prompt_buckets,
            (std::vector<std::int64_t>{8, 255}));
  const auto error = [&](const std::string& extra) {
    return input_error_of([&] { parse_serve_config(head + extra, origin); });
  };
  EXPECT_NE(error("    prompt_buckets: [64, 32, 255]\n").find("prompt_buckets[1]': the buckets must ascend: 32 follows 64"),
            std::string::npos);
  EXPECT_NE(error("    prompt_buckets: [64, 128]\n").find("the last bucket must be the longest prompt the decoder "
                                                              "serves, 255"),
            std::string::npos);
  EXPECT_NE(error("    prompt_buckets: [0, 255]\n").find("prompt_buckets[0]': must be between 1 and 255"),
            std::string::npos);
  EXPECT_NE(error("    prompt_buckets: []\n").find("the list is empty"), std::string::npos);
  const std::string fixed = input_error_of([&] {
    parse_serve_config(R"(hardware: ../hardware/h200-pcie5.yaml
profiles: ../models/h200
models:
  - name: resnet152
    prompt_buckets: [16]
)",
                       origin);
  });
  EXPECT_NE(fixed.find("prompt_buckets is for decoders"), std::string::npos) << fixed;
}

// A serve config with one served model and a training job, for the tests of its training keys
// (append them, two spaces in), read as if from configs/serve/.
const std::filesystem::path kInlineConfig = kRoot / "configs/serve/inline.yaml";
const std::string kTrainingHead = R"(hardware: ../hardware/h200-pcie5.yaml
profiles: ../models/h200
models:
  - name: bert_base
training:
  model: resnet152
)";

// Note [Training checkpoint]: the paths against the config's folder; a resume_from file that is
// not there, or a checkpoint folder that is not, refused at parse.
TEST(ServeConfig, TrainingCheckpointPathsAreTheConfigsAndChecked) {
  const std::filesystem::path& origin = kInlineConfig;
  const std::string& head = kTrainingHead;
  const ServeConfig config =
      parse_serve_config(head + "  checkpoint: job.safetensors\n  resume_from: ../zoo/llama-tiny.yaml\n", origin);
  EXPECT_EQ(config.training->checkpoint, kRoot / "configs/serve/job.safetensors");
  EXPECT_EQ(config.training->resume_from, kRoot / "configs/zoo/llama-tiny.yaml");
  EXPECT_NE(input_error_of([&] { parse_serve_config(head + "  resume_from: nowhere.safetensors\n", origin); })
                .find("key 'training.resume_from': no such file"),
            std::string::npos);
  EXPECT_NE(input_error_of([&] { parse_serve_config(head + "  checkpoint: no/such/folder/job.safetensors\n", origin); })
                .find("does not exist"),
            std::string::npos);
  EXPECT_NE(input_error_of([&] { parse_serve_config(head + "  dataset: nowhere.safetensors\n", origin); })
                .find("key 'training.dataset': no such file"),
            std::string::npos);
  // The user's weights: a file that is there, and not beside a checkpoint to resume from.
  EXPECT_EQ(parse_serve_config(head + "  weights: ../zoo/llama-tiny.yaml\n", origin).training->weights,
            kRoot / "configs/zoo/llama-tiny.yaml");
  EXPECT_NE(input_error_of([&] { parse_serve_config(head + "  weights: nowhere.safetensors\n", origin); })
                .find("key 'training.weights': no such file"),
            std::string::npos);
  EXPECT_NE(input_error_of([&] {
              parse_serve_config(head + "  resume_from: ../zoo/llama-tiny.yaml\n  weights: ../zoo/llama-tiny.yaml\n", origin);
            }).find("give weights or resume_from, not both"),
            std::string::npos);
}

// Note [Rehearsal]: on unless the config says false.
TEST(ServeConfig, TheTrainingRehearsalIsOnUnlessTurnedOff) {
  EXPECT_TRUE(parse_serve_config(kTrainingHead, kInlineConfig).training->rehearse);
  EXPECT_FALSE(parse_serve_config(kTrainingHead + "  rehearse: false\n", kInlineConfig).training->rehearse);
  EXPECT_THROW(parse_serve_config(kTrainingHead + "  rehearse: 2\n", kInlineConfig), InputError);
}

// Note [Device memory limit]: bytes, 0 (the default) for no limit; a negative one is refused,
// naming the key.
TEST(ServeConfig, TheDeviceMemoryLimitIsBytesOrNone) {
  const std::filesystem::path origin = kRoot / "configs/serve/inline.yaml";
  const std::string head = "hardware: ../hardware/h200-pcie5.yaml\nprofiles: ../models\nmodels:\n  - name: bert_tiny\n";
  EXPECT_EQ(parse_serve_config(head, origin).device_memory_bytes, 0);
  EXPECT_EQ(parse_serve_config(head + "device_memory_bytes: 300000000\n", origin).device_memory_bytes, 300'000'000);
  EXPECT_NE(input_error_of([&] { parse_serve_config(head + "device_memory_bytes: -1\n", origin); })
                .find("device_memory_bytes"),
            std::string::npos);
  EXPECT_NE(input_error_of([&] { parse_serve_config(head + "device_memory_bytes: 8GiB\n", origin); })
                .find("device_memory_bytes"),
            std::string::npos);
}

// Note [Raw inputs received in place]: the front end's staging slots, four unless set, none at 0.
TEST(ServeConfig, TheInputStagingSlotsAreACountOrNone) {
  const std::filesystem::path origin = kRoot / "configs/serve/inline.yaml";
  const std::string head = "hardware: ../hardware/h200-pcie5.yaml\nprofiles: ../models\nmodels:\n  - name: bert_tiny\n";
  EXPECT_EQ(parse_serve_config(head, origin).input_staging_slots, 4);
  EXPECT_EQ(parse_serve_config(head + "input_staging_slots: 0\n", origin).input_staging_slots, 0);
  for (const char* bad : {"input_staging_slots: -1\n", "input_staging_slots: 65\n", "input_staging_slots: many\n"}) {
    EXPECT_NE(input_error_of([&] { parse_serve_config(head + bad, origin); }).find("input_staging_slots"),
              std::string::npos)
        << bad;
  }
}

// Note [CPU wake-up latency]: held only where the config asks, in microseconds from 0.
TEST(ServeConfig, TheCpuWakeupLatencyIsHeldOnlyWhereAsked) {
  const std::filesystem::path origin = kRoot / "configs/serve/inline.yaml";
  const std::string head = "hardware: ../hardware/h200-pcie5.yaml\nprofiles: ../models\nmodels:\n  - name: bert_tiny\n";
  EXPECT_FALSE(parse_serve_config(head, origin).cpu_wakeup_latency_us.has_value());
  EXPECT_EQ(parse_serve_config(head + "cpu_wakeup_latency_us: 0\n", origin).cpu_wakeup_latency_us, 0);
  EXPECT_EQ(parse_serve_config(head + "cpu_wakeup_latency_us: 20\n", origin).cpu_wakeup_latency_us, 20);
  for (const char* bad : {"cpu_wakeup_latency_us: -1\n", "cpu_wakeup_latency_us: 1000001\n", "cpu_wakeup_latency_us: low\n"}) {
    EXPECT_NE(input_error_of([&] { parse_serve_config(head + bad, origin); }).find("cpu_wakeup_latency_us"),
              std::string::npos)
        << bad;
  }
}

// Note [TorchScript models]: a user's file served under its stem, with its input's shape; the
// keys are refused elsewhere and mistakes named.
TEST(ServeConfig, ATorchScriptModelNamesItsFileAndInput) {
  const std::filesystem::path dir = std::filesystem::temp_directory_path() / ("psw-ts-config-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  std::ofstream(dir / "mynet.pt") << "x";  // only its existence is read here
  const std::filesystem::path origin = dir / "serve.yaml";
  const std::string head = "hardware: " + (kRoot / "configs/hardware/h200-pcie5.yaml").string() +
                           "\nprofiles: " + (kRoot / "configs/models/h200").string() + "\nmodels:\n";
  const ServeConfig config =
      parse_serve_config(head + "  - {name: mynet, torchscript: mynet.pt, input_shape: [3, 8, 8], input_dtype: fp16}\n", origin);
  EXPECT_EQ(config.models.at(0).torchscript_file, dir / "mynet.pt");
  EXPECT_EQ(config.models.at(0).model_argument(), (dir / "mynet.pt").string());
  ASSERT_EQ(config.models.at(0).inputs.size(), 1u);
  EXPECT_EQ(config.models.at(0).inputs[0].name, "input");
  EXPECT_EQ(config.models.at(0).inputs[0].shape, (std::vector<std::int64_t>{3, 8, 8}));
  EXPECT_EQ(config.models.at(0).inputs[0].dtype, "fp16");
  // Note [Several inputs]: named, in the forward's order.
  const ServeConfig two = parse_serve_config(
      head + "  - name: mynet\n    torchscript: mynet.pt\n    inputs:\n      - {name: features, shape: [6]}\n"
             "      - {name: ids, shape: [4], dtype: int64, id_bound: 512}\n",
      origin);
  ASSERT_EQ(two.models.at(0).inputs.size(), 2u);
  EXPECT_EQ(two.models.at(0).inputs[0].name, "features");
  EXPECT_EQ(two.models.at(0).inputs[0].dtype, "fp32");
  EXPECT_EQ(two.models.at(0).inputs[1].shape, (std::vector<std::int64_t>{4}));
  EXPECT_EQ(two.models.at(0).inputs[1].dtype, "int64");
  EXPECT_EQ(two.models.at(0).inputs[1].id_bound, 512);
  EXPECT_EQ(two.models.at(0).inputs[0].id_bound, 0);
  EXPECT_EQ(parse_serve_config(head + "  - {name: mynet, torchscript: mynet.pt, input_shape: [8], input_dtype: int64, "
                                      "input_id_bound: 100}\n",
                               origin)
                .models.at(0)
                .inputs[0]
                .id_bound,
            100);
  const auto error = [&](const std::string& entry) {
    return input_error_of([&] { parse_serve_config(head + entry, origin); });
  };
  EXPECT_NE(error("  - {name: other, torchscript: mynet.pt, input_shape: [3]}\n").find("the file's stem 'mynet' is not"),
            std::string::npos);
  EXPECT_NE(error("  - {name: mynet, torchscript: mynet.pt}\n").find("input_shape"), std::string::npos);
  EXPECT_NE(error("  - {name: mynet, torchscript: mynet.pt, input_shape: [0]}\n").find("input_shape[0]"),
            std::string::npos);
  EXPECT_NE(error("  - {name: gone, torchscript: gone.pt, input_shape: [3]}\n").find("no such file"), std::string::npos);
  EXPECT_NE(error("  - {name: resnet152, input_shape: [3]}\n").find("input_shape is for TorchScript models"),
            std::string::npos);
  // Note [Uncaptured switch]: off unless asked for, and for TorchScript models only.
  EXPECT_FALSE(parse_serve_config(head + "  - {name: mynet, torchscript: mynet.pt, input_shape: [8]}\n", origin)
                   .models.at(0)
                   .allow_uncaptured);
  EXPECT_TRUE(parse_serve_config(head + "  - {name: mynet, torchscript: mynet.pt, input_shape: [8], allow_uncaptured: true}\n",
                                 origin)
                  .models.at(0)
                  .allow_uncaptured);
  EXPECT_NE(error("  - {name: resnet152, allow_uncaptured: true}\n").find("allow_uncaptured is for TorchScript models"),
            std::string::npos);
  EXPECT_EQ(parse_serve_config(head + "  - {name: mynet, torchscript: mynet.pt, input_shape: [8], output_shape: [10, 2]}\n",
                               origin)
                .models.at(0)
                .output_shape,
            (std::vector<std::int64_t>{10, 2}));
  EXPECT_NE(error("  - {name: resnet152, output_shape: [1000]}\n").find("output_shape is for TorchScript models"),
            std::string::npos);
  EXPECT_NE(error("  - {name: mynet, torchscript: mynet.pt, input_shape: [8], output_shape: [0]}\n").find("output_shape[0]"),
            std::string::npos);
  EXPECT_NE(error("  - {name: mynet, torchscript: mynet.pt, input_shape: [8], allow_uncaptured: maybe}\n")
                .find("allow_uncaptured"),
            std::string::npos);
  EXPECT_NE(error("  - {name: mynet, torchscript: mynet.pt, inputs: [{name: a, shape: [1]}, {name: a, shape: [2]}]}\n")
                .find("input 'a' is listed twice"),
            std::string::npos);
  EXPECT_NE(error("  - {name: mynet, torchscript: mynet.pt, input_shape: [3], inputs: [{name: a, shape: [1]}]}\n")
                .find("give inputs or input_shape, not both"),
            std::string::npos);
  EXPECT_NE(error("  - {name: mynet, torchscript: mynet.pt, inputs: [{name: a, shape: [1], dtype: int8}]}\n")
                .find("key 'models[0].inputs[0].dtype'"),
            std::string::npos);
  EXPECT_NE(error("  - {name: mynet, torchscript: mynet.pt, inputs: [{name: a, shape: [1], id_bound: 5}]}\n")
                .find("an id bound is for int64 inputs, not fp32"),
            std::string::npos);
  EXPECT_NE(error("  - {name: mynet, torchscript: mynet.pt, inputs: []}\n").find("key 'models[0].inputs': the list is empty"), std::string::npos);
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace psw
