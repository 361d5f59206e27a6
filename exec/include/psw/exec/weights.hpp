#pragma once
// The user's own weights: a zoo model's parameters and buffers from a
// safetensors file, by the names the usual exporters write (Note [Weight names] in
// exec/src/weights.cpp), and the model's own state written as such a file.
//
//   auto model = make_model("resnet152");        // random, seeded
//   load_weights(*model, "resnet152.safetensors"); // torchvision's state_dict, now the model's
//   auto pipeline = make_private_pipeline(backend, *model, plan);  // packs the loaded values
//
// Weights go into the model's tensors, each read once from the file straight into the
// tensor's memory (on the CPU; one tensor-sized buffer per tensor on another device), before
// anything packs them into a parameter store. The file's bytes are never held whole.

#include <cstddef>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include <c10/core/ScalarType.h>

#include "psw/common/safetensors.hpp"
#include "psw/common/units.hpp"

namespace psw::exec {

class ZooModel;

struct WeightsReport {
  std::string file;
  std::size_t loaded = 0;  // model tensors read from the file
  Bytes bytes = 0;         // their bytes
  // File tensors the model's name map ignores on purpose (Note [Weight names]), as the file
  // names them, e.g. BERT's pretraining heads "cls.predictions.bias".
  std::vector<std::string> ignored;
  // Model tensors the file lacks that the name map lets default (BatchNorm's
  // num_batches_tracked, set to 0 as torch.nn.BatchNorm's loader does), as the model names them.
  std::vector<std::string> defaulted;
};

// Loads `file` into `model`'s parameters and buffers. `file` may be a Hugging Face folder: its
// model.safetensors, or the shards its model.safetensors.index.json names (Note [Sharded weights]
// in exec/src/weights.cpp). Every name, shape and dtype is checked
// before the first byte of data is read, so a refused file leaves the model as it was.
// InputError, naming the file and the tensor, for: a file that is not a valid safetensors
// file (psw/common/safetensors.hpp); a model tensor the file lacks; a file tensor that is
// not the model's and not one the name map ignores; two file tensors for one model tensor
// (e.g. "bert.pooler.dense.bias" and "pooler.dense.bias"); a shape or a dtype other than the
// model tensor's (no conversion).
// Load before the model is packed (ParameterStore::pack, make_private_pipeline): a store
// holds a copy of the values it was packed from, and a switch copies the store's bytes.
WeightsReport load_weights(ZooModel& model, const std::filesystem::path& file);

// The safetensors dtype of a torch dtype; nullopt for one the format cannot hold.
std::optional<TensorDtype> safetensors_dtype(c10::ScalarType type);

// The model's tensors by the exporter's names (Note [Weight names]), in layer order: what a
// file must hold, and what save_weights writes.
std::vector<std::string> weight_names(ZooModel& model);
// The model's current parameters and buffers as safetensors tensors (weight_names, the
// model's dtypes and shapes, the bytes copied to the host).
std::vector<SafetensorsTensor> weight_tensors(ZooModel& model);
// write_safetensors(weight_tensors(model)) into `file` (replaced if it exists); a file that
// load_weights reads back exactly. InputError when the file cannot be written.
void save_weights(ZooModel& model, const std::filesystem::path& file);

}  // namespace psw::exec
