// The user's own weights (exec/src/weights.cpp, Note [Weight names]): the exporters' names,
// round trips through safetensors for every zoo model, the refusal of bad files (and a model
// left as it was), Hugging Face's spellings of BERT's names, and the vision models' outputs
// against torchvision's for the same weights (tests/exec/torchvision_reference.py).
#include <gtest/gtest.h>

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>
#include <torch/torch.h>

#include "exec_test_support.hpp"
#include "psw/common/error.hpp"
#include "psw/common/safetensors.hpp"
#include "psw/exec/backend.hpp"
#include "psw/exec/model_zoo.hpp"
#include "psw/exec/pipeline.hpp"
#include "psw/exec/weights.hpp"
#include "../common/input_error.hpp"

namespace psw::exec {
namespace {

namespace fs = std::filesystem;
using testing_support::plan_for;
using testing_support::read_tensor;
using testing_support::relative_error;
using test_support::input_error_of;

// A directory of this test program's files, removed when the program ends.
const fs::path& scratch() {
  struct Scratch {
    fs::path path;
    Scratch() {
      std::string pattern = (fs::temp_directory_path() / "psw-weights-XXXXXX").string();
      if (mkdtemp(pattern.data()) == nullptr) throw std::runtime_error("mkdtemp failed");
      path = pattern;
    }
    ~Scratch() {
      std::error_code ec;
      fs::remove_all(path, ec);
    }
  };
  static const Scratch dir;
  return dir.path;
}

void write_file(const fs::path& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  ASSERT_TRUE(out.good()) << path;
}

std::string read_file(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

fs::path write_tensors(const std::string& file, const std::vector<SafetensorsTensor>& tensors) {
  const fs::path path = scratch() / file;
  write_file(path, write_safetensors(tensors));
  return path;
}

using testing_support::small_input;

std::vector<torch::Tensor> snapshot(ZooModel& model) {
  std::vector<torch::Tensor> out;
  for (const ZooLayer& layer : model.layers()) {
    for (const torch::Tensor& t : layer.tensors) out.push_back(t.detach().clone());
  }
  return out;
}

bool same_state(ZooModel& model, const std::vector<torch::Tensor>& state) {
  std::size_t k = 0;
  for (const ZooLayer& layer : model.layers()) {
    for (const torch::Tensor& t : layer.tensors) {
      if (k >= state.size() || !torch::equal(t, state[k++])) return false;
    }
  }
  return k == state.size();
}

SafetensorsTensor* find(std::vector<SafetensorsTensor>& tensors, const std::string& name) {
  for (SafetensorsTensor& t : tensors) {
    if (std::get<0>(t) == name) return &t;
  }
  return nullptr;
}

// Adds 0.5 to every element of an F32 tensor's bytes.
void perturb(SafetensorsTensor& t) {
  ASSERT_EQ(std::get<1>(t), TensorDtype::F32);
  std::string& bytes = std::get<3>(t);
  for (std::size_t i = 0; i + 4 <= bytes.size(); i += 4) {
    float v = 0;
    std::memcpy(&v, bytes.data() + i, 4);
    v += 0.5F;
    std::memcpy(bytes.data() + i, &v, 4);
  }
}

std::int64_t tensor_count(ZooModel& model) {
  std::int64_t n = 0;
  for (const ZooLayer& layer : model.layers()) n += static_cast<std::int64_t>(layer.tensors.size());
  return n;
}

// --- names ----------------------------------------------------------------------------------

TEST(WeightNames, AreTheExportersStateDictKeys) {
  struct Expected {
    std::string model;
    std::size_t count;  // torchvision's / Hugging Face's len(model.state_dict())
    std::vector<std::string> some;
  };
  const std::vector<Expected> expected{
      {"resnet152", 932,
       {"conv1.weight", "bn1.running_mean", "layer1.0.downsample.0.weight", "layer1.0.downsample.1.running_var",
        "layer3.35.bn3.num_batches_tracked", "layer4.2.conv3.weight", "fc.weight", "fc.bias"}},
      {"inception_v3", 580,
       {"Conv2d_1a_3x3.conv.weight", "Conv2d_1a_3x3.bn.running_var", "Mixed_5b.branch_pool.bn.bias",
        "Mixed_6e.branch7x7dbl_5.conv.weight", "AuxLogits.conv0.conv.weight", "AuxLogits.fc.bias",
        "Mixed_7c.branch3x3dbl_3b.bn.num_batches_tracked", "fc.weight"}},
      // BertModel of transformers >= 4.31 (position_ids no longer saved): 5 embedding tensors,
      // 16 per layer, 2 of the pooler.
      {"bert_base", 199,
       {"embeddings.word_embeddings.weight", "embeddings.token_type_embeddings.weight",
        "embeddings.LayerNorm.weight", "encoder.layer.0.attention.self.query.weight",
        "encoder.layer.11.attention.output.LayerNorm.bias", "encoder.layer.7.intermediate.dense.weight",
        "encoder.layer.11.output.dense.bias", "pooler.dense.weight"}},
  };
  for (const Expected& e : expected) {
    auto model = make_model(e.model);
    const std::vector<std::string> names = weight_names(*model);
    EXPECT_EQ(names.size(), e.count) << e.model;
    EXPECT_EQ(static_cast<std::int64_t>(names.size()), tensor_count(*model)) << e.model;
    EXPECT_EQ(std::set<std::string>(names.begin(), names.end()).size(), names.size()) << e.model << ": duplicates";
    for (const std::string& name : e.some) {
      EXPECT_NE(std::find(names.begin(), names.end(), name), names.end()) << e.model << " lacks " << name;
    }
  }
}

// --- round trips ----------------------------------------------------------------------------

// Per model, a tensor whose change must change the output (not BERT's key bias, which the
// softmax cancels).
std::string perturbed_tensor(const std::string& model) {
  if (model == "resnet152") return "layer3.5.bn2.running_var";
  if (model == "inception_v3") return "Mixed_6c.branch7x7dbl_3.conv.weight";
  return "encoder.layer.5.intermediate.dense.bias";
}

class WeightsRoundTrip : public ::testing::TestWithParam<std::string> {};

TEST_P(WeightsRoundTrip, OwnStateLoadsIntoADifferentlySeededModelExactly) {
  const std::string name = GetParam();
  auto source = make_model(name, 1);
  auto target = make_model(name, 2);
  const torch::Tensor input = small_input(*source, 3);
  const torch::Tensor expected = source->forward(input);
  ASSERT_GT(relative_error(target->forward(input), expected), 1e-2) << "the two seeds must differ";

  std::vector<SafetensorsTensor> tensors = weight_tensors(*source);
  const fs::path file = write_tensors(name + ".safetensors", tensors);
  const WeightsReport report = load_weights(*target, file);
  EXPECT_EQ(report.file, file.string());
  EXPECT_EQ(static_cast<std::int64_t>(report.loaded), tensor_count(*source));
  Bytes bytes = 0;
  for (const ZooLayer& layer : source->layers()) bytes += layer.bytes();
  EXPECT_EQ(report.bytes, bytes);
  EXPECT_TRUE(report.ignored.empty());
  EXPECT_TRUE(report.defaulted.empty());
  EXPECT_TRUE(same_state(*target, snapshot(*source)));
  EXPECT_TRUE(torch::equal(target->forward(input), expected)) << name;

  // The same file with one tensor changed: the loaded model's output moves with it.
  SafetensorsTensor* changed = find(tensors, perturbed_tensor(name));
  ASSERT_NE(changed, nullptr);
  perturb(*changed);
  const fs::path perturbed = write_tensors(name + "-perturbed.safetensors", tensors);
  load_weights(*target, perturbed);
  EXPECT_GT(relative_error(target->forward(input), expected), 1e-3) << name << " " << perturbed_tensor(name);
  // Hundreds of MB each: gone before the next test writes its own.
  fs::remove(file);
  fs::remove(perturbed);
}

TEST_P(WeightsRoundTrip, SaveWeightsWritesWhatLoadWeightsReads) {
  const std::string name = GetParam();
  auto source = make_model(name, 5);
  const fs::path file = scratch() / (name + "-saved.safetensors");
  save_weights(*source, file);
  const SafetensorsHeader header = read_safetensors_header(file);
  const std::vector<std::string> names = weight_names(*source);
  ASSERT_EQ(header.tensors.size(), names.size());
  for (const std::string& n : names) EXPECT_NE(header.find(n), nullptr) << n;
  auto target = make_model(name, 6);
  load_weights(*target, file);
  EXPECT_TRUE(same_state(*target, snapshot(*source)));
  EXPECT_THROW(save_weights(*source, scratch() / "no-such-dir" / "x.safetensors"), InputError);
  fs::remove(file);
}

INSTANTIATE_TEST_SUITE_P(Zoo, WeightsRoundTrip, ::testing::Values("resnet152", "inception_v3", "bert_base"),
                         [](const auto& p) { return p.param; });

// A bf16 model's state saved is a BF16 file (int64 BatchNorm counts stay I64) that loads
// into a bf16 model of another seed exactly, and that fp32 and fp16 models refuse by dtype:
// weights load in the model's dtype, without conversion. ResNet-152: BatchNorm's int64 counts
// sit among the bf16 tensors (inception_v3 is the same kinds, bert_base has no integer buffer).
TEST(WeightsDtype, Bf16FileRoundTripsIntoABf16ModelAndOtherDtypesRefuseIt) {
  auto source = make_model("resnet152", 1, torch::kBFloat16);
  auto target = make_model("resnet152", 2, torch::kBFloat16);
  const fs::path file = scratch() / "resnet152-bf16.safetensors";
  save_weights(*source, file);
  const SafetensorsHeader header = read_safetensors_header(file);
  ASSERT_NE(header.find("fc.weight"), nullptr);
  EXPECT_EQ(header.find("fc.weight")->dtype, TensorDtype::BF16);
  ASSERT_NE(header.find("bn1.num_batches_tracked"), nullptr);
  EXPECT_EQ(header.find("bn1.num_batches_tracked")->dtype, TensorDtype::I64);

  const torch::Tensor input = small_input(*source, 3);
  const torch::Tensor expected = source->forward(input);
  ASSERT_FALSE(torch::equal(target->forward(input), expected)) << "the two seeds must differ";
  const WeightsReport report = load_weights(*target, file);
  EXPECT_EQ(static_cast<std::int64_t>(report.loaded), tensor_count(*source));
  EXPECT_TRUE(same_state(*target, snapshot(*source)));
  EXPECT_EQ(target->layers()[0].tensors[0].scalar_type(), torch::kBFloat16);
  EXPECT_TRUE(torch::equal(target->forward(input), expected));

  for (const torch::ScalarType other : {torch::kFloat32, torch::kFloat16}) {
    auto refusing = make_model("resnet152", 2, other);
    const std::vector<torch::Tensor> before = snapshot(*refusing);
    try {
      load_weights(*refusing, file);
      ADD_FAILURE() << "a " << zoo_dtype_name(other) << " model loaded a bf16 file";
    } catch (const InputError& e) {
      const std::string what = e.what();
      EXPECT_NE(what.find("is BF16"), std::string::npos) << what;
      EXPECT_NE(what.find(other == torch::kFloat32 ? "is F32" : "is F16"), std::string::npos) << what;
    }
    EXPECT_TRUE(same_state(*refusing, before));  // left as it was
  }
  fs::remove(file);
}

// --- Hugging Face's spellings of BERT -------------------------------------------------------

TEST(WeightsBert, HuggingFaceCheckpointSpellingsLoadAndTheExtrasAreListed) {
  // A file as the hub's bert-base-uncased checkpoint (BertForPreTraining) spells it: every
  // key under "bert.", LayerNorm's gamma and beta, the positions buffer, and the pretraining
  // heads, which BertModel (and the zoo) has not. BERT-Tiny: the zoo's BERT at two layers of
  // 128 (the spellings are BERT-base's; its 440 MB made this a long test on CI's two cores).
  auto source = make_model("bert_tiny", 1);
  auto target = make_model("bert_tiny", 2);
  std::vector<SafetensorsTensor> tensors;
  for (auto [name, dtype, shape, bytes] : weight_tensors(*source)) {
    for (const auto& [from, to] : {std::pair<std::string, std::string>{".LayerNorm.weight", ".LayerNorm.gamma"},
                                   {".LayerNorm.bias", ".LayerNorm.beta"}}) {
      if (name.size() >= from.size() && name.compare(name.size() - from.size(), from.size(), from) == 0) {
        name = name.substr(0, name.size() - from.size()) + to;
      }
    }
    tensors.emplace_back("bert." + name, dtype, shape, std::move(bytes));
  }
  const torch::Tensor positions = torch::arange(512, torch::kInt64).unsqueeze(0);
  tensors.emplace_back("bert.embeddings.position_ids", TensorDtype::I64, std::vector<std::int64_t>{1, 512},
                       std::string(static_cast<const char*>(positions.data_ptr()), positions.nbytes()));
  tensors.emplace_back("cls.predictions.bias", TensorDtype::F32, std::vector<std::int64_t>{30522},
                       std::string(30522 * 4, '\0'));
  tensors.emplace_back("cls.seq_relationship.weight", TensorDtype::F32, std::vector<std::int64_t>{2, 128},
                       std::string(2 * 128 * 4, '\0'));
  const std::size_t model_tensors = weight_tensors(*source).size();
  const fs::path file = write_tensors("bert-hub.safetensors", tensors);
  const WeightsReport report = load_weights(*target, file);
  EXPECT_EQ(report.loaded, model_tensors);
  EXPECT_EQ(model_tensors + 3, tensors.size());
  EXPECT_EQ(std::set<std::string>(report.ignored.begin(), report.ignored.end()),
            (std::set<std::string>{"bert.embeddings.position_ids", "cls.predictions.bias",
                                   "cls.seq_relationship.weight"}));
  EXPECT_TRUE(same_state(*target, snapshot(*source)));
  const torch::Tensor input = small_input(*source, 4);
  EXPECT_TRUE(torch::equal(target->forward(input), source->forward(input)));

  // Both spellings of one tensor: refused, naming both.
  tensors.emplace_back("pooler.dense.bias", TensorDtype::F32, std::vector<std::int64_t>{128},
                       std::string(128 * 4, '\0'));
  const fs::path twice = write_tensors("bert-twice.safetensors", tensors);
  try {
    load_weights(*target, twice);
    FAIL() << "no InputError";
  } catch (const InputError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find(twice.string()), std::string::npos) << what;
    EXPECT_NE(what.find("\"bert.pooler.dense.bias\""), std::string::npos) << what;
    EXPECT_NE(what.find("\"pooler.dense.bias\""), std::string::npos) << what;
  }
  fs::remove(file);
  fs::remove(twice);
}

// --- bad files ------------------------------------------------------------------------------

// Files written from one Inception-v3 (seed 5) and loaded into another (seed 4): a refused
// file must leave the second as it was, which a partial load would not.
class WeightsBadFiles : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    model_ = make_model("inception_v3", 4);
    state_ = snapshot(*model_);
    tensors_ = weight_tensors(*make_model("inception_v3", 5));
  }
  static void TearDownTestSuite() {
    model_.reset();
    state_.clear();
    tensors_.clear();
  }

