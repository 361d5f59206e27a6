// The decoder family's config files (decoder_config.hpp): the shipped ones, and one clear
// error per kind of mistake.
#include <gtest/gtest.h>

#include <string>

#include "input_error.hpp"
#include "psw/common/decoder_config.hpp"

namespace psw {
namespace {

using test_support::input_error_of;

const std::string kTiny = R"(name: tiny
architecture: llama
layers: 2
hidden: 64
heads: 4
kv_heads: 2
intermediate: 224
vocabulary: 512
rope_theta: 10000
rms_norm_eps: 1.0e-5
max_positions: 256
)";

std::string replaced(std::string text, const std::string& from, const std::string& to) {
  text.replace(text.find(from), from.size(), to);
  return text;
}

TEST(DecoderConfig, ParsesEveryKey) {
  const DecoderConfig c = parse_decoder_config(kTiny + "tie_embeddings: true\n", "tiny.yaml");
  EXPECT_EQ(c.name, "tiny");
  EXPECT_EQ(c.layers, 2);
  EXPECT_EQ(c.hidden, 64);
  EXPECT_EQ(c.heads, 4);
  EXPECT_EQ(c.kv_heads, 2);
  EXPECT_EQ(c.head_dim(), 16);
  EXPECT_EQ(c.intermediate, 224);
  EXPECT_EQ(c.vocabulary, 512);
  EXPECT_TRUE(c.tie_embeddings);
  EXPECT_DOUBLE_EQ(c.rope_theta, 10000.0);
  EXPECT_DOUBLE_EQ(c.rms_norm_eps, 1e-5);
  EXPECT_EQ(c.max_positions, 256);
  // embedding + 2 x (q, o: 64 x 64; k, v: 64 x 32; MLP 3 x 64 x 224; norms) + norm, tied.
  EXPECT_EQ(c.parameter_count(), 512 * 64 + 2 * (2 * 64 * 64 + 2 * 64 * 32 + 3 * 64 * 224 + 2 * 64) + 64);
  EXPECT_FALSE(parse_decoder_config(kTiny, "tiny.yaml").tie_embeddings);
}

TEST(DecoderConfig, ParsesALlama3RopeScaling) {
  EXPECT_FALSE(parse_decoder_config(kTiny, "tiny.yaml").rope_scaling);
  const DecoderConfig c = parse_decoder_config(kTiny + R"(rope_scaling:
  type: llama3
  factor: 32
  low_freq_factor: 1
  high_freq_factor: 4
  original_max_positions: 8192
)", "tiny.yaml");
  ASSERT_TRUE(c.rope_scaling);
  EXPECT_DOUBLE_EQ(c.rope_scaling->factor, 32.0);
  EXPECT_DOUBLE_EQ(c.rope_scaling->low_freq_factor, 1.0);
  EXPECT_DOUBLE_EQ(c.rope_scaling->high_freq_factor, 4.0);
  EXPECT_EQ(c.rope_scaling->original_max_positions, 8192);
}

TEST(DecoderConfig, ShippedConfigsLoad) {
  for (const char* name : {"llama-tiny", "llama-1b", "llama-8b"}) {
    const DecoderConfig c = load_decoder_config(std::string(PSW_SOURCE_DIR) + "/configs/zoo/" + name + ".yaml");
    EXPECT_EQ(c.name, name);
  }
}

TEST(DecoderConfig, MistakesAreNamed) {
  struct Case {
    std::string text;
    std::string expected;
  };
  const Case cases[] = {
      {replaced(kTiny, "heads: 4", "heads: 5"), "key 'heads': hidden (64) must be a multiple of heads (5)"},
      {replaced(kTiny, "kv_heads: 2", "kv_heads: 3"), "key 'kv_heads': heads (4) must be a multiple of kv_heads (3)"},
      {replaced(replaced(kTiny, "heads: 4", "heads: 64"), "kv_heads: 2", "kv_heads: 64"), "must be even"},
      {replaced(kTiny, "architecture: llama", "architecture: gpt2"), "expected llama, got 'gpt2'"},
      {replaced(kTiny, "layers: 2", "layers: 0"), "key 'layers': must be between 1 and 1024"},
      {replaced(kTiny, "vocabulary: 512\n", ""), "key 'vocabulary' is missing"},
      {kTiny + "num_layers: 2\n", "num_layers"},
      {replaced(kTiny, "rope_theta: 10000", "rope_theta: fast"), "key 'rope_theta': expected a number"},
      {kTiny + "rope_scaling: {type: yarn, factor: 4, low_freq_factor: 1, high_freq_factor: 4, original_max_positions: 8}\n",
       "key 'rope_scaling.type': expected llama3 (the only rope scaling modelled), got 'yarn'"},
      {kTiny + "rope_scaling: {type: llama3, factor: 4, low_freq_factor: 4, high_freq_factor: 4, original_max_positions: 8}\n",
       "key 'rope_scaling.high_freq_factor': must be above low_freq_factor (4)"},
      {kTiny + "rope_scaling: {type: llama3, factor: 0.5, low_freq_factor: 1, high_freq_factor: 4, original_max_positions: 8}\n",
       "key 'rope_scaling.factor': must be between 1"},
      {kTiny + "rope_scaling: {type: llama3, factor: 4, low_freq_factor: 1, high_freq_factor: 4}\n",
       "key 'rope_scaling.original_max_positions' is missing"},
  };
  for (const Case& c : cases) {
    const std::string message = input_error_of([&] { parse_decoder_config(c.text, "bad.yaml"); });
    EXPECT_NE(message.find("bad.yaml:"), std::string::npos) << message;
    EXPECT_NE(message.find(c.expected), std::string::npos) << message;
  }
  EXPECT_NE(input_error_of([] { load_decoder_config("no/such/llama.yaml"); }).find("no such file"), std::string::npos);
}

}  // namespace
}  // namespace psw
