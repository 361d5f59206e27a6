// The decoder family's sizes (decoder_config.hpp), read with the strict reader every config uses.
#include "psw/common/decoder_config.hpp"

#include <yaml-cpp/yaml.h>

#include "psw/common/error.hpp"
#include "yaml_reader.hpp"

namespace psw {

using namespace yaml_detail;

std::int64_t DecoderConfig::parameter_count() const {
  const std::int64_t kv = kv_heads * head_dim();
  const std::int64_t attention = hidden * hidden * 2 + hidden * kv * 2;  // q, o; k, v
  const std::int64_t mlp = 3 * hidden * intermediate;                    // gate, up, down
  const std::int64_t per_layer = attention + mlp + 2 * hidden;           // two RMSNorms
  const std::int64_t embedding = vocabulary * hidden;
  return embedding + layers * per_layer + hidden + (tie_embeddings ? 0 : embedding);
}

DecoderConfig parse_decoder_config(const std::string& text, const std::string& origin) {
  YAML::Node root = parse_document(text, origin);
  MapReader r(root, origin, "");
  DecoderConfig c;
  c.name = r.string("name");
  const std::string architecture = r.string("architecture");
  if (architecture != "llama") {
    r.fail_key("architecture", r.get("architecture"), "expected llama, got '" + architecture + "'");
  }
  // Bounds: a factor of a few above today's largest open models, so a typo of orders of
  // magnitude is caught.
  c.layers = r.integer("layers", 1, 1024);
  c.hidden = r.integer("hidden", 2, 65536);
  c.heads = r.integer("heads", 1, 1024);
  c.kv_heads = r.integer("kv_heads", 1, 1024);
  c.intermediate = r.integer("intermediate", 1, 1 << 20);
  c.vocabulary = r.integer("vocabulary", 2, 1 << 24);
  c.tie_embeddings = r.boolean("tie_embeddings", false);
  c.rope_theta = r.real("rope_theta", 1.0, 1e12);
  if (r.has("rope_scaling")) {  // Note [Rope scaling]
    MapReader s = r.map("rope_scaling");
    const std::string type = s.string("type");
    if (type != "llama3") {
      s.fail_key("type", s.get("type"), "expected llama3 (the only rope scaling modelled), got '" + type + "'");
    }
    RopeScaling scaling;
    scaling.factor = s.real("factor", 1.0, 1e6);
    scaling.low_freq_factor = s.real("low_freq_factor", 1e-6, 1e6);
    scaling.high_freq_factor = s.real("high_freq_factor", 1e-6, 1e6);
    scaling.original_max_positions = s.integer("original_max_positions", 2, 1 << 22);
    if (!(scaling.high_freq_factor > scaling.low_freq_factor)) {
      s.fail_key("high_freq_factor", s.get("high_freq_factor"),
                 detail::concat("must be above low_freq_factor (", scaling.low_freq_factor,
                                "): the band between them is interpolated"));
    }
    s.finish();
    c.rope_scaling = scaling;
  }
  c.rms_norm_eps = r.real("rms_norm_eps", 1e-12, 1.0);
  c.max_positions = r.integer("max_positions", 2, 1 << 22);  // a prompt and one generated token
  if (c.hidden % c.heads != 0) {
    r.fail_key("heads", r.get("heads"), detail::concat("hidden (", c.hidden, ") must be a multiple of heads (", c.heads, ")"));
  }
  if (c.heads % c.kv_heads != 0) {
    r.fail_key("kv_heads", r.get("kv_heads"),
               detail::concat("heads (", c.heads, ") must be a multiple of kv_heads (", c.kv_heads, ")"));
  }
  if (c.head_dim() % 2 != 0) {
    r.fail_key("heads", r.get("heads"),
               detail::concat("the head dimension hidden / heads = ", c.head_dim(),
                              " must be even (rotary embeddings rotate pairs)"));
  }
  r.finish();
  return c;
}

DecoderConfig load_decoder_config(const std::filesystem::path& path) {
  return parse_decoder_config(read_file(path), path.string());
}

}  // namespace psw