  // Loads `file`, expects an InputError whose message names the file and holds each of
  // `parts`, and the model unchanged.
  static void expect_refused(const fs::path& file, const std::vector<std::string>& parts) {
    try {
      load_weights(*model_, file);
      ADD_FAILURE() << "no InputError for " << file;
    } catch (const InputError& e) {
      const std::string what = e.what();
      EXPECT_NE(what.find(file.string()), std::string::npos) << what;
      for (const std::string& part : parts) EXPECT_NE(what.find(part), std::string::npos) << part << " in: " << what;
    }
    EXPECT_TRUE(same_state(*model_, state_)) << "a refused file changed the model";
    std::error_code ec;
    if (file.parent_path() == scratch()) fs::remove(file, ec);  // about 100 MB each
  }

  static std::vector<SafetensorsTensor> without(const std::string& prefix) {
    std::vector<SafetensorsTensor> out;
    for (const SafetensorsTensor& t : tensors_) {
      if (std::get<0>(t).rfind(prefix, 0) != 0) out.push_back(t);
    }
    return out;
  }

  inline static std::unique_ptr<ZooModel> model_;
  inline static std::vector<torch::Tensor> state_;
  inline static std::vector<SafetensorsTensor> tensors_;
};

TEST_F(WeightsBadFiles, MissingTensor) {
  const auto tensors = without("Mixed_6b.branch7x7_2.conv.weight");
  ASSERT_EQ(tensors.size() + 1, tensors_.size());
  expect_refused(write_tensors("missing.safetensors", tensors),
                 {"\"Mixed_6b.branch7x7_2.conv.weight\" is missing", "inception_v3"});
}

