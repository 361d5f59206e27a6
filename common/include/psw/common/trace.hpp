#pragma once
// Request traces: where the requests of a simulation come from.
//
// A RequestSource yields requests in non-decreasing arrival order, one at a time, so that a
// day of the Azure Functions trace (about 13 million requests) streams through the
// simulator in constant memory. Readers validate as they go: a malformed row, a timestamp
// that goes backwards, or an unknown model or function is an InputError naming the file and
// the line.

#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "psw/common/model_profile.hpp"
#include "psw/common/units.hpp"

namespace psw {

struct Request {
  Duration arrival;
  std::uint32_t model = 0;  // index into the experiment's list of models
  Task task = Task::Inference;
  int batch = 8;
  Duration slo;  // zero: no SLO
  // The prompt's length where the workload knows it (the Azure LLM 2023 trace's ContextTokens);
  // 0: the profile's. Only a profile with a prefill curve prices it (Note [Prefill curve]).
  std::int64_t prompt_tokens = 0;
  // Tokens generated after the first (Note [Decode in the simulator]); 0: the answer is the first.
  std::int64_t decode_tokens = 0;
};

class RequestSource {
 public:
  virtual ~RequestSource() = default;
  // The next request, or nullopt when the source is exhausted.
  virtual std::optional<Request> next() = 0;
};

// How per-minute counts are spread within their minute.
enum class SpreadKind { Uniform, Poisson };
SpreadKind parse_spread(const std::string& text);  // throws InputError

// Options shared by the readers of public traces.
struct TraceMapping {
  // Function (Azure Functions: HashFunction) to model index. A function missing here is
  // an error unless `default_model` is set.
  std::map<std::string, std::uint32_t> function_model;
  std::optional<std::uint32_t> default_model;
  int batch = 8;
  Duration slo;
};

// The project's CSV: header `arrival_ns,model,task,batch,slo_ns`, one request per row;
// `model` is a name looked up in `model_index`. `model_batch[i]`, when given, is the one batch
// model i's profile serves: a row at another batch is an InputError naming the file and line
// (Note [Batch of a request] in common/src/workload_source.cpp).
std::unique_ptr<RequestSource> open_project_csv(const std::filesystem::path& path,
                                                const std::map<std::string, std::uint32_t>& model_index,
                                                const std::vector<int>& model_batch = {});

// Azure Functions 2019 per-minute counts (`HashOwner,HashApp,HashFunction,Trigger,1..1440`).
// Minutes [first_minute, first_minute + minutes) of the day (1-based, as the columns) are
// replayed; each minute's invocations are spread within it (uniform or Poisson), seeded.
std::unique_ptr<RequestSource> open_azure_functions_2019(const std::filesystem::path& path,
                                                         const TraceMapping& mapping,
                                                         SpreadKind spread, std::uint64_t seed,
                                                         int first_minute = 1, int minutes = 1440);

// Azure Functions 2021 invocations (`app,func,end_timestamp,duration`, seconds): each row is
// a request arriving at end_timestamp - duration; rows are sorted by that arrival.
std::unique_ptr<RequestSource> open_azure_functions_2021(const std::filesystem::path& path,
                                                         const TraceMapping& mapping);

// Azure LLM inference 2023 (`TIMESTAMP,ContextTokens,GeneratedTokens`): arrivals relative to
// the first row; the model is chosen by context length: the first bucket whose
// max_context_tokens is at least the row's ContextTokens. With `decode`, a request decodes
// GeneratedTokens - 1 tokens after its first (Note [Decode in the simulator]).
struct TokenBucket {
  std::int64_t max_context_tokens = 0;
  std::uint32_t model = 0;
};
std::unique_ptr<RequestSource> open_azure_llm_2023(const std::filesystem::path& path,
                                                   const std::vector<TokenBucket>& buckets,
                                                   int batch, Duration slo, bool decode = false);

// Synthetic arrivals over [0, duration): Poisson at `rate_per_second`, or bursty (a
// two-state Markov-modulated Poisson process alternating between a high and a low rate
// with exponentially distributed sojourns). Models are drawn from `model_weights`
// (index = model, value = relative weight), seeded.
struct PoissonSpec {
  double rate_per_second = 0;
  Duration duration;
  std::vector<double> model_weights;
  int batch = 8;
  Duration slo;
  std::uint64_t seed = 0;
};
struct BurstySpec {
  double high_rate_per_second = 0;
  double low_rate_per_second = 0;
  Duration mean_high;
  Duration mean_low;
  Duration duration;
  std::vector<double> model_weights;
  int batch = 8;
  Duration slo;
  std::uint64_t seed = 0;
};
std::unique_ptr<RequestSource> make_poisson_source(const PoissonSpec& spec);
std::unique_ptr<RequestSource> make_bursty_source(const BurstySpec& spec);

}  // namespace psw
