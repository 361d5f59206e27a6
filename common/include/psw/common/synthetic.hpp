#pragma once
// Synthetic model profiles of any depth, for tests and benchmarks: the layer structure
// and analytic costs of a BERT-like transformer or a ResNet-like CNN, at a chosen depth.

#include <cstddef>
#include <string>

#include "psw/common/model_profile.hpp"

namespace psw {

enum class SyntheticKind { Transformer, Cnn };

SyntheticKind parse_synthetic_kind(const std::string& text);  // throws InputError

// A transformer of `blocks` encoder blocks (hidden 768, 12 heads, sequence 128): 4
// embedding layers, 8 layers per block, a pooler.
ModelProfile make_synthetic_transformer(std::size_t blocks, int batch = 8);
// A CNN of `stages` stages of 3 bottleneck blocks each (stem, 6 layers per block plus a
// downsample pair per stage, classifier); channels double and resolution halves per
// stage, capped so that deep CNNs stay plausible.
ModelProfile make_synthetic_cnn(std::size_t stages, int batch = 8);
// Exactly `num_layers` layers of the given kind: the smallest model of that kind with at
// least that many layers, cut to length.
ModelProfile make_synthetic_layers(SyntheticKind kind, std::size_t num_layers, int batch = 8);

}  // namespace psw
