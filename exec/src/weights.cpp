// The user's own weights: the name map per model (Note [Weight names]), the checks and the
// reads of load_weights, and the writer of a model's state.
#include "psw/exec/weights.hpp"

#include <algorithm>
#include <bit>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <unordered_map>
#include <utility>

#include <nlohmann/json.hpp>
#include <torch/torch.h>

#include "psw/common/error.hpp"
#include "psw/common/input_file.hpp"
#include "psw/exec/decoder.hpp"
#include "psw/exec/model_zoo.hpp"

namespace psw::exec {
namespace {

// Note [Weight names]
// ~~~~~~~~~~~~~~~~~~~
// The zoo's modules carry the originals' names (models/zoo_base.hpp), so a zoo tensor's name,
// its layer's name + "." + its name in the module, is already the key that the usual exporter
// writes for it:
//  - resnet152:    torchvision's resnet152().state_dict(): "conv1.weight",
//                  "layer1.0.downsample.1.running_var", "fc.bias", ...;
//  - inception_v3: torchvision's inception_v3(aux_logits=True).state_dict():
//                  "Conv2d_1a_3x3.conv.weight", "Mixed_7c.branch_pool.bn.running_mean",
//                  "AuxLogits.fc.weight", "fc.bias", ...;
//  - bert_base, bert_tiny: Hugging Face's BertModel (bert-base-uncased,
//                  google/bert_uncased_L-2_H-128_A-2) state_dict, as save_pretrained
//                  writes model.safetensors: "embeddings.word_embeddings.weight",
//                  "encoder.layer.0.attention.self.query.weight", "pooler.dense.bias", ...
// The table below (kNameMaps, the one place) therefore lists only how other files of the
// same model differ, per model:
//  - strip: a prefix that a wrapper of the model adds to every key ("bert." in the files of
//    BertForPreTraining, BertForMaskedLM, ..., such as the hub's bert-base-uncased file);
//  - rename: old spellings of a key's end (the original BERT checkpoints' "LayerNorm.gamma"
//    and "LayerNorm.beta", which transformers still renames to weight and bias on load);
//  - ignore: file tensors that the zoo's model does not have and that play no part in its
//    output; each one is listed in WeightsReport::ignored (psw run prints them), never dropped
//    silently. BERT's pretraining heads "cls.*" (masked-LM and next-sentence heads, absent from
//    BertModel) and "embeddings.position_ids" (the positions 0..511, a buffer that transformers
//    before 4.31 saved; the zoo computes them);
//  - optional: model tensors that a file may lack: BatchNorm's num_batches_tracked, which
//    torch.nn.BatchNorm's own loader sets to 0 for a state dict without it (checkpoints saved
//    before PyTorch 0.4.1, such as torchvision's original ImageNet weights). It plays no part
//    in the eval forward; load_weights sets it to 0 too and lists it in
//    WeightsReport::defaulted.
// Everything else is refused with an InputError naming the file and the tensor: a file
// tensor that maps to no model tensor (e.g. under DataParallel's "module." prefix); a model
// tensor that the file lacks (torchvision's inception_v3 exported with aux_logits=False lacks
// AuxLogits.*: the zoo's model has that head, which training runs, so the file must have it
// too); a shape other than the model's (e.g. a classifier for another number of classes); a
// dtype other than the model's (no conversion: a bf16 or fp16 file loads into the zoo's model
// made in that dtype, make_model(name, seed, torch::kBFloat16), psw run --dtype bf16).
struct IgnoreRule {
  std::string name;
  bool prefix;  // every name that starts with `name`; else only `name` itself
};

struct MissingHint {
  std::string prefix;  // for a missing model tensor whose name starts with this
  std::string hint;
};

struct NameMap {
  std::string model;
  std::string exporter;  // whose names the zoo's are, for messages
  std::vector<std::string> strip;
  std::vector<std::pair<std::string, std::string>> rename;  // old ending -> the zoo's ending
  std::vector<IgnoreRule> ignore;
  std::vector<std::string> optional;  // endings of model tensors a file may lack
  std::vector<MissingHint> hints;
};

// The zoo's BERTs (bert_base, bert_tiny) are BertModel in two sizes: the same names.
NameMap bert_name_map(const std::string& model, const std::string& checkpoint) {
  return {model,
          "Hugging Face BertModel's state_dict (" + checkpoint + ")",
          {"bert."},
          {{".LayerNorm.gamma", ".LayerNorm.weight"}, {".LayerNorm.beta", ".LayerNorm.bias"}},
          {{"cls.", true}, {"embeddings.position_ids", false}},
          {},
          {{"pooler.", "the zoo's " + model + " has BertModel's pooler (add_pooling_layer=True)"}}};
}

const std::vector<NameMap>& name_maps() {
  static const std::vector<NameMap> kNameMaps{
      {"resnet152",
       "torchvision's resnet152().state_dict()",
       {},
       {},
       {},
       {".num_batches_tracked"},
       {}},
      {"inception_v3",
       "torchvision's inception_v3(aux_logits=True).state_dict()",
       {},
       {},
       {},
       {".num_batches_tracked"},
       {{"AuxLogits.",
         "the zoo's inception_v3 has torchvision's auxiliary head (training runs it), so the file "
         "must too: export inception_v3(aux_logits=True)"}}},
      bert_name_map("bert_base", "bert-base-uncased"),
      bert_name_map("bert_tiny", "google/bert_uncased_L-2_H-128_A-2"),
  };
  return kNameMaps;
}

const NameMap& name_map_of(ZooModel& model) {
  // The decoders' names are Hugging Face LlamaForCausalLM's own (whatever the config's name).
  // A tied checkpoint has no lm_head.weight; loaded into an untied config it is missing.
  static const NameMap kDecoder{"(decoder)",
                                "Hugging Face LlamaForCausalLM's state_dict",
                                {},
                                {},
                                {},
                                {},
                                {{"lm_head.", "the file's head is tied to the embedding: set tie_embeddings: true in "
                                              "the decoder's config"}}};
  if (as_decoder(model) != nullptr) return kDecoder;
  for (const NameMap& map : name_maps()) {
    if (map.model == model.name()) return map;
  }
  throw Error("internal error: no weight name map for zoo model '" + model.name() + "' (weights.cpp)");
}

bool starts_with(const std::string& text, const std::string& prefix) {
  return text.compare(0, prefix.size(), prefix) == 0;
}

bool ends_with(const std::string& text, const std::string& suffix) {
  return text.size() >= suffix.size() &&
         text.compare(text.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// A name quoted as JSON: file names may hold quotes or control characters.
std::string json_quoted(const std::string& text) {
  return nlohmann::json(text).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

std::string shape_text(c10::IntArrayRef shape) {
  std::string out = "[";
  for (std::size_t i = 0; i < shape.size(); ++i) {
    if (i > 0) out += ", ";
    out += std::to_string(shape[i]);
  }
  return out + "]";
}

TensorDtype dtype_of(const torch::Tensor& t, const std::string& name) {
  const std::optional<TensorDtype> dtype = safetensors_dtype(t.scalar_type());
  PSW_CHECK(dtype.has_value(), "tensor ", name, " has dtype ", t.scalar_type(),
            ", which safetensors cannot hold");
  return *dtype;
}

// One model tensor and the file tensor it is read from.
struct Target {
  std::string name;  // the exporter's (Note [Weight names])
  torch::Tensor tensor;
  const SafetensorsEntry* entry = nullptr;
  std::size_t shard = 0;  // the file of `entry` (Note [Sharded weights])
  bool optional = false;
};

// Note [Sharded weights]
// ~~~~~~~~~~~~~~~~~~~~~~
// Weights come as one safetensors file or as a Hugging Face folder: `model.safetensors`, or the
// shards that `model.safetensors.index.json` names (its "weight_map": tensor name -> shard file,
// as `save_pretrained` writes it when a model is larger than one shard). A folder's tensors are
// the union of its shards'. The index is checked against the shards before any data is read:
// a shard it names that is missing or outside the folder, a tensor it maps to a shard that
// lacks it, and a tensor in two shards are refused, naming the file.
struct WeightShard {
  std::filesystem::path file;
  SafetensorsHeader header;
};

constexpr const char* kShardIndex = "model.safetensors.index.json";
constexpr const char* kSingleFile = "model.safetensors";

std::vector<WeightShard> open_weight_shards(const std::filesystem::path& path) {
  std::error_code ec;
  if (!std::filesystem::is_directory(path, ec)) return {{path, read_safetensors_header(path)}};
  const std::filesystem::path index_file = path / kShardIndex;
  if (!std::filesystem::exists(index_file, ec)) {
    if (std::filesystem::exists(path / kSingleFile, ec)) return {{path / kSingleFile, read_safetensors_header(path / kSingleFile)}};
    throw InputError(path.string() + ": a weights folder holds " + kShardIndex + " (sharded) or " + kSingleFile +
                     "; this one has neither");
  }
  const nlohmann::json index = read_json_object(index_file, "a sharded weights index (weight_map: tensor -> file)");
  const auto map = index.find("weight_map");
  if (map == index.end() || !map->is_object() || map->empty())
    throw InputError(index_file.string() + ": no 'weight_map' object of tensor names to shard files");
  std::vector<WeightShard> shards;
  std::map<std::string, std::size_t> shard_of_file;
  std::vector<std::pair<std::string, std::size_t>> mapped;
  for (const auto& [tensor, file] : map->items()) {
    if (!file.is_string()) throw InputError(index_file.string() + ": weight_map[" + json_quoted(tensor) + "] is not a file name");
    const std::string name = file.get<std::string>();
    if (name.empty() || name.find('/') != std::string::npos || name == "." || name == "..")
      throw InputError(index_file.string() + ": shard '" + name + "' of tensor " + json_quoted(tensor) +
                       " is not a file name in the folder");
    auto [it, added] = shard_of_file.emplace(name, shards.size());
    if (added) {
      const std::filesystem::path shard = path / name;
      if (!std::filesystem::is_regular_file(shard, ec))
        throw InputError(index_file.string() + ": shard " + name + " (of tensor " + json_quoted(tensor) + ") is not in " +
                         path.string());
      shards.push_back({shard, read_safetensors_header(shard)});
    }
    mapped.emplace_back(tensor, it->second);
  }
  for (const auto& [tensor, s] : mapped)
    if (shards[s].header.find(tensor) == nullptr)
      throw InputError(index_file.string() + ": tensor " + json_quoted(tensor) + " is mapped to " + shards[s].file.filename().string() +
                       ", which does not hold it");
  std::map<std::string, std::size_t> seen;
  for (std::size_t s = 0; s < shards.size(); ++s)
    for (const auto& entry : shards[s].header.tensors)
      if (auto [it, added] = seen.emplace(entry.name, s); !added)
        throw InputError(path.string() + ": tensor " + json_quoted(entry.name) + " is in both " +
                         shards[it->second].file.filename().string() + " and " + shards[s].file.filename().string());
  return shards;
}

std::vector<Target> targets_of(ZooModel& model) {
  const NameMap& map = name_map_of(model);
  std::vector<Target> targets;
  for (const ZooLayer& layer : model.layers()) {
    PSW_CHECK(layer.tensor_names.size() == layer.tensors.size(), "layer ", layer.name, " has ",
              layer.tensors.size(), " tensors and ", layer.tensor_names.size(), " names");
    for (std::size_t i = 0; i < layer.tensors.size(); ++i) {
      Target t;
      t.name = layer.name + "." + layer.tensor_names[i];
      t.tensor = layer.tensors[i];
      t.optional = std::any_of(map.optional.begin(), map.optional.end(),
                               [&](const std::string& ending) { return ends_with(t.name, ending); });
      targets.push_back(std::move(t));
    }
  }
  return targets;
}

}  // namespace

std::optional<TensorDtype> safetensors_dtype(torch::ScalarType type) {
  switch (type) {
    case torch::kFloat64: return TensorDtype::F64;
    case torch::kFloat32: return TensorDtype::F32;
    case torch::kFloat16: return TensorDtype::F16;
    case torch::kBFloat16: return TensorDtype::BF16;
    case torch::kInt64: return TensorDtype::I64;
    case torch::kInt32: return TensorDtype::I32;
    case torch::kInt16: return TensorDtype::I16;
    case torch::kInt8: return TensorDtype::I8;
    case torch::kUInt8: return TensorDtype::U8;
    case torch::kBool: return TensorDtype::Bool;
    default: return std::nullopt;
  }
}

std::vector<std::string> weight_names(ZooModel& model) {
  std::vector<std::string> names;
  for (const Target& t : targets_of(model)) names.push_back(t.name);
  return names;
}

std::vector<SafetensorsTensor> weight_tensors(ZooModel& model) {
  std::vector<SafetensorsTensor> tensors;
  for (const Target& t : targets_of(model)) {
    const torch::Tensor host = t.tensor.detach().to(torch::kCPU).contiguous();
    std::string bytes(static_cast<const char*>(host.data_ptr()), host.nbytes());
    tensors.emplace_back(t.name, dtype_of(host, t.name),
                         std::vector<std::int64_t>(host.sizes().begin(), host.sizes().end()),
                         std::move(bytes));
  }
  return tensors;
}

void save_weights(ZooModel& model, const std::filesystem::path& file) {
  const std::string bytes = write_safetensors(weight_tensors(model));
  std::ofstream out(file, std::ios::binary | std::ios::trunc);
  if (out) out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  out.close();
  if (!out) throw InputError(file.string() + ": cannot write the safetensors file");
}

WeightsReport load_weights(ZooModel& model, const std::filesystem::path& file) {
  // The format's data is little-endian; it is read into the tensors as it is.
  static_assert(std::endian::native == std::endian::little, "safetensors needs a little-endian host");
  const std::string origin = file.string();
  const std::vector<WeightShard> shards = open_weight_shards(file);
  std::size_t file_tensors = 0;
  for (const auto& shard : shards) file_tensors += shard.header.tensors.size();
  const NameMap& map = name_map_of(model);
  std::vector<Target> targets = targets_of(model);
  std::unordered_map<std::string, std::size_t> index;
  for (std::size_t i = 0; i < targets.size(); ++i) {
    PSW_CHECK(index.emplace(targets[i].name, i).second, model.name(), " has two tensors named ",
              targets[i].name);
  }

  WeightsReport report;
  report.file = origin;
  // Names: each file tensor is one model tensor's or ignored (Note [Weight names]).
  std::vector<std::pair<std::size_t, const SafetensorsEntry*>> file_entries;
  for (std::size_t s = 0; s < shards.size(); ++s)
    for (const SafetensorsEntry& entry : shards[s].header.tensors) file_entries.emplace_back(s, &entry);
  for (const auto& [s, entry_ptr] : file_entries) {
    const SafetensorsEntry& entry = *entry_ptr;
    const std::string where = shards[s].file.string();
    std::string name = entry.name;
    for (const std::string& prefix : map.strip) {
      if (starts_with(name, prefix)) {
        name.erase(0, prefix.size());
        break;
      }
    }
    const bool ignored = std::any_of(map.ignore.begin(), map.ignore.end(), [&](const IgnoreRule& r) {
      return r.prefix ? starts_with(name, r.name) : name == r.name;
    });
    if (ignored) {
      report.ignored.push_back(entry.name);
      continue;
    }
    for (const auto& [old_ending, ending] : map.rename) {
      if (ends_with(name, old_ending)) {
        name.replace(name.size() - old_ending.size(), old_ending.size(), ending);
        break;
      }
    }
    const auto it = index.find(name);
    if (it == index.end()) {
      throw InputError(where + ": tensor " + json_quoted(entry.name) + " is not one of " + model.name() +
                       "'s (it takes the names of " + map.exporter + ", e.g. " +
                       json_quoted(targets.front().name) + ")");
    }
    Target& target = targets[it->second];
    if (target.entry != nullptr) {
      throw InputError(where + ": tensors " + json_quoted(target.entry->name) + " and " + json_quoted(entry.name) +
                       " are both " + model.name() + "'s " + json_quoted(name));
    }
    target.entry = &entry;
    target.shard = s;
  }
  const Target* first_missing = nullptr;
  std::size_t missing = 0;
  for (const Target& t : targets) {
    if (t.entry != nullptr || t.optional) continue;
    if (first_missing == nullptr) first_missing = &t;
    ++missing;
  }
  if (first_missing != nullptr) {
    std::string message = origin + ": " + model.name() + "'s tensor " + json_quoted(first_missing->name) +
                           " is missing";
    if (missing > 1) message += " (and " + std::to_string(missing - 1) + " more of its " +
                                std::to_string(targets.size()) + ")";
    message += (shards.size() == 1 ? "; the file has " : "; its " + std::to_string(shards.size()) + " files have ") +
               std::to_string(file_tensors) + " tensors, and " +
               model.name() + " takes the names of " + map.exporter;
    for (const MissingHint& h : map.hints) {
      if (starts_with(first_missing->name, h.prefix)) message += " (" + h.hint + ")";
    }
    throw InputError(message);
  }
  // Shapes and dtypes, all before any data is read.
  for (const Target& t : targets) {
    if (t.entry == nullptr) continue;
    const std::string where = shards[t.shard].file.string();
    const c10::IntArrayRef want = t.tensor.sizes();
    if (!std::equal(want.begin(), want.end(), t.entry->shape.begin(), t.entry->shape.end())) {
      throw InputError(where + ": tensor " + json_quoted(t.entry->name) + " has shape " +
                       shape_text(t.entry->shape) + ", but " + model.name() + "'s " + json_quoted(t.name) +
                       " is " + shape_text(want));
    }
    const TensorDtype dtype = dtype_of(t.tensor, t.name);
    if (t.entry->dtype != dtype) {
      throw InputError(where + ": tensor " + json_quoted(t.entry->name) + " is " + to_string(t.entry->dtype) +
                       ", but " + model.name() + "'s " + json_quoted(t.name) + " is " + to_string(dtype) +
                       " (weights load in the model's dtype, without conversion)");
    }
  }

  // The data: each tensor read once, in file order, straight into the model's memory when it
  // is on the CPU (as the zoo builds models); through one tensor-sized host buffer otherwise.
  std::vector<Target*> reads;
  for (Target& t : targets) {
    if (t.entry != nullptr) reads.push_back(&t);
  }
  std::sort(reads.begin(), reads.end(), [](const Target* a, const Target* b) {
    return a->shard != b->shard ? a->shard < b->shard : a->entry->begin < b->entry->begin;
  });
  torch::NoGradGuard no_grad;
  for (Target* t : reads) {
    torch::Tensor& dst = t->tensor;
    if (dst.device().is_cpu() && dst.is_contiguous()) {
      read_safetensors_tensor(shards[t->shard].file, shards[t->shard].header, *t->entry, dst.data_ptr());
    } else {
      torch::Tensor host = torch::empty(dst.sizes(), dst.options().device(torch::kCPU));
      read_safetensors_tensor(shards[t->shard].file, shards[t->shard].header, *t->entry, host.data_ptr());
      dst.copy_(host);
    }
    ++report.loaded;
    report.bytes += static_cast<Bytes>(t->entry->bytes());
  }
  for (Target& t : targets) {
    if (t.entry != nullptr) continue;
    t.tensor.zero_();  // Note [Weight names]: optional, as torch.nn.BatchNorm's loader does
    report.defaulted.push_back(t.name);
  }
  return report;
}

}  // namespace psw::exec
