// The strict YAML loader (common/src/config.cpp): shipped profiles load and round-trip
// through to_yaml, their headline numbers are what their headers say, and bad input is
// an InputError naming the origin, the line and the key.
#include <gtest/gtest.h>

#include <cctype>
#include <cmath>
#include <filesystem>
#include <set>
#include <string>
#include <vector>

#include "psw/common/config.hpp"
#include "psw/common/serving_profile.hpp"
#include "psw/common/error.hpp"
#include "input_error.hpp"

namespace psw {
namespace {

const std::vector<std::string> kShippedModels = {"resnet152", "inception_v3", "bert_base"};
const std::vector<std::string> kShippedHardware = {"h200-pcie5", "h200-pcie5-nvlink", "t4-pcie3-x8",
                                                   "v100-pcie3-x16"};

std::filesystem::path model_path(const std::string& name) {
  return std::filesystem::path(PSW_SOURCE_DIR) / "configs" / "models" / (name + ".yaml");
}
std::filesystem::path hardware_path(const std::string& name) {
  return std::filesystem::path(PSW_SOURCE_DIR) / "configs" / "hardware" / (name + ".yaml");
}

void expect_same_source(const SourceInfo& a, const SourceInfo& b) {
  EXPECT_EQ(a.kind, b.kind);
  EXPECT_EQ(a.note, b.note);
  EXPECT_EQ(a.device, b.device);
  EXPECT_EQ(a.date, b.date);
  EXPECT_EQ(a.versions, b.versions);
}

void expect_same_model(const ModelProfile& a, const ModelProfile& b) {
  EXPECT_EQ(a.name, b.name);
  EXPECT_EQ(a.batch, b.batch);
  EXPECT_EQ(a.dtype, b.dtype);
  expect_same_source(a.source, b.source);
  ASSERT_EQ(a.layers.size(), b.layers.size());
  for (std::size_t i = 0; i < a.layers.size(); ++i) {
    SCOPED_TRACE("layer " + std::to_string(i) + " (" + a.layers[i].name + ")");
    const LayerProfile& x = a.layers[i];
    const LayerProfile& y = b.layers[i];
    EXPECT_EQ(x.name, y.name);
    EXPECT_EQ(x.kind, y.kind);
    EXPECT_EQ(x.param_bytes, y.param_bytes);
    EXPECT_EQ(x.activation_bytes, y.activation_bytes);
    EXPECT_EQ(x.training_only, y.training_only);
    EXPECT_EQ(x.forward_flops, y.forward_flops);
    EXPECT_EQ(x.forward_memory_bytes, y.forward_memory_bytes);
    EXPECT_EQ(x.backward_flops, y.backward_flops);
    EXPECT_EQ(x.backward_memory_bytes, y.backward_memory_bytes);
    EXPECT_EQ(x.forward_time, y.forward_time);
    EXPECT_EQ(x.backward_time, y.backward_time);
  }
}

void expect_same_link(const LinkCost& a, const LinkCost& b) {
  EXPECT_EQ(a.copy_fixed, b.copy_fixed);
  EXPECT_EQ(a.bandwidth, b.bandwidth);
}

void expect_same_hardware(const HardwareProfile& a, const HardwareProfile& b) {
  EXPECT_EQ(a.name, b.name);
  EXPECT_EQ(a.gpu_name, b.gpu_name);
  EXPECT_EQ(a.gpu_memory_bytes, b.gpu_memory_bytes);
  expect_same_source(a.source, b.source);
  expect_same_link(a.pinned, b.pinned);
  expect_same_link(a.pageable, b.pageable);
  EXPECT_EQ(a.group_sync, b.group_sync);
  EXPECT_EQ(a.compute.flops_per_second, b.compute.flops_per_second);
  EXPECT_EQ(a.compute.conv_flops_per_second, b.compute.conv_flops_per_second);
  EXPECT_EQ(a.compute.memory_bandwidth, b.compute.memory_bandwidth);
  EXPECT_EQ(a.compute.kernel_overhead, b.compute.kernel_overhead);
  EXPECT_EQ(a.cuda_context_create, b.cuda_context_create);
  EXPECT_EQ(a.process_start, b.process_start);
  EXPECT_EQ(a.framework_start, b.framework_start);
  EXPECT_EQ(a.process_kill, b.process_kill);
  EXPECT_EQ(a.training_abort, b.training_abort);
  EXPECT_EQ(a.first_forward, b.first_forward);
  ASSERT_EQ(a.eager_switch.size(), b.eager_switch.size());
  for (const auto& [key, host] : a.eager_switch) {
    ASSERT_TRUE(b.eager_switch.contains(key)) << key.first << " " << key.second;
    EXPECT_EQ(host.prepare, b.eager_switch.at(key).prepare);
    EXPECT_EQ(host.forward, b.eager_switch.at(key).forward);
  }
  EXPECT_EQ(a.cuda_malloc, b.cuda_malloc);
  EXPECT_EQ(a.cuda_free, b.cuda_free);
  EXPECT_EQ(a.ipc_handle_open, b.ipc_handle_open);
  EXPECT_EQ(a.mps.inference_slowdown_percent, b.mps.inference_slowdown_percent);
  EXPECT_EQ(a.mps.training_slowdown_percent, b.mps.training_slowdown_percent);
  ASSERT_EQ(a.mps.contention.size(), b.mps.contention.size());
  for (std::size_t i = 0; i < a.mps.contention.size(); ++i) {
    EXPECT_EQ(a.mps.contention[i].inference_model, b.mps.contention[i].inference_model);
    EXPECT_EQ(a.mps.contention[i].training_model, b.mps.contention[i].training_model);
    EXPECT_EQ(a.mps.contention[i].training_batch, b.mps.contention[i].training_batch);
    EXPECT_EQ(a.mps.contention[i].inference_slowdown_percent, b.mps.contention[i].inference_slowdown_percent);
  }
  EXPECT_EQ(a.unified_memory.page_bytes, b.unified_memory.page_bytes);
  EXPECT_EQ(a.unified_memory.page_fault, b.unified_memory.page_fault);
  EXPECT_EQ(a.unified_memory.migration_bandwidth, b.unified_memory.migration_bandwidth);
  ASSERT_EQ(a.time_slicing.has_value(), b.time_slicing.has_value());
  if (a.time_slicing) {
    EXPECT_EQ(a.time_slicing->context_switch, b.time_slicing->context_switch);
    EXPECT_EQ(a.time_slicing->inference_share_percent, b.time_slicing->inference_share_percent);
  }
  ASSERT_EQ(a.multi_gpu.has_value(), b.multi_gpu.has_value());
  if (a.multi_gpu) {
    EXPECT_EQ(a.multi_gpu->gpus, b.multi_gpu->gpus);
    expect_same_link(a.multi_gpu->peer_link, b.multi_gpu->peer_link);
    EXPECT_EQ(a.multi_gpu->peer_ingress, b.multi_gpu->peer_ingress);
    EXPECT_EQ(a.multi_gpu->chunk_bytes, b.multi_gpu->chunk_bytes);
    EXPECT_EQ(a.multi_gpu->helper_busy_share_percent, b.multi_gpu->helper_busy_share_percent);
    ASSERT_EQ(a.multi_gpu->helper_links.size(), b.multi_gpu->helper_links.size());
    for (std::size_t h = 0; h < a.multi_gpu->helper_links.size(); ++h) {
      expect_same_link(a.multi_gpu->helper_links[h], b.multi_gpu->helper_links[h]);
    }
  }
}

using test_support::input_error_of;

std::string model_error(const std::string& text) {
  return input_error_of([&] { parse_model_profile(text, "bad.yaml"); });
}
std::string hardware_error(const std::string& text) {
  return input_error_of([&] { parse_hardware_profile(text, "hw.yaml"); });
}

// Asserts that `message` contains each of `parts`.
void expect_contains(const std::string& message, const std::vector<std::string>& parts) {
  for (const auto& part : parts) {
    EXPECT_NE(message.find(part), std::string::npos)
        << "message: " << message << "\nlacks: " << part;
  }
}

// A small valid analytic model; line 1 is `name`, line 6 the first layer.
const std::string kTinyModel =
    "name: tiny\n"
    "batch: 8\n"
    "dtype: fp32\n"
    "source: {kind: analytic}\n"
    "layers:\n"
    "  - {name: conv1, kind: conv, param_bytes: 1024, forward_flops: 100000}\n"
    "  - {name: bn1, kind: bn, param_bytes: 32, forward_flops: 1000}\n";

// The text of the shipped h200 profile: a valid hardware profile to break one key of.
std::string h200_text() {
  return to_yaml(load_hardware_profile(hardware_path("h200-pcie5-base")));
}

// Replaces the one occurrence of `from` in `text`.
std::string replace_once(std::string text, const std::string& from, const std::string& to) {
  const auto at = text.find(from);
  EXPECT_NE(at, std::string::npos) << "'" << from << "' not in the text";
  EXPECT_TRUE(at == std::string::npos || text.find(from, at + 1) == std::string::npos)
      << "'" << from << "' occurs more than once";
  if (at != std::string::npos) text.replace(at, from.size(), to);
  return text;
}

// --- round trips -------------------------------------------------------------------

// Test names allow only letters, digits and '_': h200-pcie5 becomes h200_pcie5.
std::string param_name(const testing::TestParamInfo<std::string>& info) {
  std::string name = info.param;
  for (char& c : name) {
    if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
  }
  return name;
}

class ConfigModelRoundTrip : public testing::TestWithParam<std::string> {};

TEST_P(ConfigModelRoundTrip, LoadToYamlParseIsIdentity) {
  const ModelProfile loaded = load_model_profile(model_path(GetParam()));
  const std::string text = to_yaml(loaded);
  const ModelProfile reparsed = parse_model_profile(text, GetParam() + " (to_yaml)");
  expect_same_model(loaded, reparsed);
  // Writing the reparsed profile again gives the same text.
  EXPECT_EQ(to_yaml(reparsed), text);
}

// The prefix starts with "Config" so that --gtest_filter='Config*' selects these too.
INSTANTIATE_TEST_SUITE_P(ConfigShipped, ConfigModelRoundTrip, testing::ValuesIn(kShippedModels),
                         param_name);

class ConfigHardwareRoundTrip : public testing::TestWithParam<std::string> {};

TEST_P(ConfigHardwareRoundTrip, LoadToYamlParseIsIdentity) {
  const HardwareProfile loaded = load_hardware_profile(hardware_path(GetParam()));
  const std::string text = to_yaml(loaded);
  const HardwareProfile reparsed = parse_hardware_profile(text, GetParam() + " (to_yaml)");
  expect_same_hardware(loaded, reparsed);
  EXPECT_EQ(to_yaml(reparsed), text);
}

INSTANTIATE_TEST_SUITE_P(ConfigShipped, ConfigHardwareRoundTrip, testing::ValuesIn(kShippedHardware),
                         param_name);

// --- shipped models ----------------------------------------------------------------

TEST(ConfigShippedModels, CommonFacts) {
  for (const auto& name : kShippedModels) {
    SCOPED_TRACE(name);
    const ModelProfile model = load_model_profile(model_path(name));
    EXPECT_EQ(model.name, name);
    EXPECT_EQ(model.batch, 8);
    EXPECT_EQ(model.dtype, "fp32");
    EXPECT_EQ(model.source.kind, ProfileSource::Analytic);
    std::set<std::string> names;
    for (const auto& layer : model.layers) {
      EXPECT_TRUE(names.insert(layer.name).second) << "duplicate layer name " << layer.name;
      EXPECT_GE(layer.param_bytes, 0) << layer.name;
      EXPECT_FALSE(layer.forward_time.has_value()) << layer.name;
    }
  }
}

TEST(ConfigShippedModels, ResNet152) {
  const ModelProfile model = load_model_profile(model_path("resnet152"));
  EXPECT_EQ(model.num_layers(), 311u);
  EXPECT_EQ(model.total_param_bytes(), 241'378'168);
  // 60,192,808 parameters of 4 bytes each, plus the BatchNorm buffers.
  EXPECT_GE(model.total_param_bytes(), 60'192'808 * 4);
  EXPECT_DOUBLE_EQ(std::round(static_cast<double>(model.total_param_bytes()) / 1e5) / 10, 241.4);
}

TEST(ConfigShippedModels, InceptionV3) {
  const ModelProfile model = load_model_profile(model_path("inception_v3"));
  EXPECT_EQ(model.num_layers(), 194u);
  EXPECT_EQ(model.total_param_bytes(), 108'790'720);
  int training_only = 0;
  for (const auto& layer : model.layers) training_only += layer.training_only ? 1 : 0;
  EXPECT_EQ(training_only, 5);
}

TEST(ConfigShippedModels, BertBase) {
  const ModelProfile model = load_model_profile(model_path("bert_base"));
  EXPECT_EQ(model.num_layers(), 101u);
  EXPECT_EQ(model.total_param_bytes(), 437'928'960);
  for (const auto& layer : model.layers) EXPECT_FALSE(layer.training_only) << layer.name;
}

// --- shipped hardware --------------------------------------------------------------

TEST(ConfigShippedHardware, AllLoad) {
  for (const auto& name : kShippedHardware) {
    SCOPED_TRACE(name);
    const HardwareProfile hw = load_hardware_profile(hardware_path(name));
    EXPECT_EQ(hw.name, name);
    EXPECT_FALSE(hw.gpu_name.empty());
    EXPECT_GT(hw.gpu_memory_bytes, 0);
    EXPECT_GT(hw.pinned.bandwidth.bytes_per_second(), 0);
    EXPECT_GE(hw.mps.inference_slowdown_percent, 100);
  }
}

// Every hardware profile's name is its file's stem, so that `psw compare` rows and simulation
// summaries, which carry the name, tell them apart.
TEST(ConfigShippedHardware, NamesAreTheFileStems) {
  for (const auto& entry : std::filesystem::directory_iterator(std::filesystem::path(PSW_SOURCE_DIR) / "configs" / "hardware")) {
    if (entry.path().extension() != ".yaml") continue;
    EXPECT_EQ(load_hardware_profile(entry.path()).name, entry.path().stem().string()) << entry.path();
  }
}

// Note [Parallel paths]: the several-H200 profile is the measured single-H200 one plus its
// multi_gpu section (scripts/adopt-profiles.sh composes it), so that the two cannot drift
// apart when the single one is re-measured.
TEST(ConfigShippedHardware, NvlinkProfileIsTheH200PlusPeers) {
  const HardwareProfile one = load_hardware_profile(hardware_path("h200-pcie5"));
  HardwareProfile several = load_hardware_profile(hardware_path("h200-pcie5-nvlink"));
  EXPECT_FALSE(one.multi_gpu.has_value());
  ASSERT_TRUE(several.multi_gpu.has_value());
  EXPECT_EQ(several.multi_gpu->gpus, 8);
  ASSERT_EQ(several.multi_gpu->helper_links.size(), 7u);
  for (const LinkCost& link : several.multi_gpu->helper_links) expect_same_link(link, one.pinned);
  // DESIGN.md §6: NVLink NV18 peer copies at 360-378 GB/s.
  EXPECT_GE(several.multi_gpu->peer_link.bandwidth.gb_per_second(), 360.0);
  EXPECT_LE(several.multi_gpu->peer_link.bandwidth.gb_per_second(), 378.0);
  several.multi_gpu.reset();
  several.name = one.name;
  expect_same_hardware(one, several);
}

TEST(ConfigErrors, MultiGpuSection) {
  const std::string base = to_yaml(load_hardware_profile(hardware_path("h200-pcie5")));
  const auto error = [&base](const std::string& section) {
    return input_error_of([&] { parse_hardware_profile(base + section, "bad.yaml"); });
  };
  const std::string peer = "  peer_link: {copy_fixed_ns: 5000, bandwidth_bytes_per_s: 360000000000}\n";
  const std::string valid = "multi_gpu:\n  gpus: 2\n" + peer + "  chunk_bytes: 4194304\n  helper_busy_share_percent: 50\n";
  const HardwareProfile parsed = parse_hardware_profile(base + valid, "good.yaml");
  ASSERT_TRUE(parsed.multi_gpu.has_value());
  ASSERT_EQ(parsed.multi_gpu->helper_links.size(), 1u);
  expect_same_link(parsed.multi_gpu->helper_links[0], parsed.pinned);  // the default helper link
  EXPECT_FALSE(parsed.multi_gpu->peer_ingress.has_value());            // absent: not shared
  expect_contains(error(valid + "  peer_ingress_bandwidth_bytes_per_s: 0\n"),
                  {"key 'multi_gpu.peer_ingress_bandwidth_bytes_per_s'", "got 0"});
  expect_contains(error(valid + "  helpers: 1\n"), {"bad.yaml:", "unknown key 'multi_gpu.helpers'"});
  expect_contains(error("multi_gpu:\n  gpus: 0\n" + peer + "  chunk_bytes: 4194304\n  helper_busy_share_percent: 50\n"),
                  {"key 'multi_gpu.gpus'", "must be between 1 and 64, got 0"});
  expect_contains(error("multi_gpu:\n  gpus: 2\n" + peer + "  chunk_bytes: 4194304\n  helper_busy_share_percent: 150\n"),
                  {"key 'multi_gpu.helper_busy_share_percent'", "must be between 1 and 100, got 150"});
  expect_contains(error("multi_gpu:\n  gpus: 2\n  chunk_bytes: 4194304\n  helper_busy_share_percent: 50\n"),
                  {"key 'multi_gpu.peer_link' is missing"});
  expect_contains(error(valid + "  helper_links: [{copy_fixed_ns: 1, bandwidth_bytes_per_s: 1}, "
                                "{copy_fixed_ns: 1, bandwidth_bytes_per_s: 1}]\n"),
                  {"key 'multi_gpu.helper_links'", "one host link per helper (gpus - 1 = 1), got 2"});
  expect_contains(error(valid + "  helper_links: [{copy_fixed_ns: 1, bandwidth_bytes_per_s: 0}]\n"),
                  {"key 'multi_gpu.helper_links[0].bandwidth_bytes_per_s'", "got 0"});
}

TEST(ConfigShippedHardware, H200Measurements) {
  // The base: DESIGN.md §6's numbers, measured in Python.
  const HardwareProfile base = load_hardware_profile(hardware_path("h200-pcie5-base"));
  EXPECT_EQ(base.pinned.bandwidth.bytes_per_second(), 55'400'000'000);
  EXPECT_EQ(base.pinned.copy_fixed, nanoseconds(2'600));
  EXPECT_EQ(base.cuda_context_create, milliseconds(385));
  // The project's h200 profile (scripts/adopt-profiles.sh: results/profiles/h200-calibrated.yaml):
  // the links fitted by `psw profile --link` on the H200, the costs scripts/calibrate-h200.sh
  // fitted to recorded runs, each named in the source, and every other cost from the base.
  const HardwareProfile hw = load_hardware_profile(hardware_path("h200-pcie5"));
  EXPECT_EQ(hw.name, "h200-pcie5");
  EXPECT_EQ(hw.source.kind, ProfileSource::Measured);
  EXPECT_EQ(hw.source.device, "NVIDIA H200");
  EXPECT_GT(hw.pinned.bandwidth.bytes_per_second(), 45'000'000'000);  // PCIe Gen5 x16
  EXPECT_LT(hw.pinned.bandwidth.bytes_per_second(), 64'000'000'000);
  EXPECT_LT(hw.pageable.bandwidth.bytes_per_second(), hw.pinned.bandwidth.bytes_per_second());
  for (const char* fitted : {"memory.cuda_malloc_ns", "memory.ipc_handle_open_ns",
                             "link.pageable.bandwidth_bytes_per_s",
                             // Note [Unified memory's two costs]: fitted together.
                             "unified_memory.page_fault_ns and migration_bandwidth_bytes_per_s",
                             "mps.inference_slowdown_percent", "time_slicing.inference_share_percent"}) {
    EXPECT_NE(hw.source.note.find(std::string(fitted) + " fitted by psw calibrate to results/gpu/"), std::string::npos)
        << fitted << " has no source in the note";
  }
  EXPECT_NE(hw.mps.inference_slowdown_percent, base.mps.inference_slowdown_percent);
  EXPECT_NE(hw.unified_memory.migration_bandwidth.bytes_per_second(),
            base.unified_memory.migration_bandwidth.bytes_per_second());
  // Note [Adopting a worker start]: a fresh process's start, split as the server measured it,
  // and each served model's first forward in it.
  EXPECT_NE(hw.source.note.find("startup.process_start_ns, cuda_context_ns, framework_start_ns and first_forward "
                                "adopted by psw calibrate from the server's split of "),
            std::string::npos);
  EXPECT_NE(hw.framework_start, base.framework_start);
  EXPECT_NE(hw.cuda_context_create, base.cuda_context_create);
  EXPECT_NE(hw.process_start, base.process_start);
  for (const char* model : {"resnet152", "inception_v3", "bert_base"}) {
    EXPECT_TRUE(hw.first_forward.contains(model)) << model;
  }
  // What no run has calibrated stays the base's estimate.
  EXPECT_EQ(hw.group_sync, base.group_sync);
  EXPECT_EQ(hw.worker_cleanup, base.worker_cleanup);
  EXPECT_EQ(hw.mps.training_slowdown_percent, base.mps.training_slowdown_percent);
}

TEST(ConfigShippedHardware, H200MeasuredModelsMatchTheAnalyticLayers) {
  for (const std::string name : {"resnet152", "inception_v3", "bert_base"}) {
    const ModelProfile measured = load_model_profile(std::string(PSW_SOURCE_DIR) + "/configs/models/h200/" + name + ".yaml");
    const ModelProfile analytic = load_model_profile(std::string(PSW_SOURCE_DIR) + "/configs/models/" + name + ".yaml");
    EXPECT_EQ(measured.source.kind, ProfileSource::Measured) << name;
    ASSERT_EQ(measured.layers.size(), analytic.layers.size()) << name;
    for (std::size_t i = 0; i < measured.layers.size(); ++i) {
      EXPECT_EQ(measured.layers[i].name, analytic.layers[i].name);
      EXPECT_EQ(measured.layers[i].param_bytes, analytic.layers[i].param_bytes);
      // Measured with --train: every layer has a backward time (so training can be planned).
      EXPECT_TRUE(measured.layers[i].backward_time.has_value()) << name << " " << measured.layers[i].name;
    }
  }
}

// --- measured profiles -------------------------------------------------------------

TEST(ConfigMeasuredProfile, ParsesAndRoundTrips) {
  const std::string text =
      "name: tiny_measured\n"
      "batch: 4\n"
      "dtype: fp16\n"
      "source: {kind: measured, device: X, date: \"2026-11\", versions: \"CUDA 13\"}\n"
      "layers:\n"
      "  - {name: conv1, kind: conv, param_bytes: 1024, forward_ns: 5000, backward_ns: 9000}\n"
      "  - {name: fc, kind: linear, param_bytes: 4096, forward_ns: 700, activation_bytes: 64}\n"
      "  - {name: aux, kind: linear, param_bytes: 8, forward_ns: 1, backward_ns: 2,"
      " training_only: true}\n";
  const ModelProfile model = parse_model_profile(text, "measured.yaml");
  EXPECT_EQ(model.name, "tiny_measured");
  EXPECT_EQ(model.batch, 4);
  EXPECT_EQ(model.dtype, "fp16");
  EXPECT_EQ(model.source.kind, ProfileSource::Measured);
  EXPECT_EQ(model.source.device, "X");
  EXPECT_EQ(model.source.date, "2026-11");
  EXPECT_EQ(model.source.versions, "CUDA 13");
  ASSERT_EQ(model.num_layers(), 3u);
  EXPECT_EQ(model.layers[0].forward_time, nanoseconds(5'000));
  EXPECT_EQ(model.layers[0].backward_time, nanoseconds(9'000));
  EXPECT_EQ(model.layers[1].forward_time, nanoseconds(700));
  EXPECT_FALSE(model.layers[1].backward_time.has_value());
  EXPECT_EQ(model.layers[1].activation_bytes, 64);
  EXPECT_TRUE(model.layers[2].training_only);
  EXPECT_EQ(model.total_param_bytes(), 1024 + 4096 + 8);

  const std::string written = to_yaml(model);
  const ModelProfile reparsed = parse_model_profile(written, "measured.yaml (to_yaml)");
  expect_same_model(model, reparsed);
  EXPECT_EQ(to_yaml(reparsed), written);
}

// --- errors ------------------------------------------------------------------------

TEST(ConfigErrors, ValidTinyModelParses) {
  const ModelProfile model = parse_model_profile(kTinyModel, "tiny.yaml");
  EXPECT_EQ(model.num_layers(), 2u);
  EXPECT_EQ(model.total_param_bytes(), 1056);
}

TEST(ConfigErrors, UnknownTopLevelKeyNamesItsLine) {
  const std::string message = model_error(kTinyModel + "framework: pytorch\n");
  expect_contains(message, {"bad.yaml:8:", "unknown key 'framework'"});
}

TEST(ConfigErrors, UnknownLayerKeyNamesItsPathAndLine) {
  const std::string text = replace_once(kTinyModel, "param_bytes: 32,", "param_bytes: 32, activation_byte: 1,");
  expect_contains(model_error(text), {"bad.yaml:7:", "unknown key 'layers[1].activation_byte'"});
}

TEST(ConfigErrors, NegativeValue) {
  const std::string text = replace_once(kTinyModel, "param_bytes: 32", "param_bytes: -5");
  expect_contains(model_error(text),
                  {"bad.yaml:7:", "key 'layers[1].param_bytes'", "must not be negative, got -5"});
}

TEST(ConfigErrors, NotAnInteger) {
  expect_contains(model_error(replace_once(kTinyModel, "batch: 8", "batch: 8.5")),
                  {"bad.yaml:2:", "key 'batch'", "expected an integer, got '8.5'"});
  expect_contains(model_error(replace_once(kTinyModel, "param_bytes: 1024", "param_bytes: lots")),
                  {"bad.yaml:6:", "key 'layers[0].param_bytes'", "'lots'"});
}

TEST(ConfigErrors, AbsurdNumbers) {
  expect_contains(
      model_error(replace_once(kTinyModel, "param_bytes: 1024", "param_bytes: 99999999999999999999")),
      {"bad.yaml:6:", "key 'layers[0].param_bytes'", "too large"});
  expect_contains(
      model_error(replace_once(kTinyModel, "param_bytes: 1024", "param_bytes: 1125899906842625")),
      {"bad.yaml:6:", "key 'layers[0].param_bytes'", "must be between 0 and 1125899906842624"});
}

TEST(ConfigErrors, MissingKey) {
  expect_contains(model_error(replace_once(kTinyModel, "dtype: fp32\n", "")),
                  {"bad.yaml:1:", "key 'dtype' is missing"});
  expect_contains(model_error(replace_once(kTinyModel, ", forward_flops: 1000}", "}")),
                  {"bad.yaml:7:", "key 'layers[1].forward_flops' is missing"});
}

TEST(ConfigErrors, MalformedYaml) {
  const std::string text = replace_once(kTinyModel, "forward_flops: 1000}", "forward_flops: 1000");
  expect_contains(model_error(text), {"bad.yaml:", "malformed YAML"});
  expect_contains(model_error("name: tiny\nbatch: 8\n    dtype: fp32\n"),
                  {"bad.yaml:3:", "malformed YAML"});
}

TEST(ConfigErrors, EmptyAndNonMappingDocuments) {
  expect_contains(model_error(""), {"bad.yaml: the file is empty"});
  expect_contains(model_error("# only a comment\n"), {"bad.yaml: the file is empty"});
  expect_contains(model_error("- name: tiny\n"),
                  {"bad.yaml:1:", "expected a mapping of keys at the top level"});
}

TEST(ConfigErrors, ModelSemanticChecks) {
  expect_contains(model_error(replace_once(kTinyModel, "name: bn1", "name: conv1")),
                  {"bad.yaml:7:", "key 'layers[1].name'", "duplicate layer name 'conv1'"});
  expect_contains(model_error(replace_once(kTinyModel, "fp32", "fp64")),
                  {"bad.yaml:3:", "key 'dtype'", "'fp64'"});
  expect_contains(model_error(replace_once(kTinyModel, "kind: analytic", "kind: guessed")),
                  {"bad.yaml:4:", "key 'source.kind'", "'guessed'"});
  expect_contains(model_error(replace_once(kTinyModel, "kind: analytic", "kind: measured")),
                  {"bad.yaml:4:", "key 'source.device'", "measured"});
  expect_contains(model_error(replace_once(kTinyModel, "forward_flops: 1000}",
                                           "forward_flops: 1000, training_only: maybe}")),
                  {"bad.yaml:7:", "key 'layers[1].training_only'", "expected true or false"});
  expect_contains(model_error(replace_once(kTinyModel, "batch: 8", "batch: 0")),
                  {"bad.yaml:2:", "key 'batch'", "got 0"});
  expect_contains(model_error(replace_once(kTinyModel, "  - {name: bn1, kind: bn, param_bytes: 32, forward_flops: 1000}",
                                           "  - bn1")),
                  {"bad.yaml:7:", "key 'layers[1]'", "expected a mapping"});
  expect_contains(model_error("name: tiny\nbatch: 8\ndtype: fp32\nsource: {kind: analytic}\nlayers: []\n"),
                  {"bad.yaml:5:", "key 'layers'", "the list is empty"});
}

TEST(ConfigErrors, MeasuredLayerWithoutForwardTime) {
  const std::string text =
      "name: m\nbatch: 1\ndtype: fp32\nsource: {kind: measured, device: X}\nlayers:\n"
      "  - {name: a, kind: conv, param_bytes: 1, forward_ns: 10}\n"
      "  - {name: b, kind: conv, param_bytes: 1, backward_ns: 10}\n";
  expect_contains(model_error(text), {"bad.yaml:7:", "key 'layers[1].forward_ns' is missing"});
}

TEST(ConfigErrors, HardwareNestedKeys) {
  const std::string good = h200_text();
  EXPECT_NO_THROW(parse_hardware_profile(good, "hw.yaml"));
  expect_contains(hardware_error(replace_once(good, "bandwidth_bytes_per_s: 55400000000", "bandwidth_bytes_per_s: 0")),
                  {"hw.yaml:", "key 'link.pinned.bandwidth_bytes_per_s'", "got 0"});
  expect_contains(hardware_error(replace_once(good, "group_sync_ns: 2000", "group_sync_ns: -1")),
                  {"hw.yaml:", "key 'group_sync_ns'", "must not be negative"});
  expect_contains(hardware_error(replace_once(good, "inference_slowdown_percent: 550",
                                              "inference_slowdown_percent: 50")),
                  {"hw.yaml:", "key 'mps.inference_slowdown_percent'", "got 50"});
  expect_contains(hardware_error(replace_once(good, "group_sync_ns: 2000", "group_sync_ns: 2000\nextra_ns: 1")),
                  {"hw.yaml:", "unknown key 'extra_ns'"});
}

// Note [MPS contention]: the points parse and round-trip; a repeated point and a slowdown
// below 100% are named.
TEST(ConfigErrors, MpsContention) {
  const std::string good = h200_text();
  const std::string anchor = "training_slowdown_percent: 150";
  const auto with = [&](const std::string& points) {
    return replace_once(good, anchor, anchor + "\n  contention:\n" + points);
  };
  const std::string two =
      "    - {inference_model: resnet152, training_model: resnet152, training_batch: 2, inference_slowdown_percent: 125}\n"
      "    - {inference_model: resnet152, training_model: resnet152, training_batch: 32, inference_slowdown_percent: 209}";
  const HardwareProfile parsed = parse_hardware_profile(with(two), "hw.yaml");
  ASSERT_EQ(parsed.mps.contention.size(), 2u);
  EXPECT_EQ(parsed.mps.contention[1].training_batch, 32);
  EXPECT_EQ(parsed.mps.contention[1].inference_slowdown_percent, 209);
  expect_same_hardware(parsed, parse_hardware_profile(to_yaml(parsed), "hw.yaml (to_yaml)"));
  expect_contains(hardware_error(with(two + "\n    - {inference_model: resnet152, training_model: resnet152, "
                                            "training_batch: 2, inference_slowdown_percent: 130}")),
                  {"hw.yaml:", "key 'mps.contention[2].training_batch'", "a second point of resnet152 beside resnet152",
                   "at training batch 2"});
  expect_contains(hardware_error(with("    - {inference_model: bert_base, training_model: resnet152, training_batch: 8, "
                                      "inference_slowdown_percent: 90}")),
                  {"key 'mps.contention[0].inference_slowdown_percent'", "got 90"});
  expect_contains(hardware_error(with("    - {inference_model: bert_base, training_batch: 8, "
                                      "inference_slowdown_percent: 120}")),
                  {"key 'mps.contention[0].training_model' is missing"});
}

// Note [First forward in a fresh process]: the entries parse and round-trip; a repeated model
// and a negative time are named.
TEST(ConfigErrors, FirstForward) {
  const std::string good = h200_text();
  const std::string anchor = "worker_cleanup_ns: ";
  const auto with = [&](const std::string& entries) {
    const std::size_t at = good.find(anchor);
    const std::size_t line_end = good.find('\n', at);
    std::string text = good;
    text.insert(line_end, "\n  first_forward:\n" + entries);
    return text;
  };
  const std::string two = "    - {model: resnet152, first_forward_ns: 200000000}\n"
                          "    - {model: bert_base, first_forward_ns: 90000000}";
  const HardwareProfile parsed = parse_hardware_profile(with(two), "hw.yaml");
  ASSERT_EQ(parsed.first_forward.size(), 2u);
  EXPECT_EQ(parsed.first_forward.at("resnet152"), milliseconds(200));
  expect_same_hardware(parsed, parse_hardware_profile(to_yaml(parsed), "hw.yaml (to_yaml)"));
  expect_contains(hardware_error(with(two + "\n    - {model: resnet152, first_forward_ns: 1}")),
                  {"hw.yaml:", "key 'startup.first_forward[2].model'", "a second entry of resnet152"});
  expect_contains(hardware_error(with("    - {model: resnet152, first_forward_ns: -5}")),
                  {"key 'startup.first_forward[0].first_forward_ns'"});
  expect_contains(hardware_error(with("    - {first_forward_ns: 5}")),
                  {"key 'startup.first_forward[0].model' is missing"});
}

// Note [Worker kill]: optional, round-trips, and a negative time is named.
TEST(ConfigErrors, ProcessKill) {
  const std::string good = h200_text();
  const std::string anchor = "worker_cleanup_ns: ";
  const auto with = [&](const std::string& value) {
    const std::size_t line_end = good.find('\n', good.find(anchor));
    std::string text = good;
    text.insert(line_end, "\n  process_kill_ns: " + value);
    return text;
  };
  EXPECT_EQ(parse_hardware_profile(good, "hw.yaml").process_kill, Duration::zero()) << "absent: nothing";
  const HardwareProfile parsed = parse_hardware_profile(with("180000000"), "hw.yaml");
  EXPECT_EQ(parsed.process_kill, milliseconds(180));
  EXPECT_EQ(parse_hardware_profile(to_yaml(parsed), "hw.yaml (to_yaml)").process_kill, milliseconds(180));
  expect_contains(hardware_error(with("-1")), {"hw.yaml:", "key 'startup.process_kill_ns'"});
}

// Note [Training abort]: optional, top level, absent is nothing.
TEST(ConfigErrors, TrainingAbort) {
  const std::string good = h200_text();
  EXPECT_EQ(parse_hardware_profile(good, "hw.yaml").training_abort, Duration::zero()) << "absent: nothing";
  const HardwareProfile parsed = parse_hardware_profile(good + "\ntraining_abort_ns: 6500000\n", "hw.yaml");
  EXPECT_EQ(parsed.training_abort, microseconds(6500));
  EXPECT_EQ(parse_hardware_profile(to_yaml(parsed), "hw.yaml (to_yaml)").training_abort, microseconds(6500));
  expect_contains(hardware_error(good + "\ntraining_abort_ns: -1\n"), {"hw.yaml:", "key 'training_abort_ns'"});
  expect_contains(hardware_error(good + "\ntraining_abort_ns: soon\n"), {"hw.yaml:", "key 'training_abort_ns'"});
}

// Note [Eager switch in the simulator]: per model and eager ablation, the server's host times.
TEST(ConfigErrors, EagerSwitch) {
  const std::string good = h200_text();
  const auto with = [&](const std::string& entries) { return good + "\neager_switch:\n" + entries + "\n"; };
  const std::string two = "  - {model: resnet152, mechanism: no-ipc-optimization, prepare_ns: 6000000, forward_ns: 4000000}\n"
                          "  - {model: resnet152, mechanism: no-memory-management, prepare_ns: 9000000, forward_ns: 4100000}";
  const HardwareProfile parsed = parse_hardware_profile(with(two), "hw.yaml");
  ASSERT_EQ(parsed.eager_switch.size(), 2u);
  EXPECT_EQ(parsed.eager_switch.at({"resnet152", "no-ipc-optimization"}).prepare, milliseconds(6));
  EXPECT_EQ(parsed.eager_switch.at({"resnet152", "no-memory-management"}).forward, microseconds(4100));
  expect_same_hardware(parsed, parse_hardware_profile(to_yaml(parsed), "hw.yaml (to_yaml)"));
  // One process switches tensor by tensor on its one worker (Note [Training abort]): it may have them.
  EXPECT_EQ(parse_hardware_profile(with(two + "\n  - {model: bert_base, mechanism: one-process, prepare_ns: 2, forward_ns: 3}"),
                                   "hw.yaml")
                .eager_switch.at({"bert_base", "one-process"})
                .forward,
            nanoseconds(3));
  expect_contains(hardware_error(with(two + "\n  - {model: resnet152, mechanism: no-ipc-optimization, prepare_ns: 1, forward_ns: 1}")),
                  {"hw.yaml:", "key 'eager_switch[2].model'", "a second entry of resnet152 under no-ipc-optimization"});
  // PipeSwitch replays its switch from a graph, stop-and-start is no variant of it.
  for (const char* replayed : {"pipeswitch", "stop-and-start"}) {
    expect_contains(hardware_error(with(std::string("  - {model: resnet152, mechanism: ") + replayed +
                                        ", prepare_ns: 1, forward_ns: 1}")),
                    {"key 'eager_switch[0].mechanism'", "PipeSwitch's variants the server runs eagerly"});
  }
  expect_contains(hardware_error(with("  - {model: resnet152, mechanism: warp-drive, prepare_ns: 1, forward_ns: 1}")),
                  {"key 'eager_switch[0].mechanism'", "warp-drive"});
  expect_contains(hardware_error(with("  - {model: resnet152, mechanism: no-pinned-memory, prepare_ns: -1, forward_ns: 1}")),
                  {"key 'eager_switch[0].prepare_ns'"});
  expect_contains(hardware_error(with("  - {model: resnet152, mechanism: no-pinned-memory, prepare_ns: 1}")),
                  {"key 'eager_switch[0].forward_ns' is missing"});
}

// Note [Request path]: a serving profile round-trips, and each bad entry is named.
TEST(ServingProfile, RoundTripsAndRefusesBadEntries) {
  const std::string good =
      "name: s\n"
      "source: {kind: measured, device: NVIDIA H200, date: 2026-12-01}\n"
      "inputs: raw\n"
      "request_path:\n"
      "  - {model: resnet152, protocol_ns: 900000, server_ns: 400000, requests: 20}\n"
      "  - {model: bert_base, protocol_ns: 800000, server_ns: 300000, requests: 20}\n"
      "training:\n"
      "  - {model: resnet152, batch: 8, step_ns: 47000000}\n";
  const ServingProfile profile = parse_serving_profile(good, "s.yaml");
  ASSERT_NE(profile.path_of("bert_base"), nullptr);
  EXPECT_EQ(profile.path_of("bert_base")->protocol.ns(), 800000);
  EXPECT_EQ(profile.path_of("resnet152")->server.ns(), 400000);
  EXPECT_EQ(profile.path_of("inception_v3"), nullptr);
  ASSERT_NE(profile.training_of("resnet152"), nullptr);
  EXPECT_EQ(profile.training_of("resnet152")->step.ns(), 47000000);
  const ServingProfile again = parse_serving_profile(to_yaml(profile), "s.yaml (to_yaml)");
  EXPECT_EQ(again.request_path.size(), 2u);
  EXPECT_EQ(again.path_of("resnet152")->protocol.ns(), 900000);
  EXPECT_EQ(again.training_of("resnet152")->batch, 8);
  EXPECT_EQ(again.source.device, "NVIDIA H200");
  EXPECT_EQ(again.inputs, InputTransport::Raw);
  // Note [Inputs in shared memory]: the other way of sending inputs round-trips too.
  const ServingProfile shared = parse_serving_profile(replace_once(good, "inputs: raw", "inputs: shared-memory"), "m.yaml");
  EXPECT_EQ(shared.inputs, InputTransport::SharedMemory);
  EXPECT_EQ(parse_serving_profile(to_yaml(shared), "m.yaml (to_yaml)").inputs, InputTransport::SharedMemory);
  auto error = [](const std::string& text) {
    return input_error_of([&] { parse_serving_profile(text, "s.yaml"); });
  };
  expect_contains(error(replace_once(good, "inputs: raw", "inputs: shm")),
                  {"s.yaml:3:", "key 'inputs'", "expected raw", "or shared-memory", "got 'shm'"});
  expect_contains(error(replace_once(good, "model: bert_base", "model: resnet152")),
                  {"s.yaml:6:", "key 'request_path[1].model'", "given twice"});
  expect_contains(error(replace_once(good, "server_ns: 300000", "server_ns: -3")),
                  {"key 'request_path[1].server_ns'", "must not be negative"});
  expect_contains(error(replace_once(good, "step_ns: 47000000", "step_ns: 0")), {"key 'training[0].step_ns'"});
  expect_contains(error(replace_once(good, ", requests: 20}\n  - {model: bert", "}\n  - {model: bert")),
                  {"key 'request_path[0].requests' is missing"});
  expect_contains(error(good + "extra: 1\n"), {"unknown key 'extra'"});
}

// Note [Protocol spread]: the protocol's quantiles round-trip, and bad ones are named.
TEST(ServingProfile, ProtocolQuantilesRoundTripAndMustNotDecrease) {
  const std::string good =
      "name: s\n"
      "source: {kind: analytic}\n"
      "inputs: raw\n"
      "request_path:\n"
      "  - {model: bert_base, protocol_ns: 800000, server_ns: 300000, requests: 20, "
      "protocol_quantiles_ns: [700000, 800000, 1500000]}\n";
  const ServingProfile profile = parse_serving_profile(good, "s.yaml");
  const std::vector<Duration> expected{nanoseconds(700000), nanoseconds(800000), nanoseconds(1500000)};
  EXPECT_EQ(profile.path_of("bert_base")->protocol_quantiles, expected);
  EXPECT_EQ(parse_serving_profile(to_yaml(profile), "again.yaml").path_of("bert_base")->protocol_quantiles, expected);
  auto error = [](const std::string& text) {
    return input_error_of([&] { parse_serving_profile(text, "s.yaml"); });
  };
  expect_contains(error(replace_once(good, "[700000, 800000, 1500000]", "[700000, 600000, 1500000]")),
                  {"s.yaml:5:", "key 'request_path[0].protocol_quantiles_ns[1]'", "must not decrease"});
  expect_contains(error(replace_once(good, "[700000, 800000, 1500000]", "[700000]")),
                  {"key 'request_path[0].protocol_quantiles_ns'", "at least two"});
  expect_contains(error(replace_once(good, "[700000, 800000, 1500000]", "[-1, 800000]")),
                  {"key 'request_path[0].protocol_quantiles_ns[0]'", "must not be negative"});
  expect_contains(error(replace_once(good, "[700000, 800000, 1500000]", "700000")),
                  {"key 'request_path[0].protocol_quantiles_ns'", "expected a list"});
  // Note [Protocol under load]: the growth per request in flight round-trips; negative is named.
  const std::string growing = replace_once(good, "1500000]}", "1500000], protocol_per_in_flight_ns: 250000}");
  EXPECT_EQ(parse_serving_profile(growing, "s.yaml").path_of("bert_base")->protocol_per_in_flight, nanoseconds(250000));
  EXPECT_EQ(parse_serving_profile(to_yaml(parse_serving_profile(growing, "s.yaml")), "again.yaml")
                .path_of("bert_base")
                ->protocol_per_in_flight,
            nanoseconds(250000));
  EXPECT_EQ(profile.path_of("bert_base")->protocol_per_in_flight, Duration::zero());  // absent: none
  expect_contains(error(replace_once(growing, "250000}", "-1}")),
                  {"key 'request_path[0].protocol_per_in_flight_ns'", "must not be negative"});
}

TEST(ServingProfile, EvenlySpacedQuantilesAndTheValueAtAProbability) {
  // Nearest rank: 0%, 50%, 100% of 1..5 (unsorted in).
  EXPECT_EQ(evenly_spaced_quantiles({5, 1, 4, 2, 3}, 3),
            (std::vector<Duration>{nanoseconds(1), nanoseconds(3), nanoseconds(5)}));
  EXPECT_EQ(evenly_spaced_quantiles({7}, 2), (std::vector<Duration>{nanoseconds(7), nanoseconds(7)}));
  const std::vector<Duration> q{nanoseconds(100), nanoseconds(200), nanoseconds(1000)};
  EXPECT_EQ(quantile_at(q, 0.0), nanoseconds(100));
  EXPECT_EQ(quantile_at(q, 0.25), nanoseconds(150));  // halfway between the first two
  EXPECT_EQ(quantile_at(q, 0.5), nanoseconds(200));
  EXPECT_EQ(quantile_at(q, 0.75), nanoseconds(600));
  EXPECT_EQ(quantile_at(q, 0.9), nanoseconds(840));    // 80% of the way from 200 to 1000
  EXPECT_LE(quantile_at(q, 0.999999), nanoseconds(1000));
}

TEST(ConfigErrors, HardwareErrorLinesAreExact) {
  const std::string text =
      "name: x\n"                                      // 1
      "source: {kind: analytic}\n"                     // 2
      "gpu: {name: G, memory_bytes: 1000}\n"           // 3
      "link:\n"                                        // 4
      "  pinned:\n"                                    // 5
      "    copy_fixed_ns: 1\n"                         // 6
      "  pageable: {copy_fixed_ns: 1, bandwidth_bytes_per_s: 1}\n"
      "compute: 5\n";
  expect_contains(hardware_error(text),
                  {"hw.yaml:6:", "key 'link.pinned.bandwidth_bytes_per_s' is missing"});
  const std::string compute_scalar = replace_once(text, "    copy_fixed_ns: 1\n",
                                                  "    copy_fixed_ns: 1\n    bandwidth_bytes_per_s: 1\n");
  expect_contains(hardware_error(compute_scalar + "group_sync_ns: 1\n"),
                  {"hw.yaml:9:", "key 'compute'", "expected a mapping"});
}

TEST(ConfigErrors, MissingFile) {
  const std::string message =
      input_error_of([] { load_model_profile(std::filesystem::path(PSW_SOURCE_DIR) / "no" / "such.yaml"); });
  expect_contains(message, {"such.yaml: no such file"});
}

// Hardening of the inputs: one document per file, valid UTF-8, regular files only.
TEST(ConfigDocuments, ASecondDocumentIsRefused) {
  // The line of the second document's marker.
  expect_contains(model_error(kTinyModel + "---\nname: other\n"), {"bad.yaml:8:", "a second YAML document"});
  expect_contains(model_error(kTinyModel + "---\n"), {"bad.yaml", "a second YAML document"});
  // A leading document marker and an end marker are one document.
  EXPECT_NO_THROW(parse_model_profile("---\n" + kTinyModel + "...\n", "ok.yaml"));
}

// Found by fuzz_model_profile: yaml-cpp's LoadAll never returns on a top-level flow collection
// followed by stray text (Note [One document]); each is refused at once.
TEST(ConfigDocuments, StrayTextAfterAFlowCollectionIsRefused) {
  for (const std::string text : {"{} ,", "[]\n,", "{name: x}\n, {b}", "{a}\n,"}) {
    expect_contains(model_error(text), {"bad.yaml", "a second YAML document"});
  }
}

TEST(ConfigUtf8, InvalidUtf8IsRefusedNamingLineAndKey) {
  expect_contains(model_error(replace_once(kTinyModel, "name: tiny", "name: ti\xffny")),
                  {"bad.yaml:1:", "key 'name': not valid UTF-8 (byte 0xff at column 9)"});
  expect_contains(model_error(replace_once(kTinyModel, "kind: bn", "kind: b\xc3\x28")),
                  {"bad.yaml:7:", "key 'kind': not valid UTF-8"});
  // Overlong forms and surrogates are invalid too; a key is checked as well as a value.
  expect_contains(model_error(replace_once(kTinyModel, "name: tiny", "name: \xc0\xaf")), {"not valid UTF-8"});
  expect_contains(model_error(replace_once(kTinyModel, "name: tiny", "name: \xed\xa0\x80")), {"not valid UTF-8"});
  expect_contains(model_error(replace_once(kTinyModel, "batch: 8", "bat\xff" "ch: 8")),
                  {"bad.yaml:2: not valid UTF-8 (byte 0xff at column 4)"});
  // An alias bomb is no harder to check than its text (a walk of the tree would not end).
  std::string bomb = "a: &a [x, x, x, x, x, x, x, x, x, x]\n";
  for (char c = 'b'; c <= 'j'; ++c) {
    bomb += std::string(1, c) + ": &" + c + " [";
    for (int k = 0; k < 10; ++k) bomb += std::string(k ? ", *" : "*") + static_cast<char>(c - 1);
    bomb += "]\n";
  }
  expect_contains(model_error(bomb + "name: \xff\n"), {"bad.yaml:11: key 'name': not valid UTF-8"});
  expect_contains(model_error(bomb), {"bad.yaml:1:", "key 'name' is missing"});
  // Valid UTF-8 (two, three and four bytes) is a name like any other.
  const ModelProfile model =
      parse_model_profile(replace_once(kTinyModel, "name: tiny", "name: r\xc3\xa9s\xe2\x82\xac\xf0\x9f\x98\x80"), "ok.yaml");
  EXPECT_EQ(model.name, "r\xc3\xa9s\xe2\x82\xac\xf0\x9f\x98\x80");
}

// yaml-cpp's LoadAll never returned on a NUL (found by fuzz_model_profile), and takes 0x04 for
// the end of the stream: control characters are refused before parsing.
TEST(ConfigText, ControlCharactersAreRefused) {
  expect_contains(model_error(kTinyModel + std::string("\0", 1) + "x"),
                  {"bad.yaml:8: a control character (byte 0x00 at column 1)"});
  expect_contains(model_error("name: ti\x04ny\n"), {"bad.yaml:1: key 'name': a control character (byte 0x04"});
  expect_contains(model_error("name: tiny\x7f\n"), {"a control character (byte 0x7f"});
  // Tabs and CRLF line ends are text.
  std::string crlf;
  for (char c : kTinyModel) crlf += c == '\n' ? std::string("\r\n") : std::string(1, c);
  EXPECT_NO_THROW(parse_model_profile(crlf, "crlf.yaml"));
  EXPECT_NO_THROW(parse_model_profile(kTinyModel + "#\tcomment\n", "tab.yaml"));
}

TEST(ConfigFiles, DevicesAreRefusedWithoutReading) {
  expect_contains(input_error_of([] { load_model_profile("/dev/zero"); }),
                  {"/dev/zero: is not a regular file"});
  expect_contains(input_error_of([] { load_hardware_profile("/dev/null"); }),
                  {"/dev/null: is not a regular file"});
  expect_contains(input_error_of([] { load_switch_plan("/dev/zero"); }), {"/dev/zero: is not a regular file"});
}

TEST(ConfigFiles, FixedGroupsFromText) {
  const ModelProfile model = parse_model_profile(kTinyModel, "tiny.yaml");
  const Grouping groups = parse_fixed_groups("groups: [[0, 1]]\n", "g.yaml", model);
  ASSERT_EQ(groups.size(), 1u);
  expect_contains(input_error_of([&] { parse_fixed_groups("groups: [[0, 0]]\n", "g.yaml", model); }),
                  {"g.yaml:1:", "groups"});
}

TEST(ConfigFiles, FixedGroupsByModule) {
  const std::string three_layers = kTinyModel + "  - {name: fc, kind: linear, param_bytes: 64, forward_flops: 10}\n";
  const ModelProfile model = parse_model_profile(three_layers, "tiny.yaml");
  const Grouping split = parse_fixed_groups("modules: [[conv1], [bn1, fc]]\n", "g.yaml", model);
  ASSERT_EQ(split.size(), 2u);
  EXPECT_EQ(split[0].first, 0u);
  EXPECT_EQ(split[0].last, 0u);
  EXPECT_EQ(split[1].first, 1u);
  EXPECT_EQ(split[1].last, 2u);
  // A module name takes the layers under it, not a layer whose name merely starts with it.
  const std::string nested = "name: nested\nbatch: 1\ndtype: fp32\nsource: {kind: analytic}\nlayers:\n"
                             "  - {name: block.a, kind: conv, param_bytes: 4, forward_flops: 1}\n"
                             "  - {name: block.b, kind: conv, param_bytes: 4, forward_flops: 1}\n"
                             "  - {name: blocker, kind: conv, param_bytes: 4, forward_flops: 1}\n";
  const ModelProfile nested_model = parse_model_profile(nested, "nested.yaml");
  const Grouping blocks = parse_fixed_groups("modules: [[block], [blocker]]\n", "g.yaml", nested_model);
  ASSERT_EQ(blocks.size(), 2u);
  EXPECT_EQ(blocks[0].last, 1u);
  const auto error = [&](const std::string& text) {
    return input_error_of([&] { parse_fixed_groups(text, "g.yaml", model); });
  };
  expect_contains(error("modules: [[conv1], [bn1]]\n"), {"g.yaml:1:", "layer 2 'fc'", "in no group's modules"});
  expect_contains(error("modules: [[conv1, bn1], [bn1, fc]]\n"),
                  {"key 'modules[1]'", "layer 1 'bn1' is in this group and in modules[0]"});
  expect_contains(error("modules: [[bn1], [conv1], [fc]]\n"),
                  {"key 'modules[0]'", "layer 0 'conv1' is next but is in modules[1]"});
  expect_contains(error("modules: [[conv1, fc], [bn1]]\n"),
                  {"key 'modules[0]'", "not consecutive: layer 2 'fc' comes after layers of other groups"});
  expect_contains(error("modules: [[conv1], [pool], [bn1, fc]]\n"), {"key 'modules[1]'", "takes no layer"});
  expect_contains(error("modules: [[conv1], [], [bn1, fc]]\n"), {"key 'modules[1]'", "non-empty list"});
  expect_contains(error("modules: [[conv1], [[x]], [bn1, fc]]\n"), {"key 'modules[1][0]'", "a module name"});
  expect_contains(error("groups: [[0, 2]]\nmodules: [[conv1, bn1, fc]]\n"), {"exactly one of 'groups'"});
  expect_contains(error("model: tiny\n"), {"exactly one of 'groups'"});
}

// The authors' artifact's groupings, written by module as its partition_model() lists them,
// resolve onto the shipped profiles with the artifact's group counts.
TEST(ConfigShippedModels, ArtifactGroupingsByModule) {
  const auto groups_of = [](const std::string& name, const ModelProfile& model) {
    return load_fixed_groups(std::filesystem::path(PSW_SOURCE_DIR) / "configs" / "plans" / (name + "-artifact.yaml"),
                             model);
  };
  const ModelProfile resnet = load_model_profile(model_path("resnet152"));
  const Grouping resnet_groups = groups_of("resnet152", resnet);
  ASSERT_EQ(resnet_groups.size(), 52u);  // stem, 3 + 8 + 36 + 3 bottleneck blocks, tail
  // Exactly the first block of each stage holds a downsample.
  std::vector<std::size_t> with_downsample;
  for (std::size_t g = 0; g < resnet_groups.size(); ++g) {
    for (std::size_t i = resnet_groups[g].first; i <= resnet_groups[g].last; ++i) {
      if (resnet.layers[i].name.find(".downsample.") != std::string::npos) {
        with_downsample.push_back(g);
        break;
      }
    }
  }
  EXPECT_EQ(with_downsample, (std::vector<std::size_t>{1, 4, 12, 48}));

  const ModelProfile inception = load_model_profile(model_path("inception_v3"));
  const Grouping inception_groups = groups_of("inception_v3", inception);
  ASSERT_EQ(inception_groups.size(), 18u);
  // The training-only layers are exactly the AuxLogits group (the 14th child).
  for (std::size_t i = 0; i < inception.layers.size(); ++i) {
    const bool in_aux = i >= inception_groups[13].first && i <= inception_groups[13].last;
    EXPECT_EQ(inception.layers[i].training_only, in_aux) << inception.layers[i].name;
  }

  const ModelProfile bert = load_model_profile(model_path("bert_base"));
  const Grouping bert_groups = groups_of("bert_base", bert);
  ASSERT_EQ(bert_groups.size(), 38u);  // embeddings, 12 x (attention, intermediate, output), pooler.dense
  EXPECT_EQ(bert_groups[0].last, 3u);  // word, position and token-type embeddings, LayerNorm
  EXPECT_EQ(bert_groups[2].first, bert_groups[2].last);  // encoder.layer.0.intermediate: one linear
}

}  // namespace
}  // namespace psw