TEST_F(WeightsBadFiles, MissingAuxiliaryHeadSaysToExportIt) {
  // torchvision's inception_v3(aux_logits=False).state_dict(): 14 AuxLogits tensors fewer,
  // 12 of them required (the two num_batches_tracked may be absent).
  const auto tensors = without("AuxLogits.");
  ASSERT_EQ(tensors.size() + 14, tensors_.size());
  expect_refused(write_tensors("no-aux.safetensors", tensors),
                 {"\"AuxLogits.conv0.conv.weight\" is missing", "and 11 more", "aux_logits=True"});
}

TEST_F(WeightsBadFiles, ExtraTensor) {
  auto tensors = tensors_;
  tensors.emplace_back("classifier.weight", TensorDtype::F32, std::vector<std::int64_t>{10}, std::string(40, '\0'));
  expect_refused(write_tensors("extra.safetensors", tensors),
                 {"\"classifier.weight\" is not one of inception_v3's", "torchvision"});
  // DataParallel's prefix is not an exporter's name either.
  auto prefixed = tensors_;
  std::get<0>(prefixed.front()) = "module." + std::get<0>(prefixed.front());
  expect_refused(write_tensors("module-prefix.safetensors", prefixed), {"\"module.Conv2d_1a_3x3.conv.weight\""});
}

