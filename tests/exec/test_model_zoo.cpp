// The model zoo: layer lists against configs/models/*.yaml, gate order, outputs, determinism,
// and rebinding the layers' tensors to an external buffer (what the executor's parameter store
// and device pool do).

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "psw/common/config.hpp"
#include "psw/common/error.hpp"
#include "psw/exec/model_zoo.hpp"

#include <torch/torch.h>

namespace psw::exec {
namespace {

ModelProfile profile_of(const std::string& name) {
  return load_model_profile(std::string(PSW_SOURCE_DIR) + "/configs/models/" + name + ".yaml");
}

bool is_bert(const std::string& name) { return name == "bert_base" || name == "bert_tiny"; }

std::int64_t expected_params(const std::string& name) {
  if (name == "resnet152") return 60'192'808;
  if (name == "inception_v3") return 27'161'264;
  if (name == "bert_tiny") return 4'385'920;  // google/bert_uncased_L-2_H-128_A-2's BertModel
  return 109'482'240;  // bert_base
}

std::vector<std::int64_t> output_shape(const std::string& name, std::int64_t batch) {
  if (name == "bert_tiny") return {batch, 128};
  return {batch, name == "bert_base" ? 768 : 1000};
}

std::vector<std::int64_t> example_shape(const std::string& name, std::int64_t batch) {
  if (is_bert(name)) return {batch, 128};
  const std::int64_t size = name == "resnet152" ? 224 : 299;
  return {batch, 3, size, size};
}

// A cheap input for the checks that do not depend on its size (the reference BLAS of Debian's
// LibTorch makes full-size forwards take seconds): the example input cut to 64 x 64 images
// (ResNet), 75 x 75 (Inception's minimum) or 8 tokens (BERT).
torch::Tensor small_input(const ZooModel& model, const std::string& name, int batch,
                          std::uint64_t seed) {
  const torch::Tensor x = model.example_input(batch, seed);
  if (is_bert(name)) return x.narrow(1, 0, 8);
  const std::int64_t size = name == "resnet152" ? 64 : 75;
  return x.narrow(2, 0, size).narrow(3, 0, size).contiguous();
}

TEST(ZooRegistry, NamesAndUnknownModel) {
  EXPECT_EQ(zoo_model_names(), (std::vector<std::string>{"resnet152", "inception_v3", "bert_base", "bert_tiny"}));
  try {
    make_model("resnet18");
    FAIL() << "no InputError";
  } catch (const InputError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("resnet18"), std::string::npos) << what;
    for (const std::string& known : zoo_model_names()) {
      EXPECT_NE(what.find(known), std::string::npos) << what;
    }
  }
}

class ZooModelTest : public ::testing::TestWithParam<std::string> {};

TEST_P(ZooModelTest, LayersMatchProfileAndInputsAreChecked) {
  const std::string name = GetParam();
  const ModelProfile profile = profile_of(name);
  auto model = make_model(name);
  EXPECT_EQ(model->name(), name);
  std::vector<ZooLayer>& layers = model->layers();
  ASSERT_EQ(layers.size(), profile.layers.size());
  std::int64_t params = 0;
  Bytes bytes = 0;
  for (std::size_t i = 0; i < layers.size(); ++i) {
    SCOPED_TRACE(layers[i].name);
    EXPECT_EQ(layers[i].name, profile.layers[i].name) << "layer " << i;
    EXPECT_EQ(layers[i].kind, profile.layers[i].kind) << "layer " << i;
    EXPECT_EQ(layers[i].bytes(), profile.layers[i].param_bytes) << "layer " << i;
    ASSERT_FALSE(layers[i].tensors.empty());
    for (const torch::Tensor& t : layers[i].tensors) {
      EXPECT_TRUE(t.is_contiguous());
      EXPECT_EQ(t.device(), torch::Device(torch::kCPU));
      if (t.requires_grad()) params += t.numel();  // parameters; buffers do not require grad
    }
    // Parameters (float) come before buffers; BatchNorm ends with num_batches_tracked (int64).
    if (layers[i].kind == "bn") {
      ASSERT_EQ(layers[i].tensors.size(), 5u);
      EXPECT_TRUE(layers[i].tensors[0].requires_grad());
      EXPECT_TRUE(layers[i].tensors[1].requires_grad());
      EXPECT_FALSE(layers[i].tensors[2].requires_grad());
      EXPECT_EQ(layers[i].tensors[4].scalar_type(), torch::kInt64);
      EXPECT_EQ(layers[i].tensors[4].dim(), 0);
    }
    bytes += layers[i].bytes();
  }
  EXPECT_EQ(params, expected_params(name));
  EXPECT_EQ(bytes, profile.total_param_bytes());

  // Inputs of the wrong rank, dtype or a too small size (checked before any layer runs).
  const torch::Tensor bad = is_bert(name) ? torch::zeros({1, 128}, torch::kFloat32)
                                                : torch::zeros({1, 3, 16, 16}, torch::kFloat32);
  EXPECT_THROW(model->forward(bad), InputError);
  EXPECT_THROW(model->forward(torch::zeros({3})), InputError);
  EXPECT_THROW(model->example_input(0, 1), InputError);
}

TEST_P(ZooModelTest, GatesSeeTheRunningLayersInOrder) {
  const std::string name = GetParam();
  const ModelProfile profile = profile_of(name);
  auto model = make_model(name);

  std::vector<std::size_t> expected;
  for (std::size_t i = 0; i < profile.layers.size(); ++i) {
    if (!profile.layers[i].training_only) expected.push_back(i);
  }
  // Inception's AuxLogits (conv0.conv, conv0.bn, conv1.conv, conv1.bn, fc) do not run.
  EXPECT_EQ(expected.size() + (name == "inception_v3" ? 5 : 0), profile.layers.size());

  const torch::Tensor x = model->example_input(1, 11);
  EXPECT_EQ(x.sizes().vec(), example_shape(name, 1));
  // BERT at its full 128 tokens costs seconds with the reference BLAS: 16 tokens gate alike.
  const torch::Tensor input = is_bert(name) ? x.narrow(1, 0, 16) : x;
  std::vector<std::size_t> seen;
  const torch::Tensor y = model->forward(input, [&](std::size_t i) { seen.push_back(i); });
  EXPECT_EQ(seen, expected);
  EXPECT_EQ(y.sizes().vec(), output_shape(name, 1));
  EXPECT_TRUE(torch::isfinite(y).all().item<bool>());
  EXPECT_FALSE(y.requires_grad());
  EXPECT_GT(y.std().item<double>(), 1e-2);  // not degenerate
}

TEST_P(ZooModelTest, BatchesAndRepeats) {
  const std::string name = GetParam();
  auto model = make_model(name);
  const torch::Tensor x1 = small_input(*model, name, 1, 12);
  const torch::Tensor x2 = small_input(*model, name, 2, 12);
  EXPECT_TRUE(torch::equal(x2.narrow(0, 0, 1), x1));  // the batch-1 input is the first sample
  EXPECT_FALSE(torch::equal(x2[0], x2[1]));
  const torch::Tensor y1 = model->forward(x1);
  EXPECT_TRUE(torch::equal(model->forward(x1), y1));  // bit for bit on a repeat
  const torch::Tensor y2 = model->forward(x2);
  EXPECT_EQ(y2.sizes().vec(), output_shape(name, 2));
  // The first row equals batch 1 up to kernel rounding; the rows differ clearly.
  EXPECT_TRUE(torch::allclose(y2.narrow(0, 0, 1), y1, 1e-3, 1e-4));
  const double spread = (y2[0] - y2[1]).abs().max().item<double>();
  EXPECT_GT(spread, 1e-2 * y2.abs().max().item<double>()) << "spread " << spread;
}

TEST_P(ZooModelTest, SeedDeterminism) {
  const std::string name = GetParam();
  auto a = make_model(name, 3);
  auto b = make_model(name, 3);
  auto c = make_model(name, 4);
  ASSERT_EQ(a->layers().size(), c->layers().size());
  for (std::size_t i = 0; i < a->layers().size(); ++i) {
    const ZooLayer& la = a->layers()[i];
    const ZooLayer& lb = b->layers()[i];
    const ZooLayer& lc = c->layers()[i];
    for (std::size_t k = 0; k < la.tensors.size(); ++k) {
      EXPECT_TRUE(torch::equal(la.tensors[k], lb.tensors[k])) << la.name << " tensor " << k;
      // Every parameter depends on the seed (weights, biases and norms alike).
      if (la.tensors[k].requires_grad()) {
        EXPECT_FALSE(torch::equal(la.tensors[k], lc.tensors[k])) << la.name << " tensor " << k;
      }
    }
  }
  EXPECT_TRUE(torch::equal(a->example_input(1, 5), b->example_input(1, 5)));
  EXPECT_FALSE(torch::equal(a->example_input(1, 5), a->example_input(1, 6)));
  const torch::Tensor x = small_input(*a, name, 1, 5);
  const torch::Tensor ya = a->forward(x);
  EXPECT_TRUE(torch::equal(ya, b->forward(x)));
  EXPECT_FALSE(torch::allclose(ya, c->forward(x)));
}

TEST_P(ZooModelTest, RebindingToAnExternalBuffer) {
  const std::string name = GetParam();
  auto model = make_model(name);
  const torch::Tensor x = small_input(*model, name, 1, 21);
  const torch::Tensor reference = model->forward(x);

  // One flat byte buffer, each tensor at a 64-byte aligned offset.
  std::vector<ZooLayer>& layers = model->layers();
  std::vector<std::int64_t> offsets;
  std::int64_t total = 0;
  for (const ZooLayer& layer : layers) {
    for (const torch::Tensor& t : layer.tensors) {
      total = (total + 63) / 64 * 64;
      offsets.push_back(total);
      total += static_cast<std::int64_t>(t.nbytes());
    }
  }
  const torch::Tensor buffer = torch::empty({total}, torch::kUInt8);
  const auto* begin = static_cast<const std::uint8_t*>(buffer.data_ptr());
  {
    torch::NoGradGuard no_grad;
    std::size_t k = 0;
    for (ZooLayer& layer : layers) {
      for (torch::Tensor& t : layer.tensors) {
        const auto nbytes = static_cast<std::int64_t>(t.nbytes());
        torch::Tensor view =
            buffer.narrow(0, offsets[k], nbytes).view(t.scalar_type()).view(t.sizes());
        view.copy_(t);
        t.set_data(view);
        EXPECT_EQ(static_cast<const std::uint8_t*>(t.data_ptr()), begin + offsets[k]);
        ++k;
      }
    }
  }
  // The model computes from the buffer: the same output...
  EXPECT_TRUE(torch::equal(model->forward(x), reference));
  // ...and a poisoned buffer changes it.
  buffer.fill_(0x3C);  // every float 0x3C3C3C3C (about 0.0115)
  EXPECT_FALSE(torch::equal(model->forward(x), reference));
  // Moving the model to the device it is on keeps the binding.
  model->to(torch::Device(torch::kCPU));
  EXPECT_EQ(static_cast<const std::uint8_t*>(layers[0].tensors[0].data_ptr()), begin + offsets[0]);
}

TEST_P(ZooModelTest, TrainingLossGatesEveryLayerAndReachesEveryParameter) {
  const std::string name = GetParam();
  const ModelProfile profile = profile_of(name);
  auto model = make_model(name);
  // Inception's auxiliary head needs full-size images in training (and says so).
  // (and a batch of 2 for BatchNorm on its 1 x 1 maps).
  const torch::Tensor x = model->example_input(is_bert(name) ? 1 : 2, 5);
  const torch::Tensor input = name == "resnet152"   ? small_input(*model, name, 2, 5)
                              : is_bert(name)        ? x.narrow(1, 0, 16)
                                                    : x;
  if (name == "inception_v3") {
    EXPECT_THROW(model->training_loss(small_input(*model, name, 2, 5), [](std::size_t) {}), InputError);
    EXPECT_THROW(model->training_loss(x.narrow(0, 0, 1), [](std::size_t) {}), InputError);
  }
  const torch::Tensor before = model->forward(input);

  std::vector<std::size_t> seen;
  const torch::Tensor loss = model->training_loss(input, [&](std::size_t i) { seen.push_back(i); });
  // Every layer gates, training_only ones included, in the listed order.
  std::vector<std::size_t> all(profile.layers.size());
  for (std::size_t i = 0; i < all.size(); ++i) all[i] = i;
  EXPECT_EQ(seen, all);
  ASSERT_EQ(loss.dim(), 0);
  EXPECT_TRUE(loss.requires_grad());
  EXPECT_TRUE(std::isfinite(loss.item<double>()));
  loss.backward();
  for (const ZooLayer& layer : model->layers()) {
    bool any_grad = false;
    for (const torch::Tensor& t : layer.tensors) {
      if (!t.requires_grad()) continue;
      ASSERT_TRUE(t.grad().defined()) << layer.name;
      any_grad = any_grad || t.grad().abs().sum().item<double>() > 0;
    }
    EXPECT_TRUE(any_grad) << layer.name << " got no gradient";
  }
  // Back in eval mode: the inference output is what it was, except that BatchNorm's running
  // statistics moved during the training forward (so compare BERT, which has none, exactly).
  const torch::Tensor after = model->forward(input);
  EXPECT_FALSE(after.requires_grad());
  if (is_bert(name)) EXPECT_TRUE(torch::equal(before, after));
  std::vector<std::size_t> inference;
  model->forward(input, [&](std::size_t i) { inference.push_back(i); });
  EXPECT_EQ(inference.size() + (name == "inception_v3" ? 5 : 0), profile.layers.size());
}

INSTANTIATE_TEST_SUITE_P(Zoo, ZooModelTest,
                         ::testing::Values("resnet152", "inception_v3", "bert_base", "bert_tiny"),
                         [](const ::testing::TestParamInfo<std::string>& info) { return info.param; });

}  // namespace
}  // namespace psw::exec
