#pragma once
// The configuration of `psw serve` (configs/serve/*.yaml, DESIGN.md §5): which models the
// server answers for, how it switches between them (a mechanism of the shared table), how
// many worker processes it keeps, its residency cache, and the training job that shares
// the GPU. Parsed here, once, strictly (config.hpp's rules); every process of the server
// reads the same file, so they agree on models, plans and sizes.
//
//   mechanism: pipeswitch          # Note [Mechanism table]
//   workers: 2                     # worker processes (one active, the rest standby)
//   hardware: configs/hardware/h200-pcie5.yaml
//   profiles: configs/models/h200  # NAME.yaml per model, for planning
//   cache: off                     # off: every switch transfers (the paper); lru; active
//   cache_bytes: 2147483648        # lru: bytes of parameters kept resident at most
//   max_tensor_bytes: 67108864     # largest input or output tensor, bytes
//   device_memory_bytes: 0         # Note [Device memory limit]; 0: as much as the device has
//   request_timeout_ms: 10000      # a worker that takes longer is replaced (watchdog)
//   max_queue: 256                 # requests waiting or running; more are RESOURCE_EXHAUSTED
//   input_staging_slots: 4         # raw inputs copied once, into slots of max_tensor_bytes; 0: none
//   cpu_wakeup_latency_us: 0       # the host's CPU wake-up latency held this low while serving (root)
//   dispatch: overlap              # overlap: a request starts while training stops; after-stop
//   models:
//     - name: resnet152
//       batch: 8                   # the batch its switch graph is captured for
//       plan: optimal              # a strategy, or a plan file (psw plan --out)
//       dtype: fp32                # fp32, bf16 or fp16 (the zoo's --dtype)
//       weights: resnet152.safetensors  # the user's (a file or a Hugging Face folder); default: seeded
//     - name: llama-1b
//       decoder: ../zoo/llama-1b.yaml  # a decoder: the file that sizes it (its name is `name`)
//       prompt_tokens: 512         # decoders: the prompt length infer requests carry
//       prompt_buckets: [64, 512, 8191]  # decoders: generate calls' prompts padded to these
//     - name: mynet
//       torchscript: mynet.pt      # a user's TorchScript file (its stem is the name)
//       input_shape: [3, 224, 224] # one sample of its input; input_dtype: fp32 (default)
//       output_shape: [1000]       # one sample of its output (optional: the metadata is exact with it)
//       allow_uncaptured: false    # true: a forward that cannot be captured is served copy-then-forward
//     - name: mybert               # a TorchScript module of several inputs, in its forward's order:
//       torchscript: mybert.pt
//       inputs: [{name: input_ids, shape: [128], dtype: int64, id_bound: 30522}, {name: attention_mask, shape: [128], dtype: int64}]
//       dtype: bf16
//   training:                      # optional
//     model: resnet152             # a zoo model, or a TorchScript entry of models: (mynet)
//     batch: 8
//     input_size: 224              # image side (CNNs) or tokens (BERT)
//     learning_rate: 0.01
//     momentum: 0.9
//     seed: 1
//     autostart: true
//     checkpoint: job.safetensors  # written on SIGTERM and on a client's request
//     resume_from: job.safetensors # start from this checkpoint
//     weights: resnet152.safetensors  # the user's weights to start from (not with resume_from)
//     dataset: data.safetensors    # the user's labelled set: inputs [N, ...], labels [N]

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "psw/common/decoder_config.hpp"
#include "psw/common/mechanism.hpp"
#include "psw/common/placement.hpp"
#include "psw/common/plan.hpp"
#include "psw/common/units.hpp"