TEST_F(WeightsBadFiles, MisshapedTensor) {
  auto tensors = tensors_;
  SafetensorsTensor* fc = find(tensors, "fc.weight");
  ASSERT_NE(fc, nullptr);
  std::get<2>(*fc) = {2048, 1000};  // transposed: the same bytes, the wrong shape
  expect_refused(write_tensors("misshaped.safetensors", tensors),
                 {"\"fc.weight\" has shape [2048, 1000]", "is [1000, 2048]"});
}

TEST_F(WeightsBadFiles, WronglyTypedTensor) {
  auto tensors = tensors_;
  SafetensorsTensor* bias = find(tensors, "fc.bias");
  ASSERT_NE(bias, nullptr);
  std::get<1>(*bias) = TensorDtype::F64;
  std::get<3>(*bias) = std::string(1000 * 8, '\0');
  expect_refused(write_tensors("f64.safetensors", tensors), {"\"fc.bias\" is F64", "is F32"});
  // Buffers are checked as parameters are.
  auto buffers = tensors_;
  SafetensorsTensor* count = find(buffers, "Mixed_5b.branch1x1.bn.num_batches_tracked");
  ASSERT_NE(count, nullptr);
  std::get<1>(*count) = TensorDtype::F64;
  expect_refused(write_tensors("count-f64.safetensors", buffers),
                 {"\"Mixed_5b.branch1x1.bn.num_batches_tracked\" is F64", "is I64"});
}

