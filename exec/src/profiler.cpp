#include "psw/exec/profiler.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <functional>
#include <numeric>

#include "psw/common/error.hpp"
#include "psw/exec/decoder.hpp"

namespace psw::exec {

namespace {

// Mark slots used by the profiler, above the pipeline engine's: the phase begins, one mark
// per layer, the forward ends (the backward begins), one mark per layer, the backward ends.
constexpr std::size_t kBegin = 16;
std::size_t forward_mark(std::size_t layer) { return kBegin + 1 + layer; }
std::size_t forward_end(std::size_t n) { return kBegin + 1 + n; }
std::size_t backward_mark(std::size_t n, std::size_t layer) { return kBegin + 2 + n + layer; }
std::size_t backward_end(std::size_t n) { return kBegin + 2 + 2 * n; }
// Graph slots, above the pipeline engine's.
constexpr std::size_t kInstrumentedGraph = 8;
constexpr std::size_t kPlainGraph = 9;

Duration median(std::vector<Duration> v) {
  if (v.empty()) return Duration::zero();
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// Runs the instrumented and the plain version of the same work `repeats` times each, in
// alternation so that drift affects both alike, after one warm-up of each (library handles,
// kernel selection, gradients allocated). On a backend with graphs both are captured once and
// replayed. `read_*` runs after each synchronised run.
void time_runs(Backend& backend, int repeats, bool use_graphs, const std::function<void()>& instrumented,
               const std::function<void()>& plain, const std::function<void()>& read_instrumented,
               const std::function<void()>& read_plain) {
  if (repeats < 1) throw InputError("the profiler needs at least one repetition");
  instrumented();
  plain();
  backend.synchronize();
  const bool graph = use_graphs && backend.supports_graphs();
  if (graph) {
    backend.capture(kInstrumentedGraph, instrumented);
    backend.capture(kPlainGraph, plain);
  }
  auto run = [&](std::size_t slot, const std::function<void()>& body, const std::function<void()>& read) {
    if (graph) {
      backend.replay(slot);
    } else {
      body();
    }
    backend.synchronize();
    read();
  };
  for (int r = 0; r < repeats; ++r) {
    run(kInstrumentedGraph, instrumented, read_instrumented);
    run(kPlainGraph, plain, read_plain);
  }
}

PhaseTimes phase_times(const std::vector<std::vector<Duration>>& samples, const std::vector<int>& records,
                       const std::vector<Duration>& plain_totals) {
  PhaseTimes phase;
  std::vector<Duration> raw;
  raw.reserve(samples.size());
  for (const auto& s : samples) raw.push_back(median(s));
  phase.instrumented = std::accumulate(raw.begin(), raw.end(), Duration::zero());
  phase.total = median(plain_totals);
  phase.per_layer = remove_mark_overhead(raw, records, phase.total);
  return phase;
}

}  // namespace

std::vector<Duration> remove_mark_overhead(const std::vector<Duration>& raw, const std::vector<int>& records,
                                           Duration uninstrumented) {
  if (raw.size() != records.size()) {
    throw InputError(detail::concat("mark overhead: ", raw.size(), " layer times but ", records.size(),
                                    " record counts"));
  }
  if (uninstrumented < Duration::zero()) throw InputError("mark overhead: negative uninstrumented time");
  double raw_total = 0;
  double total_records = 0;
  for (std::size_t i = 0; i < raw.size(); ++i) {
    if (raw[i] < Duration::zero() || records[i] < 0) {
      throw InputError(detail::concat("mark overhead: negative time or record count at layer ", i));
    }
    raw_total += static_cast<double>(raw[i].ns());
    total_records += records[i];
  }
  if (raw_total == 0) return raw;  // nothing to distribute the time over
  const double excess = raw_total - static_cast<double>(uninstrumented.ns());
  std::vector<double> adjusted(raw.size());
  double adjusted_total = 0;
  for (std::size_t i = 0; i < raw.size(); ++i) {
    const double per_record = excess > 0 && total_records > 0 ? excess / total_records : 0.0;
    adjusted[i] = std::max(0.0, static_cast<double>(raw[i].ns()) - per_record * records[i]);
    adjusted_total += adjusted[i];
  }
  if (adjusted_total == 0) {  // every layer was all overhead: keep the raw shares
    for (std::size_t i = 0; i < raw.size(); ++i) adjusted[i] = static_cast<double>(raw[i].ns());
    adjusted_total = raw_total;
  }
  // Scale to the uninstrumented total; the rounding remainder goes to the longest layer.
  const double scale = static_cast<double>(uninstrumented.ns()) / adjusted_total;
  std::vector<Duration> out(raw.size());
  std::int64_t sum = 0;
  std::size_t longest = 0;
  for (std::size_t i = 0; i < raw.size(); ++i) {
    out[i] = nanoseconds(std::llround(adjusted[i] * scale));
    sum += out[i].ns();
    if (out[i] > out[longest]) longest = i;
  }
  out[longest] = out[longest] + nanoseconds(uninstrumented.ns() - sum);
  PSW_CHECK(out[longest] >= Duration::zero(), "mark overhead: rounding made a layer negative");
  return out;
}

PhaseTimes profile_forward(Backend& backend, ZooModel& model, const torch::Tensor& input, int repeats) {
  torch::NoGradGuard no_grad;
  const std::size_t n = model.layers().size();
  std::vector<std::size_t> ran;  // layers gated in the last instrumented forward, in order
  auto instrumented = [&] {
    ran.clear();
    backend.mark(kBegin);
    model.forward(input, [&](std::size_t layer) {
      backend.mark(forward_mark(layer));
      ran.push_back(layer);
    });
    backend.mark(forward_end(n));
  };
  auto plain = [&] {
    backend.mark(kBegin);
    model.forward(input);
    backend.mark(forward_end(n));
  };
  std::vector<std::vector<Duration>> samples(n);
  std::vector<Duration> plain_totals;
  time_runs(
      backend, repeats, /*use_graphs=*/true, instrumented, plain,
      [&] {
        for (std::size_t k = 0; k < ran.size(); ++k) {
          const std::size_t next = k + 1 < ran.size() ? forward_mark(ran[k + 1]) : forward_end(n);
          samples[ran[k]].push_back(backend.elapsed(forward_mark(ran[k]), next));
        }
      },
      [&] { plain_totals.push_back(backend.elapsed(kBegin, forward_end(n))); });
  std::vector<int> records(n, 0);
  for (std::size_t layer : ran) records[layer] = 1;  // the record that ends its interval
  return phase_times(samples, records, plain_totals);
}

std::vector<PrefillPoint> profile_prefill_curve(Backend& backend, ZooModel& model, int batch,
                                                std::vector<std::int64_t> tokens, int repeats) {
  Decoder* decoder = as_decoder(model);
  if (decoder == nullptr) throw InputError("a prefill curve is for decoders (configs/zoo/*.yaml); " + model.name() + " is not one");
  std::sort(tokens.begin(), tokens.end());
  tokens.erase(std::unique(tokens.begin(), tokens.end()), tokens.end());
  std::vector<PrefillPoint> curve;
  for (const std::int64_t length : tokens) {
    // example_tokens refuses a length outside [1, max_positions] with the decoder's name.
    const torch::Tensor prompt = decoder->example_tokens(batch, length, 1).to(backend.device());
    curve.push_back({length, profile_forward(backend, model, prompt, repeats).total});
  }
  return curve;
}

Duration profile_decode_step(Backend& backend, ZooModel& model, int batch, std::int64_t prompt_tokens, int tokens) {
  Decoder* decoder = as_decoder(model);
  if (decoder == nullptr) throw InputError("a decode step is a decoder's (configs/zoo/*.yaml); " + model.name() + " is not one");
  if (tokens < 1) throw InputError("--decode-tokens must be at least 1, not " + std::to_string(tokens));
  // example_tokens refuses a prompt beyond the decoder's positions, naming it.
  const torch::Tensor prompt = decoder->example_tokens(batch, prompt_tokens, 1).to(backend.device());
  // The prompt, the timed steps and the two before them (time_greedy_decode).
  const std::int64_t positions = prompt_tokens + tokens + 2;
  if (positions > decoder->config().max_positions) {
    throw InputError(model.name() + ": a prompt of " + std::to_string(prompt_tokens) + " tokens and " +
                     std::to_string(tokens) + " decode steps exceed its " + std::to_string(decoder->config().max_positions) +
                     " positions");
  }
  torch::NoGradGuard no_grad;
  KvCache cache = decoder->make_cache(batch, positions);
  // Replayed from a graph where the backend has graphs, as the server decodes (Note [Decode graph]).
  std::vector<Duration> steps =
      time_greedy_decode(backend, *decoder, decoder->prefill(prompt, cache), cache, tokens, /*graphs=*/true).steps;
  return median(std::move(steps));
}

TrainingTimes profile_training(Backend& backend, ZooModel& model, const torch::Tensor& input, int repeats,
                               bool use_graphs) {
  const std::size_t n = model.layers().size();
  // A hook on every parameter marks when its gradient is ready (in an instrumented run only);
  // the hooks are removed on return.
  bool recording = false;
  std::vector<int> hooks_of(n, 0);
  std::vector<bool> fired(n, false);  // in the last instrumented run (or its capture)
  struct Hook {
    torch::Tensor tensor;
    unsigned handle;
  };
  struct Hooks {
    std::vector<Hook> list;
    ~Hooks() {
      for (auto& h : list) h.tensor.remove_hook(h.handle);
    }
  } hooks;
  for (std::size_t i = 0; i < n; ++i) {
    for (const torch::Tensor& t : model.layers()[i].tensors) {
      if (!t.requires_grad()) continue;  // buffers
      const unsigned handle = t.register_hook([&backend, &recording, &fired, i, n](const torch::Tensor&) {
        if (!recording) return;
        backend.mark(backward_mark(n, i));
        fired[i] = true;
      });
      hooks.list.push_back({t, handle});
      ++hooks_of[i];
    }
  }
  std::vector<std::size_t> ran;
  auto run = [&](bool instrumented) {
    recording = instrumented;
    if (instrumented) {  // what the reads after an instrumented run (or replay) look at
      ran.clear();
      std::fill(fired.begin(), fired.end(), false);
    }
    backend.mark(kBegin);
    const torch::Tensor loss = model.training_loss(input, [&](std::size_t layer) {
      if (!instrumented) return;
      backend.mark(forward_mark(layer));
      ran.push_back(layer);
    });
    backend.mark(forward_end(n));
    loss.backward();
    backend.mark(backward_end(n));
    recording = false;
  };
  std::vector<std::vector<Duration>> forward_samples(n);
  std::vector<std::vector<Duration>> backward_samples(n);
  std::vector<Duration> plain_forward;
  std::vector<Duration> plain_backward;
  std::vector<int> fired_records(n, 0);
  time_runs(
      backend, repeats, use_graphs, [&] { run(true); }, [&] { run(false); },
      [&] {
        for (std::size_t k = 0; k < ran.size(); ++k) {
          const std::size_t next = k + 1 < ran.size() ? forward_mark(ran[k + 1]) : forward_end(n);
          forward_samples[ran[k]].push_back(backend.elapsed(forward_mark(ran[k]), next));
        }
        // Layers in the order their gradients became ready; each gets the time since the
        // previous one, the last also the rest of the backward.
        std::vector<std::pair<Duration, std::size_t>> ready;
        for (std::size_t i = 0; i < n; ++i) {
          if (fired[i]) ready.emplace_back(backend.elapsed(forward_end(n), backward_mark(n, i)), i);
        }
        std::sort(ready.begin(), ready.end());
        Duration previous = Duration::zero();
        for (std::size_t k = 0; k < ready.size(); ++k) {
          Duration interval = ready[k].first - previous;
          if (k + 1 == ready.size()) interval = backend.elapsed(forward_end(n), backward_end(n)) - previous;
          backward_samples[ready[k].second].push_back(max(interval, Duration::zero()));
          previous = ready[k].first;
        }
      },
      [&] {
        plain_forward.push_back(backend.elapsed(kBegin, forward_end(n)));
        plain_backward.push_back(backend.elapsed(forward_end(n), backward_end(n)));
      });
  std::vector<int> forward_records(n, 0);
  for (std::size_t layer : ran) forward_records[layer] = 1;
  for (std::size_t i = 0; i < n; ++i) fired_records[i] = fired[i] ? hooks_of[i] : 0;
  for (std::size_t i = 0; i < n; ++i) {
    if (!fired[i]) {
      throw Error("profiling " + model.name() + ": layer " + model.layers()[i].name +
                  " got no gradient in the training backward");
    }
  }
  return {phase_times(forward_samples, forward_records, plain_forward),
          phase_times(backward_samples, fired_records, plain_backward)};
}

std::vector<CopySample> profile_link(Backend& backend, bool pinned, Bytes max_bytes, int repeats) {
  std::vector<CopySample> samples;
  for (Bytes b = 4 * kKiB; b <= max_bytes; b *= 4) {
    const auto back_to_back = static_cast<int>(std::clamp<Bytes>(16 * kMiB / b, 1, 64));
    samples.push_back({b, backend.time_copy(b, pinned, repeats, back_to_back)});
  }
  return samples;
}

std::vector<CopySample> profile_mapped_reads(Backend& backend, Bytes max_bytes, int repeats) {
  std::vector<CopySample> samples;
  for (Bytes b = 4 * kKiB; b <= max_bytes; b *= 4) samples.push_back({b, backend.time_mapped_read(b, repeats)});
  return samples;
}

ModelProfile profile_skeleton(ZooModel& model, const torch::Tensor& input) {
  ModelProfile profile;
  profile.name = model.name();
  profile.batch = static_cast<int>(input.size(0));
  profile.dtype = zoo_dtype_name(model.dtype());
  // A tied decoder's head multiplies by the whole table: read in place, every forward would
  // read all of it over the link, so it is never a candidate (0).
  const Decoder* decoder = as_decoder(model);
  const bool tied = decoder != nullptr && decoder->config().tie_embeddings;
  for (const ZooLayer& layer : model.layers()) {
    LayerProfile l;
    l.name = layer.name;
    l.kind = layer.kind;
    l.param_bytes = layer.bytes();
    if (layer.kind == "embedding" && !tied && !layer.tensors.empty() && layer.tensors[0].dim() == 2 &&
        input.scalar_type() == torch::kInt64) {
      const torch::Tensor& table = layer.tensors[0];
      l.host_read_bytes = std::min(l.param_bytes, static_cast<Bytes>(input.numel() * table.size(1) * table.element_size()));
    }
    profile.layers.push_back(std::move(l));
  }
  return profile;
}

}  // namespace psw::exec