namespace psw {

// One input of a served TorchScript model: its protocol name, one sample's shape (the batch is the
// request's) and dtype (fp32, bf16, fp16 or int64).
struct TorchScriptInput {
  std::string name;
  std::vector<std::int64_t> shape;
  std::string dtype = "fp32";
  // int64 inputs: ids must lie in [0, id_bound) (an embedding's rows), checked before a worker sees
  // them: on a GPU an index beyond the table is a device-side assert that kills the worker. 0: any.
  std::int64_t id_bound = 0;
};

struct ServedModelConfig {
  std::string name;
  int batch = 8;
  Strategy strategy = Strategy::Optimal;
  std::filesystem::path plan_file;  // set: the plan comes from this file (strategy ignored)
  // The parameters' dtype, as the zoo and profiles name it (fp32, bf16, fp16). Requests'
  // floating inputs and the outputs are of this dtype too.
  std::string dtype = "fp32";
  // Note [Decoder in the pipeline] (exec/decoder.hpp): a decoder of the zoo's Llama family,
  // sized by this file (parsed, with its sizes, when the serve config is); empty for the zoo's
  // built-in models. A request is a prompt of `prompt_tokens` token ids per sequence, answered
  // with the logits of its last position (its first generated token): the served latency of a
  // cold decoder is its time to first token. The switch graph is captured for that length.
  std::filesystem::path decoder_file;
  std::optional<DecoderConfig> decoder;
  std::int64_t prompt_tokens = 0;  // decoders only
  // Note [Prompt buckets] (exec/decoder.hpp): the lengths a generate call's prompt is padded
  // to, ascending, the last one the longest prompt served. Decoders only; by default the
  // powers of two from 16 below the context, and the context less one position.
  std::vector<std::int64_t> prompt_buckets;
  // Note [TorchScript models] (exec/torchscript.hpp): a user's TorchScript file instead of a zoo
  // model (its stem is `name`, which its profile goes by), with its forward's inputs in order:
  // `input_shape` and `input_dtype` give one, named `input`; `inputs` several, each named (Note
  // [Several inputs]: the server packs them into the one tensor the worker's model takes).
  std::filesystem::path torchscript_file;
  std::vector<TorchScriptInput> inputs;
  // Note [Uncaptured switch] (exec/graph_switch.hpp): a TorchScript model whose forward cannot be
  // captured is served copy-then-forward (the worker says so) instead of stopping the start.
  bool allow_uncaptured = false;
  // One sample's output shape as the forward gives it (empty: not stated, and the model's
  // metadata says only [-1]); stated, the metadata is exact (a client sizes shared memory for
  // the output by it) and a worker refuses an answer of another shape.
  std::vector<std::int64_t> output_shape;
  // The user's weights for a zoo model or decoder (a safetensors file, or a Hugging Face folder:
  // Note [Sharded weights] in exec/src/weights.cpp), loaded by the memory daemon before it packs
  // the model; empty: random, seeded. Not for a TorchScript file, which holds its own.
  std::filesystem::path weights;