TEST_F(WeightsBadFiles, NoFileAndNotASafetensorsFile) {
  expect_refused(scratch() / "absent.safetensors", {"does not exist"});
  const fs::path text = scratch() / "text.safetensors";
  write_file(text, "{\"this\": \"is JSON, not safetensors\"}");
  expect_refused(text, {});
}

// Note [Sharded weights]: a Hugging Face folder, its tensors in three shards with the index
// save_pretrained writes, loads as the single file does; a folder with model.safetensors too; the
// index checked against the shards.
TEST(WeightsSharded, AFolderOfShardsLoadsAsOneFileAndItsIndexIsChecked) {
  const std::string tiny = std::string(PSW_SOURCE_DIR) + "/configs/zoo/llama-tiny.yaml";
  auto source = make_model(tiny, 1);
  const torch::Tensor input = source->example_input(1, 3);
  const torch::Tensor expected = source->forward(input);
  const std::vector<SafetensorsTensor> tensors = weight_tensors(*source);
  const fs::path folder = scratch() / "tiny-sharded";
  fs::create_directories(folder);
  std::vector<std::vector<SafetensorsTensor>> shards(3);
  nlohmann::json index{{"metadata", {{"total_size", 0}}}, {"weight_map", nlohmann::json::object()}};
  for (std::size_t i = 0; i < tensors.size(); ++i) {
    const std::size_t s = i * 3 / tensors.size();
    shards[s].push_back(tensors[i]);
    index["weight_map"][std::get<0>(tensors[i])] = "model-0000" + std::to_string(s + 1) + "-of-00003.safetensors";
  }
  for (std::size_t s = 0; s < 3; ++s)
    write_file(folder / ("model-0000" + std::to_string(s + 1) + "-of-00003.safetensors"), write_safetensors(shards[s]));
  write_file(folder / "model.safetensors.index.json", index.dump());

  auto target = make_model(tiny, 2);
  const WeightsReport report = load_weights(*target, folder);
  EXPECT_EQ(static_cast<std::int64_t>(report.loaded), tensor_count(*source));
  EXPECT_TRUE(torch::equal(target->forward(input), expected));

  // A folder with one model.safetensors.
  const fs::path single = scratch() / "tiny-single";
  fs::create_directories(single);
  write_file(single / "model.safetensors", write_safetensors(tensors));
  auto other = make_model(tiny, 3);
  load_weights(*other, single);
  EXPECT_TRUE(torch::equal(other->forward(input), expected));

  const auto refused = [&](const nlohmann::json& bad_index) {
    write_file(folder / "model.safetensors.index.json", bad_index.dump());
    auto model = make_model(tiny, 4);
    const auto before = snapshot(*model);
    const std::string message = input_error_of([&] { load_weights(*model, folder); });
    EXPECT_TRUE(same_state(*model, before)) << "a refused folder changed the model";
    return message;
  };
  const std::string first = std::get<0>(tensors.front());
  nlohmann::json missing_shard = index;
  missing_shard["weight_map"][first] = "model-00009-of-00003.safetensors";
  EXPECT_NE(refused(missing_shard).find("shard model-00009-of-00003.safetensors (of tensor \"" + first + "\") is not in"),
            std::string::npos);
  nlohmann::json outside = index;
  outside["weight_map"][first] = "../model.safetensors";
  EXPECT_NE(refused(outside).find("is not a file name in the folder"), std::string::npos);
  nlohmann::json misplaced = index;
  misplaced["weight_map"][first] = "model-00003-of-00003.safetensors";
  EXPECT_NE(refused(misplaced).find("is mapped to model-00003-of-00003.safetensors, which does not hold it"),
            std::string::npos);
  EXPECT_NE(refused(nlohmann::json{{"metadata", {}}}).find("no 'weight_map'"), std::string::npos);
  // A tensor in two shards.
  write_file(folder / "model-00003-of-00003.safetensors", write_safetensors([&] {
               auto last = shards[2];
               last.push_back(tensors.front());
               return last;
             }()));
  const std::string twice = refused(index);  // the shards in the index's order of names
  EXPECT_NE(twice.find("\"" + first + "\" is in both model-0000"), std::string::npos) << twice;
  EXPECT_NE(twice.find("model-00001-of-00003.safetensors"), std::string::npos) << twice;
  EXPECT_NE(twice.find("model-00003-of-00003.safetensors"), std::string::npos) << twice;
  fs::remove(folder / "model.safetensors.index.json");
  EXPECT_NE(input_error_of([&] { load_weights(*target, folder); }).find("holds model.safetensors.index.json (sharded) or model.safetensors"),
            std::string::npos);
  fs::remove_all(folder);
  fs::remove_all(single);
}

