// Placement (Note [Placement]): costs of layers read in place, the auto choice, and the errors.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>

#include "psw/common/config.hpp"
#include "psw/common/error.hpp"
#include "psw/common/placement.hpp"
#include "psw/common/timeline.hpp"

namespace psw {
namespace {

ModelProfile model(const std::string& name) {
  return load_model_profile(std::string(PSW_SOURCE_DIR) + "/configs/models/" + name + ".yaml");
}
HardwareProfile mapped_hardware() {
  return load_hardware_profile(std::string(PSW_TEST_DATA_DIR) + "/sim/h200-mapped.yaml");
}

TEST(Placement, ParsesItsNames) {
  EXPECT_EQ(parse_placement("copy"), Placement::Copy);
  EXPECT_EQ(parse_placement("auto"), Placement::Auto);
  EXPECT_EQ(to_string(Placement::Auto), "auto");
  EXPECT_THROW(parse_placement("host"), InputError);
}

TEST(Placement, AMappedLayerIsNotCopiedAndPaysItsReads) {
  const ModelProfile bert = model("bert_base");
  const HardwareProfile hw = mapped_hardware();
  ASSERT_TRUE(hw.mapped.has_value());
  std::vector<bool> mapped(bert.layers.size(), false);
  mapped[0] = true;  // the word embeddings
  const SwitchCosts copied = make_switch_costs(bert, hw, Task::Inference);
  const SwitchCosts placed = make_switch_costs(bert, hw, Task::Inference, HostMemory::Pinned, mapped);
  EXPECT_EQ(placed.layer_bytes(0), 0);
  EXPECT_EQ(placed.total_bytes(), copied.total_bytes() - bert.layers[0].param_bytes);
  EXPECT_EQ(placed.layer_compute(0), copied.layer_compute(0) + hw.mapped->copy_time(bert.layers[0].host_read_bytes));
  for (std::size_t i = 1; i < bert.layers.size(); ++i) EXPECT_EQ(placed.layer_bytes(i), copied.layer_bytes(i));
}

TEST(Placement, ImpossiblePlacementsAreRefused) {
  const ModelProfile bert = model("bert_base");
  const HardwareProfile hw = mapped_hardware();
  std::vector<bool> mapped(bert.layers.size(), false);
  mapped[4] = true;  // a linear layer: no host_read_bytes
  EXPECT_THROW(make_switch_costs(bert, hw, Task::Inference, HostMemory::Pinned, mapped), InputError);
  mapped.assign(bert.layers.size(), false);
  mapped[0] = true;
  EXPECT_THROW(make_switch_costs(bert, hw, Task::Inference, HostMemory::Pageable, mapped), InputError);
  HardwareProfile no_link = hw;
  no_link.mapped.reset();
  EXPECT_THROW(make_switch_costs(bert, no_link, Task::Inference, HostMemory::Pinned, mapped), InputError);
  EXPECT_THROW(make_switch_costs(bert, hw, Task::Inference, HostMemory::Pinned, {true}), InputError);
  EXPECT_THROW(choose_placement(Placement::Auto, bert, no_link, Task::Inference, Strategy::Optimal), InputError);
}

TEST(Placement, AutoReadsBertsWordEmbeddingsInPlaceAndStartsEarlier) {
  const ModelProfile bert = model("bert_base");
  const HardwareProfile hw = mapped_hardware();
  const SwitchPlan copy = make_switch_plan(bert, hw, Task::Inference, Strategy::Optimal, Placement::Copy);
  const SwitchPlan placed = make_switch_plan(bert, hw, Task::Inference, Strategy::Optimal, Placement::Auto);
  EXPECT_EQ(std::count(copy.host_mapped.begin(), copy.host_mapped.end(), true), 0);
  // The 94 MB table is worth reading in place; the 1.5 MB and 6 kB ones are cheaper to copy
  // than to read a row per token from.
  EXPECT_EQ(host_mapped_names(bert, placed.host_mapped), std::vector<std::string>{"embeddings.word_embeddings"});
  EXPECT_EQ(describe_placement(bert, placed.host_mapped), "embeddings.word_embeddings");
  EXPECT_EQ(describe_placement(bert, copy.host_mapped), "none");
  const Timeline t_copy =
      evaluate_timeline(make_switch_costs(bert, hw, Task::Inference), copy.groups);
  const Timeline t_placed = evaluate_timeline(
      make_switch_costs(bert, hw, Task::Inference, HostMemory::Pinned, placed.host_mapped), placed.groups);
  EXPECT_LT(t_placed.total, t_copy.total);
  EXPECT_LT(t_placed.startup, t_copy.startup);
}

TEST(Placement, AutoLeavesModelsWithoutCandidatesAndTrainingAlone) {
  const HardwareProfile hw = mapped_hardware();
  const ModelProfile resnet = model("resnet152");
  const auto none = choose_placement(Placement::Auto, resnet, hw, Task::Inference, Strategy::Optimal);
  EXPECT_EQ(std::count(none.begin(), none.end(), true), 0);
  const ModelProfile bert = model("bert_base");
  const auto training = choose_placement(Placement::Auto, bert, hw, Task::Training, Strategy::Optimal);
  EXPECT_EQ(std::count(training.begin(), training.end(), true), 0);
  const auto pageable =
      choose_placement(Placement::Auto, bert, hw, Task::Inference, Strategy::Optimal, HostMemory::Pageable);
  EXPECT_EQ(std::count(pageable.begin(), pageable.end(), true), 0);
}

TEST(Placement, ProfilesCarryTheirPlacementFieldsThroughYaml) {
  const ModelProfile bert = model("bert_base");
  EXPECT_GT(bert.layers[0].host_read_bytes, 0);
  EXPECT_EQ(bert.layers[4].host_read_bytes, 0);
  const ModelProfile again = parse_model_profile(to_yaml(bert), "roundtrip.yaml");
  for (std::size_t i = 0; i < bert.layers.size(); ++i) {
    EXPECT_EQ(again.layers[i].host_read_bytes, bert.layers[i].host_read_bytes);
  }
  const HardwareProfile hw = mapped_hardware();
  const HardwareProfile hw_again = parse_hardware_profile(to_yaml(hw), "roundtrip.yaml");
  ASSERT_TRUE(hw_again.mapped.has_value());
  EXPECT_EQ(hw_again.mapped->bandwidth.bytes_per_second(), hw.mapped->bandwidth.bytes_per_second());
  EXPECT_EQ(hw_again.mapped->copy_fixed, hw.mapped->copy_fixed);
  // Bad values name the key.
  std::string text = to_yaml(hw);
  const std::string mapped_bandwidth = "bandwidth_bytes_per_s: 25000000000";
  const auto at = text.find(mapped_bandwidth);
  ASSERT_NE(at, std::string::npos);
  text.replace(at, mapped_bandwidth.size(), "bandwidth_bytes_per_s: 0");
  try {
    parse_hardware_profile(text, "hw.yaml");
    FAIL() << "no InputError";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("link.mapped.bandwidth_bytes_per_s"), std::string::npos) << e.what();
  }
  std::string model_text = to_yaml(bert);
  const std::string read_key = "host_read_bytes: ";
  const auto read = model_text.find(read_key);
  ASSERT_NE(read, std::string::npos);
  model_text.replace(read, read_key.size(), "host_read_bytes: -");
  EXPECT_THROW(parse_model_profile(model_text, "m.yaml"), InputError);
}

}  // namespace
}  // namespace psw
