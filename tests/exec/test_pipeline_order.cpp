// The order of a pipelined switch, recorded: every group's copies are enqueued before the first
// wait, group g is waited for before any of its layers computes, and the first layer runs only
// after group 0's wait. A recording backend (over the host backend) logs what the engine asks
// of it and defers each copy until its group is waited for, so a layer that ran before its
// group's wait would compute on the poisoned region and change the output.
#include <gtest/gtest.h>

#include <functional>
#include <map>
#include <utility>
#include <vector>

#include "exec_test_support.hpp"
#include "psw/exec/backend.hpp"
#include "psw/exec/model_zoo.hpp"
#include "psw/exec/pipeline.hpp"

namespace psw::exec {
namespace {

using testing_support::plan_for;
using testing_support::relative_error;
using testing_support::Event;
using testing_support::RecordingBackend;

std::size_t index_of(const std::vector<Event>& events, Event::Kind kind, std::size_t value) {
  for (std::size_t i = 0; i < events.size(); ++i) {
    if (events[i].kind == kind && events[i].value == value) return i;
  }
  return events.size();
}

class PipelineOrder : public ::testing::TestWithParam<std::string> {};

TEST_P(PipelineOrder, CopiesThenWaitThenFirstLayer) {
  const std::string name = GetParam();
  auto model = make_model(name, 3);
  torch::Tensor input = model->example_input(1, 4);
  if (name == "bert_base") input = input.narrow(1, 0, 8).contiguous();
  else input = input.narrow(2, 0, 75).narrow(3, 0, 75).contiguous();
  torch::Tensor reference;
  {
    torch::NoGradGuard no_grad;
    reference = make_model(name, 3)->forward(input);
  }
  RecordingBackend backend;
  const Grouping groups = plan_for(name, Strategy::Optimal);
  ASSERT_GE(groups.size(), 2u) << "the order is only visible with several groups";
  auto pipeline = make_private_pipeline(backend, *model, groups);
  pipeline->engine->poison_device_parameters(0x5A);
  backend.events.clear();
  const torch::Tensor out = pipeline->engine->switch_in_and_run(input);

  // Deferred copies and a poisoned region: equal outputs mean no layer ran before its group.
  EXPECT_LT(relative_error(out, reference), 1e-5);

  const auto& ev = backend.events;
  ASSERT_FALSE(ev.empty());
  EXPECT_EQ(ev.front().kind, Event::Kind::BeginSwitch);
  EXPECT_EQ(ev.front().value, groups.size());
  // Every group's copies, in group order, before the first wait.
  const std::size_t first_wait = index_of(ev, Event::Kind::Wait, 0);
  ASSERT_LT(first_wait, ev.size()) << "group 0 was never waited for";
  std::size_t last_copied = 0;
  std::vector<bool> copied(groups.size(), false);
  for (std::size_t i = 0; i < ev.size(); ++i) {
    if (ev[i].kind != Event::Kind::Copy) continue;
    EXPECT_LT(i, first_wait) << "a copy was enqueued after the compute started waiting";
    EXPECT_GE(ev[i].value, last_copied) << "copies out of group order";
    last_copied = ev[i].value;
    copied[ev[i].value] = true;
  }
  for (std::size_t g = 0; g < groups.size(); ++g) EXPECT_TRUE(copied[g]) << "group " << g << " never copied";
  // The first layer starts after group 0's wait.
  const std::size_t first_layer = index_of(ev, Event::Kind::Mark, PipelineEngine::kMarkFirstLayer);
  ASSERT_LT(first_layer, ev.size());
  EXPECT_GT(first_layer, first_wait);
  // Each group waited for once, in order; the switch ends joined with the copies.
  std::vector<std::size_t> waits;
  for (const auto& e : ev) {
    if (e.kind == Event::Kind::Wait) waits.push_back(e.value);
  }
  ASSERT_EQ(waits.size(), groups.size());
  for (std::size_t g = 0; g < waits.size(); ++g) EXPECT_EQ(waits[g], g);
  EXPECT_EQ(ev.back().kind, Event::Kind::JoinCopies);
}

INSTANTIATE_TEST_SUITE_P(Zoo, PipelineOrder, ::testing::Values("resnet152", "inception_v3", "bert_base"));

// A backend with "graphs" that replay by running the captured body again: what a CUDA graph
// does with the same tensors, without a GPU.
class ReplayingBackend final : public RecordingBackend {
 public:
  bool supports_graphs() const override { return true; }
  void capture(std::size_t slot, const std::function<void()>& body) override {
    body();  // as a capture, which runs the body's host side (outputs are its tensors)
    graphs_[slot] = body;
  }
  void replay(std::size_t slot) override { graphs_.at(slot)(); }

 private:
  std::map<std::size_t, std::function<void()>> graphs_;
};

// Note [Switch graphs]: a worker holds one engine per model on one backend. Each engine must
// replay its own switch: with shared graph slots, the last model captured was replayed for
// every model, and the others answered with their stale capture-time outputs.
TEST(PipelineGraphs, EnginesOnOneBackendReplayTheirOwnSwitch) {
  ReplayingBackend backend;
  torch::NoGradGuard no_grad;
  auto bert = make_model("bert_tiny", 3);
  auto resnet = make_model("resnet152", 3);
  auto bert_pipeline = make_private_pipeline(backend, *bert, plan_for("bert_tiny", Strategy::Optimal));
  auto resnet_pipeline = make_private_pipeline(backend, *resnet, plan_for("resnet152", Strategy::Optimal));
  auto tokens_of = [&](std::uint64_t seed) { return bert->example_input(1, seed).narrow(1, 0, 8).contiguous(); };
  auto image_of = [&](std::uint64_t seed) {
    return resnet->example_input(1, seed).narrow(2, 0, 64).narrow(3, 0, 64).contiguous();
  };
  bert_pipeline->engine->capture_graphs(tokens_of(4), /*traced=*/false);
  resnet_pipeline->engine->capture_graphs(image_of(4), /*traced=*/false);
  auto bert_reference = make_model("bert_tiny", 3);
  auto resnet_reference = make_model("resnet152", 3);
  // Inputs other than the capture's: an engine that replayed another's graph would answer
  // with its output of the capture.
  for (std::uint64_t seed = 5; seed < 7; ++seed) {
    const torch::Tensor tokens = tokens_of(seed);
    const torch::Tensor image = image_of(seed);
    bert_pipeline->engine->poison_device_parameters(0x5A);
    EXPECT_LT(relative_error(bert_pipeline->engine->switch_in_and_run_graph(tokens), bert_reference->forward(tokens)), 1e-5);
    resnet_pipeline->engine->poison_device_parameters(0x5A);
    EXPECT_LT(relative_error(resnet_pipeline->engine->switch_in_and_run_graph(image), resnet_reference->forward(image)),
              1e-5);
    EXPECT_LT(relative_error(resnet_pipeline->engine->run_resident_graph(image), resnet_reference->forward(image)), 1e-5);
  }
}

}  // namespace
}  // namespace psw::exec