TEST(WeightsOptional, BatchNormCountsMayBeAbsentAndAreZeroed) {
  // Checkpoints from before num_batches_tracked (torchvision's original ImageNet files):
  // torch.nn.BatchNorm's loader sets it to 0, and so does load_weights, listing each.
  auto source = make_model("resnet152", 1);
  auto target = make_model("resnet152", 2);
  std::vector<SafetensorsTensor> tensors;
  std::size_t counts = 0;
  for (auto& t : weight_tensors(*source)) {
    const std::string& name = std::get<0>(t);
    if (name.size() > 20 && name.compare(name.size() - 20, 20, ".num_batches_tracked") == 0) {
      ++counts;
    } else {
      tensors.push_back(std::move(t));
    }
  }
  ASSERT_EQ(counts, 155U);  // one per BatchNorm
  for (ZooLayer& layer : target->layers()) {
    for (std::size_t i = 0; i < layer.tensors.size(); ++i) {
      if (layer.tensor_names[i] == "num_batches_tracked") layer.tensors[i].fill_(9);
    }
  }
  const fs::path file = write_tensors("no-counts.safetensors", tensors);
  const WeightsReport report = load_weights(*target, file);
  fs::remove(file);
  EXPECT_EQ(report.defaulted.size(), counts);
  EXPECT_EQ(report.loaded, tensors.size());
  for (ZooLayer& layer : target->layers()) {
    for (std::size_t i = 0; i < layer.tensors.size(); ++i) {
      if (layer.tensor_names[i] == "num_batches_tracked") {
        EXPECT_EQ(layer.tensors[i].item<std::int64_t>(), 0) << layer.name;
      }
    }
  }
  const torch::Tensor input = small_input(*source, 2);
  EXPECT_TRUE(torch::equal(target->forward(input), source->forward(input)));
}