  // What make_model builds: the decoder's file, or the built-in model's name.
  std::string model_argument() const {
    return decoder ? decoder_file.string() : !torchscript_file.empty() ? torchscript_file.string() : name;
  }
};

// Note [Prompt buckets] (exec/decoder.hpp): the smallest of `buckets` (ascending, positive) that
// holds `length` tokens; InputError naming the largest when none does.
std::int64_t prompt_bucket(const std::vector<std::int64_t>& buckets, std::int64_t length);

// Note [Training objective] (exec/runtime/worker/training.hpp): cross-entropy of the model's
// output against seeded labels of a fixed set of seeded inputs, with SGD (momentum, dampening 0,
// as torch.optim.SGD) or Adam (betas 0.9 and 0.999, eps 1e-8, as torch.optim.Adam).
enum class TrainingOptimizer { Sgd, Adam };
std::string to_string(TrainingOptimizer optimizer);

struct TrainingJobConfig {
  std::string model;
  int batch = 8;
  int input_size = 224;
  TrainingOptimizer optimizer = TrainingOptimizer::Sgd;
  double learning_rate = 0.01;  // the config's default: 0.01 with sgd, 0.001 with adam
  double momentum = 0.9;        // sgd only
  std::uint64_t seed = 1;
  bool autostart = true;
  // Note [Bounded lookahead] (exec/backend.hpp): layer boundaries of training work the host may
  // queue ahead of the device. A preemption waits for at most this much device work; too few
  // and the device idles between the host's launches.
  int lookahead = 4;
  // Note [Update in pieces] (exec/runtime/worker/training.hpp): the most MiB of parameters an
  // update operation, and of the state a step's slot copy, works on between two pause points;
  // 0: whole operations, the pauses between them only.
  std::int64_t update_piece_mib = 16;
  // Note [Rehearsal] (exec/runtime/worker/src/training.cpp): each worker runs one step on a
  // scratch copy of the state at its start, so that the job's first step pays no first-use costs;
  // false: no rehearsal, and a worker holds no step's memory before it trains.
  bool rehearse = true;
  // Note [Training checkpoint] (exec/runtime/worker/training.hpp): where SIGTERM and a client's
  // checkpoint call without a path write the job's state (empty: SIGTERM writes none), and the
  // file the job starts from instead of its seeded weights (empty: a fresh job).
  std::filesystem::path checkpoint;
  std::filesystem::path resume_from;
  // The user's weights for the job's model (a safetensors file by its exporter's names: Note
  // [Weight names] in exec/weights.hpp) in place of the seeded ones; empty: seeded. Not with
  // resume_from, whose file holds the weights.
  std::filesystem::path weights;
  // Note [Training objective]: the user's labelled set in place of the seeded one: a safetensors
  // file with `inputs` (N samples of the model's input at input_size) and `labels` (N class
  // indices, I64); empty: the seeded set.
  std::filesystem::path dataset;
  // Note [TorchScript training] (exec/src/torchscript.cpp): when `model` names a TorchScript
  // entry of `models:`, the job trains its own copy of that module: the entry's file and inputs
  // (its samples are the entry's shape, so input_size is not given; the file holds its weights).
  // Empty for a zoo model.
  std::filesystem::path torchscript_file;
  std::vector<TorchScriptInput> inputs;
};

// Note [Residency]: off: every request transfers its model (the paper's measurements); active:
// the model of the last task stays until another task (a model or the training job) runs (the
// paper's active worker); lru: models stay within cache_bytes, least recently used out first.
enum class CachePolicy { Off, Lru, Active };
// When a request that preempts training goes to its worker: at once, its switch overlapping the
// training's last layers (overlap), or once the training has stopped (after-stop).
enum class DispatchPolicy { Overlap, AfterStop };

struct ServeConfig {
  std::filesystem::path path;  // the file, for messages and for the worker processes
  // `psw serve --set KEY=VALUE`, applied to the file's document before it is read; the worker
  // processes read the file with the same overrides (they are passed on to them).
  std::vector<std::pair<std::string, std::string>> overrides;
  Mechanism mechanism = Mechanism::PipeSwitch;
  int workers = 2;
  std::filesystem::path hardware;
  std::filesystem::path profiles;
  CachePolicy cache = CachePolicy::Off;
  Bytes cache_bytes = 0;
  Bytes max_tensor_bytes = Bytes{64} << 20;
  // Note [Device memory limit]
  // ~~~~~~~~~~~~~~~~~~~~~~~~~~~
  // The device memory the server's parameter regions, its decoders' KV caches (every worker's:
  // Notes [Decode graph] and [Prefill graphs] in exec/decoder.hpp), its AOTInductor packages' own
  // copies of their constants (every worker's, at least the bytes of the constants they expose:
  // Note [AOTInductor packages]) and the training state may take together: the memory daemon
  // refuses a start, and a model's load, beyond it (or beyond the device's free memory), naming the
  // numbers. Activations and the captured graphs' own memory are not counted. 0: no limit but the
  // device's. It leaves room on a GPU that other processes share, and it gives the host backend,
  // whose "device" is the host's memory, a size, so that the refusals are tested without a GPU.
  Bytes device_memory_bytes = 0;
  Duration request_timeout = milliseconds(10'000);
  // Note [Backpressure] (controller.hpp): requests waiting or running at once; one more is
  // answered RESOURCE_EXHAUSTED at once, and the front end's threads are bounded from it.
  int max_queue = 256;
  // Note [Raw inputs received in place] (grpc_server.cpp): slots of max_tensor_bytes each that the
  // gRPC front end copies raw inputs into once and the workers read in place (page-locked on
  // cuda: slots x max_tensor_bytes of host memory); a raw input that finds none free keeps its
  // own bytes, which the controller copies into the worker's io segment. 0: none.
  int input_staging_slots = 4;
  // Note [CPU wake-up latency] (cpu_latency.hpp): the system's CPU wake-up latency limit that
  // psw serve holds while it runs, in microseconds (0: idle CPUs poll); none: the system's own.
  std::optional<std::int32_t> cpu_wakeup_latency_us;
  DispatchPolicy dispatch = DispatchPolicy::Overlap;
  // Note [Placement]: copy every layer on a switch (the paper), or let the plan leave layers the
  // device reads only a little of (BERT's embedding tables) in pinned host memory, read in place.
  Placement placement = Placement::Copy;
  std::vector<ServedModelConfig> models;
  std::optional<TrainingJobConfig> training;

  // The index of a served model by name; -1 when not served.
  int model_index(const std::string& name) const;
  // Where a served model's profile is: profiles/NAME.yaml in fp32, profiles/DTYPE/NAME.yaml
  // otherwise (as `psw profile --dtype` writes them and configs/models/h200/ holds them).
  std::filesystem::path profile_path(const ServedModelConfig& model) const;
};

// Relative paths inside the file are resolved against the file's folder (as in experiment
// configs); InputError naming file, line and key for anything wrong.
// `overrides`: dotted keys set on the document first (`training.batch=16`, YAML values), as
// `psw sim --set` does for experiments; messages about them name the override.
ServeConfig load_serve_config(const std::filesystem::path& path,
                              const std::vector<std::pair<std::string, std::string>>& overrides = {});
ServeConfig parse_serve_config(const std::string& text, const std::filesystem::path& origin,
                               const std::vector<std::pair<std::string, std::string>>& overrides = {});

// One model entry as `models:` lists them (its keys and checks), given as YAML or JSON text: a
// model the server loads while it runs (Note [Repository load] in the server). Its paths resolve
// against the serve config's folder, as the config's own entries do; InputError naming `origin`
// and the key for anything wrong.
ServedModelConfig parse_served_model_entry(const ServeConfig& config, const std::string& text, const std::string& origin);

// Note [Repository load]: why models cannot be loaded and unloaded while a server of `mechanism`
// runs, or empty when they can. Loading places a model in a region of its own, which per-group
// handles and managed memory do not give it.
std::string repository_load_refusal(Mechanism mechanism);

}  // namespace psw