// --- torchvision ----------------------------------------------------------------------------

// Note [Torchvision reference]: torchvision_reference.py builds torchvision's model with
// seeded weights and writes its state_dict, an input and torchvision's output for it. The
// zoo's model, loaded from that file, switched in through the pipeline engine on the host
// backend (device region poisoned first), must give the same output within fp32 rounding:
// max |zoo - torchvision| <= 1e-4 x max |torchvision| (both run LibTorch 1.13's CPU kernels;
// summation order may differ, nothing else). The same file with two same-shaped tensors'
// names swapped must miss by far more: the load goes by name, not by position.
struct ReferenceCase {
  std::string model;
  std::string swap_a, swap_b;  // same shape, different role
};

// For test names and messages (gtest would print the struct's bytes).
void PrintTo(const ReferenceCase& c, std::ostream* os) { *os << c.model; }

class TorchvisionReference : public ::testing::TestWithParam<ReferenceCase> {};

// `from` with the names of tensors a and b exchanged (the data stays where it is).
void write_swapped(const fs::path& from, const fs::path& to, const std::string& a, const std::string& b) {
  const std::string bytes = read_file(from);
  const SafetensorsHeader header = parse_safetensors_header(bytes, bytes.size(), from.string());
  ASSERT_NE(header.find(a), nullptr) << a;
  ASSERT_NE(header.find(b), nullptr) << b;
  ASSERT_EQ(header.find(a)->shape, header.find(b)->shape);
  auto document = nlohmann::ordered_json::parse(bytes.substr(8, header.data_offset - 8));
  std::swap(document[a]["data_offsets"], document[b]["data_offsets"]);
  std::string text = document.dump();
  text.append((8 - text.size() % 8) % 8, ' ');
  std::string out(8, '\0');
  for (std::size_t i = 0; i < 8; ++i) out[i] = static_cast<char>((text.size() >> (8 * i)) & 0xFF);
  out += text;
  out.append(bytes, header.data_offset);
  write_file(to, out);
}

TEST_P(TorchvisionReference, ZooOutputEqualsTorchvisionForTheSameWeights) {
  const ReferenceCase& c = GetParam();
  const fs::path dir = scratch() / ("torchvision-" + c.model);
  fs::create_directories(dir);
  // Debian's python3-torchvision is in /usr/bin/python3's path only (not a pyenv's).
  const std::string python = fs::exists("/usr/bin/python3") ? "/usr/bin/python3" : "python3";
  const std::string command = python + " " + PSW_SOURCE_DIR + "/tests/exec/torchvision_reference.py --model " +
                              c.model + " --out " + dir.string();
  ASSERT_EQ(std::system(command.c_str()), 0) << command;
  const fs::path weights = dir / (c.model + ".safetensors");
  const torch::Tensor input = read_tensor(dir / (c.model + "_io.safetensors"), "input");
  const torch::Tensor reference = read_tensor(dir / (c.model + "_io.safetensors"), "output");
  ASSERT_EQ(reference.sizes(), (std::vector<std::int64_t>{1, 1000}));
  const double scale = reference.abs().max().item<double>();
  ASSERT_GT(scale, 0.1) << "a degenerate reference output";

  auto model = make_model(c.model, 99);
  const WeightsReport report = load_weights(*model, weights);
  EXPECT_EQ(static_cast<std::int64_t>(report.loaded), tensor_count(*model)) << "every tensor of the file is the model's";
  EXPECT_TRUE(report.ignored.empty());
  EXPECT_TRUE(report.defaulted.empty());
  auto backend = make_host_backend();
  auto pipeline = make_private_pipeline(*backend, *model, plan_for(c.model, Strategy::Optimal));
  pipeline->engine->poison_device_parameters(0xA5);
  const torch::Tensor out = pipeline->engine->switch_in_and_run(input.to(backend->device())).to(torch::kCPU);
  const double diff = (out - reference).abs().max().item<double>();
  std::cout << c.model << " vs torchvision: max |diff| " << diff << ", max |output| " << scale << ", relative "
            << diff / scale << "\n";
  RecordProperty("max_abs_diff", std::to_string(diff));
  RecordProperty("max_abs_output", std::to_string(scale));
  EXPECT_LE(diff, 1e-4 * scale);

  const fs::path swapped = dir / (c.model + "-swapped.safetensors");
  write_swapped(weights, swapped, c.swap_a, c.swap_b);
  auto wrong = make_model(c.model, 99);
  load_weights(*wrong, swapped);
  const double wrong_diff = (wrong->forward(input) - reference).abs().max().item<double>();
  std::cout << c.model << " with " << c.swap_a << " and " << c.swap_b << " swapped: max |diff| " << wrong_diff << "\n";
  EXPECT_GT(wrong_diff, 1e-2 * scale) << "swapping two tensors' names must change the output";
  fs::remove_all(dir);
}

INSTANTIATE_TEST_SUITE_P(
    Vision, TorchvisionReference,
    ::testing::Values(ReferenceCase{"resnet152", "layer3.1.conv2.weight", "layer3.2.conv2.weight"},
                      ReferenceCase{"inception_v3", "Conv2d_1a_3x3.bn.running_mean", "Conv2d_1a_3x3.bn.bias"}),
    [](const auto& p) { return p.param.model; });

}  // namespace
}  // namespace psw::exec
