#include "psw/runtime/worker/processes.hpp"

#include <poll.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <limits>
#include <deque>
#include <iostream>
#include <map>
#include <memory>
#include <optional>
#include <sstream>

#include "psw/common/error.hpp"
#include "psw/exec/backend.hpp"
#include "psw/exec/graph_switch.hpp"
#include "psw/exec/weights.hpp"
#include "psw/runtime/ipc/ipc.hpp"
#include "psw/runtime/ipc/service.hpp"
#include "psw/runtime/ipc/shared_memory.hpp"
#include "psw/runtime/worker/training.hpp"
#include "served_models.hpp"

namespace psw::runtime {

namespace {

// Mark slots of a request's own phases on the worker's compute stream (below the engine's
// trace slots, above its own): the request received, its input on the device.
constexpr std::size_t kMarkReceived = 1000;
constexpr std::size_t kMarkInputOnDevice = 1001;

torch::Tensor bytes_of(const SharedSegment& segment, std::size_t length) {
  PSW_CHECK(length <= segment.size(), "a segment of ", segment.size(), " bytes used for ", length);
  return torch::from_blob(segment.data(), {static_cast<std::int64_t>(length)}, torch::dtype(torch::kUInt8));
}

torch::Dtype torch_type(ElementType type) {
  switch (type) {
    case ElementType::Float32: return torch::kFloat32;
    case ElementType::Int64: return torch::kInt64;
    case ElementType::Float16: return torch::kFloat16;
    case ElementType::BFloat16: return torch::kBFloat16;
    case ElementType::Int32: return torch::kInt32;
    case ElementType::UInt8: return torch::kUInt8;
  }
  throw Error("unknown element type");
}

ElementType element_type(torch::Dtype dtype) {
  switch (dtype) {
    case torch::kFloat32: return ElementType::Float32;
    case torch::kInt64: return ElementType::Int64;
    case torch::kFloat16: return ElementType::Float16;
    case torch::kBFloat16: return ElementType::BFloat16;
    case torch::kInt32: return ElementType::Int32;
    case torch::kUInt8: return ElementType::UInt8;
    default: throw Error("an output of an element type the protocol does not carry");
  }
}

// Reports a failure to the controller (best effort: it may be gone) and gives the exit code.
int report_failure(int socket, const std::exception& e, int code, ServiceError::Code service_code) {
  Message failed;
  failed.type = MessageType::Failed;
  failed.value = static_cast<std::int64_t>(service_code);
  failed.set_text(e.what());
  try {
    send_message(socket, failed);
  } catch (const std::exception&) {
  }
  std::cerr << "psw-exec: " << e.what() << "\n";
  return code;
}

template <typename Body>
int guarded(int socket, Body&& body) {
  try {
    return body();
  } catch (const InputError& e) {
    return report_failure(socket, e, 2, ServiceError::Code::InvalidArgument);
  } catch (const std::exception& e) {
    return report_failure(socket, e, 1, ServiceError::Code::Internal);
  }
}

// MPS needs its control daemon: without it, CUDA processes time-slice the GPU instead and the
// mechanism would silently be another one; time-sliced needs the opposite, for the same reason
// (with a daemon, the workers would be MPS clients). The daemon's pipe directory is where CUDA
// looks.
void check_mps_daemon(Mechanism mechanism) {
  const char* configured = std::getenv("CUDA_MPS_PIPE_DIRECTORY");
  const std::string directory = configured != nullptr ? configured : "/tmp/nvidia-mps";
  const bool running = ::access((directory + "/control").c_str(), F_OK) == 0;
  if (mechanism == Mechanism::Mps && !running) {
    throw InputError("mechanism 'mps' needs NVIDIA's MPS control daemon, and none runs here (no " + directory +
                     "/control): start it with `nvidia-cuda-mps-control -d`, or serve another mechanism");
  }
  if (mechanism == Mechanism::TimeSliced && running) {
    throw InputError("mechanism 'time-sliced' measures the GPU's own time slicing between processes, and an MPS "
                     "control daemon runs here (" + directory +
                     "/control), which would make the workers MPS clients: stop it (`echo quit | "
                     "nvidia-cuda-mps-control`), or serve mps");
  }
}

// Note [Per-group handles] on `host`: opening group memory is mapping its pages of the model's
// group segment; the tensor's deleter unmaps them (closing the "handle").
torch::Tensor map_group(int fd, Bytes offset, Bytes bytes) {
  void* p = ::mmap(nullptr, static_cast<std::size_t>(bytes), PROT_READ | PROT_WRITE, MAP_SHARED, fd,
                   static_cast<off_t>(offset));
  if (p == MAP_FAILED) throw Error(std::string("mapping a group of a shared segment: ") + std::strerror(errno));
  return torch::from_blob(
      p, {static_cast<std::int64_t>(bytes)}, [bytes](void* q) { ::munmap(q, static_cast<std::size_t>(bytes)); },
      torch::dtype(torch::kUInt8));
}

// What the CUDA backend's allocate_shared_device takes for `bytes` (it rounds up to 2 MiB so
// that IPC shares nothing else), for the daemon's memory check.
constexpr Bytes kSharedAllocationGranularity = Bytes{2} << 20;
Bytes shared_allocation_bytes(Bytes bytes) {
  return std::max<Bytes>(1, (bytes + kSharedAllocationGranularity - 1) / kSharedAllocationGranularity) *
         kSharedAllocationGranularity;
}

// Note [Inputs read in place] (controller.hpp): a client's shared memory region, mapped and
// registered with the backend (page-locked on cuda) once, for inputs copied to the device from
// it. Read-write, though only read: cudaHostRegister pins pages for writing unless told the
// memory is read-only, which a read-only mapping would refuse.
class MappedInputRegion {
 public:
  MappedInputRegion(exec::Backend& backend, const UniqueFd& fd, std::uint64_t object_offset, std::uint64_t byte_size) {
    const auto page = static_cast<std::uint64_t>(::sysconf(_SC_PAGESIZE));
    const std::uint64_t map_offset = object_offset / page * page;
    length_ = static_cast<std::size_t>(byte_size + (object_offset - map_offset));
    base_ = ::mmap(nullptr, length_, PROT_READ | PROT_WRITE, MAP_SHARED, fd.get(), static_cast<off_t>(map_offset));
    if (base_ == MAP_FAILED) throw Error(std::string("cannot map a client's shared memory region: ") + std::strerror(errno));
    try {
      registered_ = backend.register_host(base_, static_cast<Bytes>(length_), /*pin=*/true);
    } catch (...) {
      ::munmap(base_, length_);
      throw;
    }
    data_ = static_cast<std::uint8_t*>(base_) + (object_offset - map_offset);
    size_ = byte_size;
  }
  ~MappedInputRegion() {
    registered_ = torch::Tensor();  // unregistered (cuda) before the pages go
    ::munmap(base_, length_);
  }
  MappedInputRegion(const MappedInputRegion&) = delete;
  MappedInputRegion& operator=(const MappedInputRegion&) = delete;

  const std::uint8_t* data() const { return data_; }
  // Note [Outputs written in place]: the same pages, for an output the client wants there.
  std::uint8_t* writable_data() const { return data_; }
  std::uint64_t size() const { return size_; }

 private:
  void* base_ = MAP_FAILED;
  std::size_t length_ = 0;
  torch::Tensor registered_;
  std::uint8_t* data_ = nullptr;
  std::uint64_t size_ = 0;
};

// A region the controller told this worker to map: the mapping, or why there is none (told to
// the request that reads from it, not to the controller, which expects no answer to MapInput).
struct InputRegionEntry {
  std::unique_ptr<MappedInputRegion> mapping;
  std::string error;
};

// Where an Infer's input lies in its region. An offset or size outside the region is the
// client's error; a region this worker could not map fails the request, not the worker.
// The mapping of region `id`, which the Infer's `what` ("input", "output") is in.
const MappedInputRegion& mapped_region(const std::map<std::uint64_t, InputRegionEntry>& regions, std::uint64_t id,
                                       const char* what) {
  const auto it = regions.find(id);
  if (it == regions.end()) {
    throw ServiceError(ServiceError::Code::Internal,
                       detail::concat("the ", what, "'s shared memory region ", id, " is not mapped in the worker"));
  }
  if (!it->second.mapping) throw ServiceError(ServiceError::Code::Internal, it->second.error);
  return *it->second.mapping;
}

const std::uint8_t* input_in_region(const std::map<std::uint64_t, InputRegionEntry>& regions, const Message& m) {
  const MappedInputRegion& region = mapped_region(regions, static_cast<std::uint64_t>(m.value), "input");
  std::int64_t bytes = element_bytes(static_cast<ElementType>(m.dtype));
  for (std::uint32_t d = 0; d < m.rank; ++d) {
    if (m.shape[d] < 0 || (m.shape[d] > 0 && bytes > std::numeric_limits<std::int64_t>::max() / m.shape[d])) {
      throw InputError("an input shape of out-of-range dimensions");
    }
    bytes *= m.shape[d];
  }
  const auto size = static_cast<std::int64_t>(region.size());
  if (m.value2 < 0 || m.value2 > size || bytes > size - m.value2) {
    throw InputError(detail::concat("the input's ", bytes, " bytes at offset ", m.value2,
                                    " are outside its shared memory region of ", size, " bytes"));
  }
  return region.data() + m.value2;
}

// Note [Outputs written in place]: where the Infer asks the output written (its region mapped,
// the range inside it), or null when the output of `bytes` does not fit the client's range.
std::uint8_t* output_in_region(const std::map<std::uint64_t, InputRegionEntry>& regions, const Message& m,
                               std::int64_t bytes) {
  const MappedInputRegion& region = mapped_region(regions, m.output_region, "output");
  const auto size = static_cast<std::int64_t>(region.size());
  if (m.output_offset < 0 || m.output_capacity < 0 || m.output_offset > size || m.output_capacity > size - m.output_offset) {
    throw InputError(detail::concat("the output's range of ", m.output_capacity, " bytes at offset ", m.output_offset,
                                    " is outside its shared memory region of ", size, " bytes"));
  }
  return bytes <= m.output_capacity ? region.writable_data() + m.output_offset : nullptr;
}

// Note [Repository load]: a model's entry as the controller wrote it into a segment (YAML, then
// the segment's zero padding).
std::string entry_text(const SharedSegment& segment) {
  const auto* text = reinterpret_cast<const char*>(segment.data());
  return std::string(text, ::strnlen(text, segment.size()));
}

void send_hello(int socket, int worker) {
  Message hello;
  hello.type = MessageType::Hello;
  hello.worker = static_cast<std::uint32_t>(worker);
  hello.value = ::getpid();
  send_message(socket, hello);
}

}  // namespace

namespace {

// One model slot's memory in the daemon (Note [Repository load] in controller.hpp): its packed
// parameters in shared host memory and its device region (a shared segment on host, exportable
// device memory on cuda), or under no-ipc-optimization its group memory and the segment that
// its Region message carries (Note [Per-group handles]). Dropped when the slot is unloaded.
struct StoredModel {
  SharedSegment store;
  std::optional<SharedSegment> host_region;
  torch::Tensor device_region;
  std::vector<torch::Tensor> group_memory;
  std::optional<SharedSegment> group_segment;
  Bytes device_bytes = 0;  // what it takes of the device (Note [Device memory limit])
};

// The memory daemon: the start's models, the training state, then what the controller asks.
class MemoryDaemon {
 public:
  explicit MemoryDaemon(const ProcessOptions& options) : options_(options), socket_(options.socket_fd) {}

  int run();

 private:
  Bytes device_bytes(const ServedModel& s) const {
    if (per_group_ && !on_host_) {
      Bytes needed = 0;
      for (const Bytes span : s.layout.layout.group_span) needed += span > 0 ? shared_allocation_bytes(span) : 0;
      return needed;
    }
    return on_host_ ? s.layout.layout.total_bytes : shared_allocation_bytes(s.layout.layout.total_bytes);
  }
  // Note [Device memory limit]: a decoder's KV caches, which every worker keeps of its own: one per
  // decode capacity class (Note [Decode graph]; on the host a call's cache, at most the largest of
  // them) and, where the workers capture graphs, one per prompt bucket (Note [Prefill graphs]).
  Bytes decode_cache_bytes(const ServedModel& s, const ServedModelConfig& entry) const {
    exec::Decoder* decoder = exec::as_decoder(*s.model);
    if (decoder == nullptr) return 0;
    const auto element_bytes = static_cast<Bytes>(c10::elementSize(s.model->dtype()));
    Bytes one = exec::kept_decode_cache_bytes(decoder->config(), element_bytes);
    if (backend_->supports_graphs() && !switches_eagerly_in_server(config_.mechanism)) {
      one += exec::prefill_graph_cache_bytes(decoder->config(), entry.prompt_buckets, element_bytes);
    }
    return config_.workers * one;
  }
  // Note [Device memory limit], Note [AOTInductor packages]: a package keeps its own copy of its
  // constants on the device in every worker that loads it. Counted as the bytes of the constants
  // it exposes: those it folded at compile time are not known here, so this is a lower bound.
  Bytes package_copy_bytes(const ServedModel& s, const ServedModelConfig& entry) const {
    if (!exec::names_aoti_package(entry.torchscript_file.string())) return 0;
    return config_.workers * s.layout.layout.total_bytes;
  }
  // " and C bytes of KV caches (...)" for a decoder's load messages, the same for a package's own
  // copies; "" for another model.
  std::string worker_bytes_words(Bytes caches, Bytes copies) const {
    std::string words;
    if (caches > 0) {
      words += detail::concat(" and ", caches, " bytes of KV caches (each of the ", config_.workers, " workers keeps its own)");
    }
    if (copies > 0) {
      words += detail::concat(" and ", copies, " bytes of the package's own copies of its constants (each of the ",
                              config_.workers, " workers loads it)");
    }
    return words;
  }
  // Packs `s` into a new store and gives it its device memory.
  StoredModel store(const ServedModel& s);
  // The Region message of a stored model (Note [Segment order]) and the descriptors it carries.
  Message region_message(int slot, const StoredModel& stored, Bytes bytes, std::vector<int>& fds) const;
  // Note [Repository load]: LoadModel, answered ModelStored or Failed.
  void load(const Message& m, std::vector<UniqueFd>& fds);
  void checkpoint(const Message& m);

  const ProcessOptions& options_;
  const int socket_;
  ServeConfig config_;
  std::unique_ptr<exec::Backend> backend_;
  bool on_host_ = false;
  bool per_group_ = false;
  bool managed_ = false;
  bool pinned_ = true;
  std::map<int, StoredModel> stored_;
  std::unique_ptr<exec::ZooModel> training_model_;
  std::optional<SharedSegment> training_header_segment_;
  TrainingHeader* header_ = nullptr;
  std::optional<SharedSegment> training_host_region_;
  torch::Tensor training_state_;  // the job's two slots (Note [Committed slot])
  Bytes training_device_bytes_ = 0;

  // Note [Device memory limit]: the config's limit, or none.
  Bytes device_limit() const {
    return config_.device_memory_bytes > 0 ? config_.device_memory_bytes : std::numeric_limits<Bytes>::max();
  }
  // The device memory the stored models and the training state take now.
  Bytes device_bytes_used() const {
    Bytes used = training_device_bytes_;
    for (const auto& [slot, stored] : stored_) used += stored.device_bytes;
    return used;
  }
};

StoredModel MemoryDaemon::store(const ServedModel& s) {
  StoredModel stored;
  const MemoryLayout& layout = s.layout.layout;
  const auto bytes = static_cast<std::size_t>(layout.total_bytes);
  stored.store = SharedSegment::create("store-" + s.plan.model, bytes);
  exec::ParameterStore::over(bytes_of(stored.store, bytes), pinned_).pack(*s.model, s.layout);
  if (per_group_) {
    if (on_host_) {
      const auto page = static_cast<Bytes>(::sysconf(_SC_PAGESIZE));
      stored.group_segment = SharedSegment::create("groups-" + s.plan.model,
                                                   static_cast<std::size_t>(group_segment_offsets(layout, page).back()));
      return stored;
    }
    SharedSegment table = SharedSegment::create("handles-" + s.plan.model, layout.group_span.size() * kGroupHandleBytes);
    for (std::size_t g = 0; g < layout.group_span.size(); ++g) {
      if (layout.group_span[g] == 0) continue;  // no parameters: no memory, a zero handle
      stored.group_memory.push_back(backend_->allocate_shared_device(layout.group_span[g]));
      const std::string handle = backend_->export_device(stored.group_memory.back());
      PSW_CHECK(handle.size() == kGroupHandleBytes, "a device handle of ", handle.size(), " bytes");
      std::memcpy(table.data() + g * kGroupHandleBytes, handle.data(), handle.size());
    }
    stored.group_segment = std::move(table);
    return stored;
  }
  if (managed_) return stored;  // each worker makes its own managed memory
  if (on_host_) {
    stored.host_region = SharedSegment::create("region-" + s.plan.model, static_cast<std::size_t>(layout.total_bytes));
  } else {
    stored.device_region = backend_->allocate_shared_device(layout.total_bytes);
  }
  return stored;
}

Message MemoryDaemon::region_message(int slot, const StoredModel& stored, Bytes bytes, std::vector<int>& fds) const {
  Message region;
  region.type = MessageType::Region;
  region.model = slot;
  region.value = bytes;  // the model's packed bytes (the controller's residency)
  if (stored.group_segment) {
    fds.push_back(stored.group_segment->fd());
  } else if (stored.host_region) {
    fds.push_back(stored.host_region->fd());
  } else if (stored.device_region.defined()) {
    const std::string handle = backend_->export_device(stored.device_region);
    PSW_CHECK(handle.size() == sizeof region.handle, "a device handle of ", handle.size(), " bytes");
    std::memcpy(region.handle, handle.data(), handle.size());
  }
  return region;
}

void MemoryDaemon::load(const Message& m, std::vector<UniqueFd>& fds) {
  Message answer;
  answer.model = m.model;
  try {
    PSW_CHECK(m.model >= 0 && stored_.count(m.model) == 0, "a LoadModel message for slot ", m.model, ", taken");
    ServedModelConfig entry;
    if ((m.flags & kFlagEntryText) != 0) {
      PSW_CHECK(fds.size() == 1, "a LoadModel message without its entry");
      const SharedSegment entry_segment = SharedSegment::attach(std::move(fds.front()));
      entry = parse_served_model_entry(config_, entry_text(entry_segment), m.get_text());
    } else {
      PSW_CHECK(m.value2 >= 0 && static_cast<std::size_t>(m.value2) < config_.models.size(), "a LoadModel message for the serve config's model ", m.value2);
      entry = config_.models[static_cast<std::size_t>(m.value2)];
    }
    ServedModel s = build_served_model(config_, entry, load_hardware_profile(config_.hardware), backend_->device());
    if (!entry.weights.empty()) exec::load_weights(*s.model, entry.weights);
    const Bytes caches = decode_cache_bytes(s, entry);
    const Bytes copies = package_copy_bytes(s, entry);
    const Bytes needed = device_bytes(s) + caches + copies;
    const Bytes free = backend_->device_free_memory();
    if (needed > free) {
      throw ServiceError(ServiceError::Code::ResourceExhausted,
                         detail::concat("model '", entry.name, "' needs ", needed, " bytes of device memory for its ",
                                        s.layout.layout.total_bytes, " bytes of parameters", worker_bytes_words(caches, copies),
                                        ", but the device has ", free, " free: unload another model first"));
    }
    const Bytes used = device_bytes_used();
    if (needed > device_limit() - std::min(used, device_limit())) {
      throw ServiceError(ServiceError::Code::ResourceExhausted,
                         detail::concat("model '", entry.name, "' needs ", needed, " bytes of device memory for its ",
                                        s.layout.layout.total_bytes, " bytes of parameters", worker_bytes_words(caches, copies),
                                        ", but the server's models and ",
                                        "training state take ", used, " of its device_memory_bytes ", device_limit(),
                                        ": unload another model first"));
    }
    StoredModel stored = store(s);
    stored.device_bytes = needed;
    std::vector<int> out_fds = {stored.store.fd()};
    answer = region_message(m.model, stored, s.layout.layout.total_bytes, out_fds);
    answer.type = MessageType::ModelStored;
    stored_.emplace(m.model, std::move(stored));
    send_message(socket_, answer, out_fds);
    return;
  } catch (const ServiceError& e) {
    answer.value = static_cast<std::int64_t>(e.code());
    answer.set_text(e.what());
  } catch (const InputError& e) {
    answer.value = static_cast<std::int64_t>(ServiceError::Code::InvalidArgument);
    answer.set_text(e.what());
  } catch (const c10::Error& e) {  // LibTorch refusing the model (a file that is not TorchScript)
    answer.value = static_cast<std::int64_t>(ServiceError::Code::InvalidArgument);
    answer.set_text(e.what_without_backtrace());
  } catch (const std::exception& e) {
    answer.value = static_cast<std::int64_t>(ServiceError::Code::Internal);
    answer.set_text(e.what());
  }
  answer.type = MessageType::Failed;
  send_message(socket_, answer);
}

void MemoryDaemon::checkpoint(const Message& m) {
  Message answer;
  try {
    PSW_CHECK(training_model_ != nullptr, "a checkpoint asked of a server without a training job");
    const TrainingCheckpoint done =
        TrainingJob::save_checkpoint(*training_model_, *config_.training, training_state_, *header_, m.get_text());
    answer.type = MessageType::CheckpointDone;
    answer.value = done.completed_steps;
    answer.value2 = static_cast<std::int64_t>(done.bytes);
    std::memcpy(&answer.times[0], &done.loss, sizeof done.loss);
  } catch (const std::exception& e) {
    answer.type = MessageType::Failed;
    const bool theirs = dynamic_cast<const InputError*>(&e) != nullptr;  // e.g. a file that cannot be written
    answer.value = static_cast<std::int64_t>(theirs ? ServiceError::Code::InvalidArgument : ServiceError::Code::Internal);
    answer.set_text(e.what());
  }
  send_message(socket_, answer);
}

int MemoryDaemon::run() {
  send_hello(socket_, 0);
  config_ = load_serve_config(options_.config_path, options_.config_overrides);
  check_served_mechanism(config_.mechanism);
  backend_ = exec::make_backend(options_.backend);
  on_host_ = backend_->name() == "host";
  if (!on_host_) check_mps_daemon(config_.mechanism);
  std::vector<ServedModel> served = build_served_models(config_, backend_->device());
  // The user's weights, before anything is packed (exec/weights.hpp); the workers bind their
  // models to the regions the packed bytes are copied into, so only this process reads them.
  for (std::size_t i = 0; i < served.size(); ++i)
    if (!config_.models[i].weights.empty()) exec::load_weights(*served[i].model, config_.models[i].weights);
  if (config_.training) {
    training_model_ = make_training_model(*config_.training, config_.training->seed);
    TrainingJob::check_config(*training_model_, *config_.training);
    if (!config_.training->weights.empty()) exec::load_weights(*training_model_, config_.training->weights);
  }
  const MechanismTraits& mechanism = traits(config_.mechanism);
  per_group_ = mechanism.ipc_handle_per_group;                 // Note [Per-group handles]
  managed_ = mechanism.allocation == Allocation::Managed;      // Note [Managed memory]
  pinned_ = mechanism.host_memory == HostMemory::Pinned;
  // The device memory the config needs, checked before any of it is allocated.
  // Unified memory: no regions here; each worker makes managed memory for every model, all
  // of which may be on the device at once (with cache: lru, or in the middle of a task).
  // Asking for more than the device has would measure the driver's eviction instead.
  const auto start_bytes = [&](const ServedModel& s) {
    const Bytes one = per_group_ && !on_host_ ? device_bytes(s) : s.layout.layout.total_bytes;
    return managed_ ? one * config_.workers : one;
  };
  Bytes needed = 0;
  Bytes caches = 0;
  Bytes copies = 0;
  std::vector<Bytes> model_device_bytes;  // per model: its region and what every worker keeps of its own
  for (std::size_t r = 0; r < served.size(); ++r) {
    const Bytes model_caches = decode_cache_bytes(served[r], config_.models[r]);
    const Bytes model_copies = package_copy_bytes(served[r], config_.models[r]);
    model_device_bytes.push_back(start_bytes(served[r]) + model_caches + model_copies);
    needed += model_device_bytes.back();
    caches += model_caches;
    copies += model_copies;
  }
  if (training_model_) training_device_bytes_ = TrainingJob::state_bytes(*training_model_, *config_.training);
  needed += training_device_bytes_;
  // "the models' parameter regions[, the decoders' KV caches (C bytes)][, the packages' own
  // copies (P bytes)] and the training state"
  const std::string what = detail::concat(
      "the models' parameter regions",
      caches > 0 ? detail::concat(", the decoders' KV caches (", caches, " bytes: each of the ", config_.workers,
                                  " workers keeps its own)")
                 : std::string(),
      copies > 0 ? detail::concat(", the packages' own copies of their constants (", copies, " bytes: each of the ",
                                  config_.workers, " workers loads them)")
                 : std::string(),
      " and the training state need ");
  if (needed > device_limit()) {
    throw InputError(detail::concat(options_.config_path, ": ", what, needed,
                                    " bytes of device memory, more than the config's device_memory_bytes ", device_limit(),
                                    ": serve fewer models, train a smaller one or raise the limit"));
  }
  const Bytes free = backend_->device_free_memory();
  if (needed > free) {
    throw InputError(detail::concat(
        options_.config_path, ": ",
        managed_ ? detail::concat("the models' managed memory (one copy of every model for each of the ",
                                  config_.workers, " workers)",
                                  caches > 0 ? detail::concat(", the decoders' KV caches (", caches, " bytes)") : "",
                                  copies > 0 ? detail::concat(", the packages' own copies (", copies, " bytes)") : "",
                                  " and the training state need ")
                 : what,
        needed, " bytes of device memory, but the device has ", free, " free: serve fewer models",
        managed_ ? ", use fewer workers" : "", " or train a smaller one"));
  }
  // Every model packed once into shared host memory (Note [Segment order]), with its device memory.
  for (std::size_t r = 0; r < served.size(); ++r) {
    StoredModel stored = store(served[r]);
    stored.device_bytes = model_device_bytes[r];
    stored_.emplace(static_cast<int>(r), std::move(stored));
  }
  if (training_model_) {
    training_header_segment_ = SharedSegment::create("training-header", sizeof(TrainingHeader));
    header_ = reinterpret_cast<TrainingHeader*>(training_header_segment_->data());
    const Bytes state_bytes = TrainingJob::state_bytes(*training_model_, *config_.training);
    if (on_host_) {
      training_host_region_ = SharedSegment::create("training-state", static_cast<std::size_t>(state_bytes));
      training_state_ = bytes_of(*training_host_region_, static_cast<std::size_t>(state_bytes));
    } else {
      training_state_ = backend_->allocate_shared_device(state_bytes);
    }
    TrainingJob::initialize(*training_model_, *config_.training, training_state_, header_);
  }
  // The daemon keeps the packed copies and the regions, not the served models; the training
  // model stays, for its layout, to write checkpoints (Note [Training checkpoint]): its host
  // copy of the weights is the price.
  std::vector<Bytes> model_bytes;
  for (const auto& s : served) model_bytes.push_back(s.layout.layout.total_bytes);
  served.clear();
  Message message;
  message.type = MessageType::Segments;
  message.value = static_cast<std::int64_t>(stored_.size() + (training_model_ ? 1 : 0));
  std::vector<int> fds;
  for (const auto& [slot, s] : stored_) fds.push_back(s.store.fd());
  if (training_header_segment_) fds.push_back(training_header_segment_->fd());
  send_message(socket_, message, fds);
  for (const auto& [slot, s] : stored_) {
    std::vector<int> region_fds;
    const Message region = region_message(slot, s, model_bytes[static_cast<std::size_t>(slot)], region_fds);
    send_message(socket_, region, region_fds);
  }
  if (training_model_) {
    Message region;
    region.type = MessageType::Region;
    region.model = -1;
    region.value = TrainingJob::state_bytes(*training_model_, *config_.training);
    if (on_host_) {
      send_message(socket_, region, {training_host_region_->fd()});
    } else {
      const std::string handle = backend_->export_device(training_state_);
      PSW_CHECK(handle.size() == sizeof region.handle, "a device handle of ", handle.size(), " bytes");
      std::memcpy(region.handle, handle.data(), handle.size());
      send_message(socket_, region);
    }
  }
  // Hold the memory until the controller says so, or goes away; meanwhile write checkpoints,
  // and load and unload models (Note [Repository load]).
  while (true) {
    std::vector<UniqueFd> received;
    const std::optional<Message> next = receive_message(socket_, &received);
    if (!next || next->type == MessageType::Shutdown) return 0;
    switch (next->type) {
      case MessageType::Checkpoint: checkpoint(*next); break;
      case MessageType::LoadModel: load(*next, received); break;
      case MessageType::UnloadModel: stored_.erase(next->model); break;
      default: break;
    }
  }
}

}  // namespace

int run_memory_daemon(const ProcessOptions& options) {
  return guarded(options.socket_fd, [&] {
    MemoryDaemon daemon(options);
    return daemon.run();
  });
}

namespace {

// One model slot of a worker (Note [Segment order], Note [Repository load] in controller.hpp):
// the entry it was built from, the model, its parameter store and device memory, its engine
// and the input its graphs were captured for. Declared so that the engine goes first and the
// memory it reads last; never moved (the engine holds references into it).
struct WorkerSlot {
  ServedModelConfig entry;
  ServedModel served;
  SharedSegment store_segment;
  std::optional<SharedSegment> host_region;   // host: the region's shared segment
  torch::Tensor region;                        // the device region (imported, mapped or managed)
  UniqueFd group_fd;                           // host, per-group handles: the model's group segment
  std::optional<SharedSegment> handle_table;   // cuda, per-group handles: the model's group handles
  std::optional<exec::ParameterStore> store;
  std::optional<exec::DeviceRegion> device_region;
  std::unique_ptr<exec::PipelineEngine> engine;
  // Note [Prefill graphs]: a decoder's resident prefills per prompt bucket (null until its first).
  std::unique_ptr<exec::PrefillGraphs> prefill_graphs;
  // Note [Decode graph]: a decoder's caches per capacity class (decode_capacity), each with the
  // graph its sequences' steps replay, kept across calls (the graph after the cache it reads).
  struct KeptDecode {
    std::unique_ptr<exec::KvCache> cache;
    std::unique_ptr<exec::DecodeGraph> graph;
  };
  std::map<std::int64_t, KeptDecode> decodes;
  // Note [TorchScript served through its graph]: a user's model's switch (null: the engine's).
  std::unique_ptr<exec::CapturedSwitch> captured;
  torch::Tensor graph_input;  // the input its graphs were captured for (undefined: none)
};

// A worker process (run_worker): init part 1 builds what every message's handler then shares,
// and one handler per message the controller sends. The members are declared in the order the
// init makes them, so that they go in the reverse order (the engines before the memory they
// read, the input regions first). Built in place and never moved: the engines and the group
// openers hold references into it.
class Worker {
 public:
  // `ready` carries the start's first time (Note [Worker start]).
  Worker(const ProcessOptions& options, const Message& ready)
      : options_(options), socket_(options.socket_fd), ready_(ready) {}
  Worker(const Worker&) = delete;
  Worker& operator=(const Worker&) = delete;

  // Init part 1, then Ready to the controller; false when the controller went away before it
  // sent the segments.
  bool start();
  // Runs what the controller sends until Shutdown or until it goes away; the exit code.
  int serve();

 private:
  // A model slot's memory from its Region (or BindModel) message: null for an unloaded slot.
  std::unique_ptr<WorkerSlot> receive_slot(const Message& m, std::vector<UniqueFd>& fds);
  // Its engine, and its switch and resident graphs.
  void build_engine(WorkerSlot& slot);
  void build_captured_switch(WorkerSlot& slot, const torch::Tensor& example);
  void receive_training_region();
  void make_training_job();
  void map_io();

  // Note [Repository load]: BindModel and DropModel, answered.
  void bind_model(const Message& m, std::vector<UniqueFd>& fds);
  void drop_model(const Message& m);
  // The slot a task names; ServiceError (NotFound) when this worker has no such model.
  WorkerSlot& slot_of(const Message& m);
  // Region messages have no answer (Note [Inputs read in place]).
  void map_input(const Message& m, std::vector<UniqueFd>& region_fds);
  void unmap_input(const Message& m);
  // The tasks: each fills the reply the controller waits for, or throws.
  void infer(const Message& m, Message& reply);
  // Note [Generate call] (service.hpp): prefill through the switch, then decode, a Token
  // message per token.
  void generate(const Message& m, Message& reply, const torch::Tensor& prompt);
  // Note [Request phases]: the device's side of the task (times[2..4]), after waiting for it, and
  // an eager switch's host times (times[5..6]).
  void record_device_times(exec::PipelineEngine& engine, bool eager_switch, Message& reply);
  void train(const Message& m, Message& reply);
  // TrainStopped's times[2] and [3]: when and where the job read its stop (Note [Preemption phases]).
  void note_stop_seen(Message& stopped) const;
  // Between training steps and while paused: whether the controller went away (a hang-up, or
  // any message but DropModel, which is handled here: Note [Repository load]).
  bool socket_calls_off_training();
  void cleanup(Message& reply);
  void after_task(exec::PipelineEngine* task_engine);

  const ProcessOptions& options_;
  const int socket_;
  Message ready_;
  std::vector<UniqueFd> fds_;
  ServeConfig config_;
  std::optional<HardwareProfile> hardware_;
  std::size_t expected_ = 0;
  std::vector<SharedSegment> segments_;  // the training header (if any), control, io
  std::unique_ptr<exec::Backend> backend_;
  // Note [Decode graph]: the graph slot a generate call's decode steps replay from (taken at the
  // first call; a worker runs one call at a time).
  std::optional<std::size_t> decode_graph_slot_;
  bool on_host_ = false;
  bool per_group_ = false;  // Note [Per-group handles]
  exec::TransferMode mode_ = exec::TransferMode::Pipelined;
  std::optional<SharedSegment> training_host_region_;
  torch::Tensor training_region_;
  WorkerControl* control_ = nullptr;
  std::atomic<std::uint64_t>* group_opens_ = nullptr;
  // Per model slot (null: unloaded). A model under no-ipc-optimization has its group segment
  // (host) or handle table (cuda) instead of a region, and one under unified memory its managed
  // memory, made here.
  std::vector<std::unique_ptr<WorkerSlot>> slots_;
  std::unique_ptr<exec::ZooModel> training_model_;
  std::unique_ptr<TrainingJob> training_;
  const SharedSegment* io_ = nullptr;
  IoLayout io_layout_{0};
  const WorkerControl* own_control_ = nullptr;
  // The input area page-locked, so a request's input crosses to the device at the link's rate.
  torch::Tensor io_pinned_;
  std::map<std::uint64_t, InputRegionEntry> input_regions_;  // Note [Inputs read in place]
};

bool Worker::start() {
  send_hello(socket_, options_.worker_id);
  const std::optional<Message> segments_message = receive_message(socket_, &fds_);
  if (!segments_message) return false;
  if (segments_message->type != MessageType::Segments) {
    throw Error(std::string("expected the segments, got a ") + to_string(segments_message->type) + " message");
  }
  config_ = load_serve_config(options_.config_path, options_.config_overrides);
  expected_ = (config_.training ? 1 : 0) + 2;
  if (fds_.size() != expected_) {
    throw Error(detail::concat("expected ", expected_, " segments (Note [Segment order]), got ", fds_.size()));
  }
  PSW_CHECK(segments_message->value >= 0 && segments_message->value <= 1'000'000, "a Segments message for ",
            segments_message->value, " model slots");
  for (auto& fd : fds_) segments_.push_back(SharedSegment::attach(std::move(fd)));
  backend_ = exec::make_backend(options_.backend);
  ready_.times[1] = monotonic_ns();
  on_host_ = backend_->name() == "host";
  const MechanismTraits& mechanism = traits(config_.mechanism);
  per_group_ = mechanism.ipc_handle_per_group;
  mode_ = transfer_mode_of(config_.mechanism);
  hardware_ = load_hardware_profile(config_.hardware);
  for (std::int64_t k = 0; k < segments_message->value; ++k) {
    std::vector<UniqueFd> region_fds;
    const std::optional<Message> m = receive_message(socket_, &region_fds);
    if (!m || m->type != MessageType::Region || m->model != k) throw Error("expected model slot " + std::to_string(k) + "'s region from the controller");
    slots_.push_back(receive_slot(*m, region_fds));
  }
  receive_training_region();
  const SharedSegment& control_segment = segments_[expected_ - 2];
  PSW_CHECK(control_segment.size() >= sizeof(WorkerControl) * kMaxWorkers, "control segment too small");
  control_ = reinterpret_cast<WorkerControl*>(control_segment.data());
  group_opens_ = &control_[options_.worker_id].group_opens;
  ready_.times[2] = monotonic_ns();
  for (auto& slot : slots_) {
    if (slot) build_engine(*slot);
  }
  ready_.times[3] = monotonic_ns();
  make_training_job();
  ready_.times[4] = monotonic_ns();
  map_io();

  ready_.type = MessageType::Ready;
  ready_.worker = static_cast<std::uint32_t>(options_.worker_id);
  ready_.times[5] = monotonic_ns();
  send_message(socket_, ready_);
  return true;
}

std::unique_ptr<WorkerSlot> Worker::receive_slot(const Message& m, std::vector<UniqueFd>& fds) {
  if ((m.flags & kFlagUnloaded) != 0) return nullptr;
  auto slot = std::make_unique<WorkerSlot>();
  PSW_CHECK(!fds.empty(), "model slot ", m.model, " without its parameter store");
  std::size_t next = 0;
  slot->store_segment = SharedSegment::attach(std::move(fds[next++]));
  if ((m.flags & kFlagEntryText) != 0) {
    PSW_CHECK(fds.size() >= 2, "model slot ", m.model, " without its entry");
    const SharedSegment text = SharedSegment::attach(std::move(fds.back()));
    fds.pop_back();
    slot->entry = parse_served_model_entry(config_, entry_text(text), "model slot " + std::to_string(m.model));
  } else {
    PSW_CHECK(m.value2 >= 0 && static_cast<std::size_t>(m.value2) < config_.models.size(), "model slot ", m.model,
              " names the serve config's model ", m.value2, ", which it does not have, and came without its entry");
    slot->entry = config_.models[static_cast<std::size_t>(m.value2)];
  }
  if (per_group_) {
    PSW_CHECK(fds.size() == next + 1, "a model's group handles without their segment");
    if (on_host_) {
      slot->group_fd = std::move(fds[next]);
    } else {
      slot->handle_table = SharedSegment::attach(std::move(fds[next]));
    }
  } else if (mode_ == exec::TransferMode::OnDemand) {
    PSW_CHECK(fds.size() == next, "a device region for a model in managed memory");
  } else if (on_host_) {
    PSW_CHECK(fds.size() == next + 1, "a host region without its segment");
    slot->host_region = SharedSegment::attach(std::move(fds[next]));
    slot->region = bytes_of(*slot->host_region, static_cast<std::size_t>(m.value));
  } else {
    slot->region = backend_->import_device(std::string(reinterpret_cast<const char*>(m.handle), sizeof m.handle), m.value);
  }
  return slot;
}

void Worker::receive_training_region() {
  if (!config_.training) return;
  std::vector<UniqueFd> region_fds;
  const std::optional<Message> m = receive_message(socket_, &region_fds);
  if (!m || m->type != MessageType::Region || m->model != -1) throw Error("expected the training state's region from the controller");
  if (on_host_) {
    PSW_CHECK(region_fds.size() == 1, "a host region without its segment");
    training_host_region_ = SharedSegment::attach(std::move(region_fds.front()));
    training_region_ = bytes_of(*training_host_region_, static_cast<std::size_t>(m->value));
  } else {
    training_region_ =
        backend_->import_device(std::string(reinterpret_cast<const char*>(m->handle), sizeof m->handle), m->value);
  }
}

void Worker::build_engine(WorkerSlot& slot) {
  slot.served = build_served_model(config_, slot.entry, *hardware_, backend_->device());
  ServedModel& s = slot.served;
  const bool pinned = mode_ != exec::TransferMode::Pageable;
  const Bytes bytes = s.layout.layout.total_bytes;
  PSW_CHECK(slot.store_segment.size() >= static_cast<std::size_t>(bytes), "model '", slot.entry.name, "''s store of ",
            slot.store_segment.size(), " bytes for ", bytes);
  if (mode_ == exec::TransferMode::OnDemand) {
    // Note [Managed memory]: this worker's managed copy of the model, checked against the
    // device's free memory now, with the daemon's allocations and the other contexts made.
    const Bytes free = backend_->device_free_memory();
    if (bytes > free) {
      throw InputError(detail::concat(options_.config_path, ": worker ", options_.worker_id, " needs ", bytes,
                                      " bytes of managed memory for '", slot.entry.name, "' (unified memory), but the device has ",
                                      free, " free: serve fewer models or use fewer workers"));
    }
  }
  slot.store.emplace(exec::ParameterStore::over(backend_->register_host(slot.store_segment.data(), bytes, pinned), pinned));
  s.model->to(backend_->device());
  if (per_group_) {
    // Note [Per-group handles]: opened on the switch path, counted for the controller.
    exec::GroupOpener open;
    std::atomic<std::uint64_t>* group_opens = group_opens_;
    if (on_host_) {
      const auto page = static_cast<Bytes>(::sysconf(_SC_PAGESIZE));
      const std::vector<Bytes> offsets = group_segment_offsets(s.layout.layout, page);
      const int fd = slot.group_fd.get();
      open = [fd, offsets, group_opens](std::size_t g, Bytes group_bytes) {
        PSW_CHECK(offsets[g] + group_bytes <= offsets[g + 1], "group ", g, " outside its pages");
        torch::Tensor memory = map_group(fd, offsets[g], group_bytes);
        group_opens->fetch_add(1, std::memory_order_relaxed);
        return memory;
      };
    } else {
      const SharedSegment* table = &*slot.handle_table;
      PSW_CHECK(table->size() >= s.layout.layout.group_span.size() * kGroupHandleBytes, "a short handle table");
      open = [backend = backend_.get(), table, group_opens](std::size_t g, Bytes group_bytes) {
        const auto* handle = reinterpret_cast<const char*>(table->data() + g * kGroupHandleBytes);
        torch::Tensor memory = backend->import_device(std::string(handle, kGroupHandleBytes), group_bytes);
        group_opens->fetch_add(1, std::memory_order_relaxed);
        return memory;
      };
    }
    slot.engine = std::make_unique<exec::PipelineEngine>(*backend_, *s.model, s.plan, *slot.store, std::move(open));
  } else {
    if (mode_ == exec::TransferMode::OnDemand) {
      // Note [Managed memory]: filled from the packed host copy, every page on the host.
      slot.region = backend_->allocate_managed(slot.store->bytes());
    }
    slot.device_region.emplace(exec::DeviceRegion::over(slot.region));
    slot.engine =
        std::make_unique<exec::PipelineEngine>(*backend_, *s.model, s.plan, *slot.store, &*slot.device_region, mode_);
  }
  // Init part 1: the switch and resident graphs, captured before any request, for the
  // configured batch (other batches run eagerly). Not for per-group memory, whose
  // addresses change with every switch, nor from pageable memory or per-tensor
  // allocations: switches_eagerly_in_server, the definition the simulator's profile entries use.
  if (backend_->supports_graphs() && !switches_eagerly_in_server(config_.mechanism)) {
    const torch::Tensor example = served_example_input(*s.model, slot.entry, 0).to(backend_->device());
    bool graphs = true;
    if (!slot.entry.torchscript_file.empty() && mode_ == exec::TransferMode::Pipelined) {
      try {
        build_captured_switch(slot, example);
      } catch (const exec::UncapturableError& e) {
        // Note [Uncaptured switch]: said, and served as the host serves it; otherwise the start stops.
        if (!slot.entry.allow_uncaptured) {
          throw InputError("model '" + slot.entry.name + "': " + e.what() +
                           " (allow_uncaptured: true serves it copy-then-forward)");
        }
        std::cerr << detail::concat("psw-exec: worker ", options_.worker_id, ": '", slot.entry.name,
                                    "' is not captured (allow_uncaptured), served copy-then-forward: ", e.what(), "\n");
        slot.captured.reset();
        graphs = false;
      }
    } else {
      slot.engine->capture_graphs(example, /*traced=*/false);
    }
    if (graphs) slot.graph_input = example;
  }
  // The capture's warm-up ran the model: its pages go back to the host, so the first
  // request switches a cold model as every later one does.
  if (mode_ == exec::TransferMode::OnDemand) slot.engine->evict_to_host();
}

// Note [TorchScript served through its graph]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// A user's TorchScript model has no gates inside its forward, so its engine can only copy every
// group before the forward starts. Where the engine's graphs would be captured (a backend with
// graphs, a mechanism that pipelines from one region), the worker instead captures the module's
// forward over the model's region and switches it as `psw run --graph` does (Note
// [Graph-pipelined switch], exec/captured_forward.hpp): the layers are the capture's, timed here
// at start and planned for the config's link with the entry's strategy (a plan file is over the
// module's layers, not the capture's: the strategy it was made with is not known, so Optimal).
// The engine still binds the tensors to the region and runs requests of other batches eagerly.
// Each worker measures and plans for itself; the plans may differ by the noise of the timing.
void Worker::build_captured_switch(WorkerSlot& slot, const torch::Tensor& example) {
  // The tensors bound and the TorchScript executor's first runs done (it may compile fused
  // kernels then, which a capture cannot hold), as run_graph_switch_benchmark does.
  for (int i = 0; i < 3; ++i) slot.engine->switch_in_and_run(example);
  backend_->synchronize();
  const std::int64_t packed = std::min(slot.store->bytes().numel(), slot.region.numel());
  exec::CapturedSwitchSpec spec;
  spec.hardware = *hardware_;
  spec.strategy = slot.entry.plan_file.empty() ? grouping_strategy(config_.mechanism, slot.entry.strategy)
                                               : Strategy::Optimal;
  slot.captured = std::make_unique<exec::CapturedSwitch>(*backend_, *slot.served.model, example,
                                                         slot.store->bytes().narrow(0, 0, packed),
                                                         slot.region.narrow(0, 0, packed), spec);
  const exec::CapturedSwitch& c = *slot.captured;
  std::cerr << detail::concat("psw-exec: worker ", options_.worker_id, ": '", slot.entry.name,
                              "' switches through its captured graph: ", c.graph().nodes.size(), " nodes, ",
                              c.analysis().layers.size(), " layers in ", c.groups().size(), " groups, ",
                              c.copy_ranges(), " copies; planned ", c.predicted().ms(), " ms, bound ", c.bound().ms(),
                              " ms\n");
}

void Worker::make_training_job() {
  if (!config_.training) return;
  training_model_ = make_training_model(*config_.training, 0);
  training_model_->to(backend_->device());
  training_ = std::make_unique<TrainingJob>(*training_model_, *config_.training, training_region_,
                                            reinterpret_cast<TrainingHeader*>(segments_[0].data()));
  // Note [Bounded lookahead]: a stop takes effect within this many layers of device work.
  const auto lookahead = static_cast<std::size_t>(config_.training->lookahead);
  training_->set_boundary_hook([backend = backend_.get(), lookahead] { backend->throttle(lookahead); });
  training_->set_device_fence([backend = backend_.get()] { backend->synchronize(); });
  // Note [Rehearsal] (training.cpp): the first step's first-use costs paid here, before ready; the
  // scratch from outside the caching allocator goes back to the device after it.
  if (config_.training->rehearse) training_->rehearse(backend_->allocate_shared_device(training_->slot_bytes()));
}

void Worker::map_io() {
  io_ = &segments_[expected_ - 1];
  io_layout_ = IoLayout{config_.max_tensor_bytes};
  PSW_CHECK(static_cast<std::int64_t>(io_->size()) >= io_layout_.total(), "io segment too small");
  own_control_ = &control_[options_.worker_id];
  io_pinned_ = backend_->register_host(io_->data(), static_cast<Bytes>(io_->size()), true);
}

void Worker::bind_model(const Message& m, std::vector<UniqueFd>& fds) {
  Message reply;
  reply.type = MessageType::ModelBound;
  reply.worker = static_cast<std::uint32_t>(options_.worker_id);
  reply.model = m.model;
  try {
    PSW_CHECK(m.model >= 0 && m.model <= 1'000'000, "a BindModel message for slot ", m.model);
    const auto index = static_cast<std::size_t>(m.model);
    if (slots_.size() <= index) slots_.resize(index + 1);
    PSW_CHECK(!slots_[index], "model slot ", m.model, " is bound already");
    std::unique_ptr<WorkerSlot> slot = receive_slot(m, fds);
    PSW_CHECK(slot != nullptr, "a BindModel message for an unloaded slot");
    build_engine(*slot);
    slots_[index] = std::move(slot);
  } catch (const c10::Error& e) {
    reply.value = 1;
    reply.set_text(e.what_without_backtrace());
  } catch (const std::exception& e) {
    reply.value = 1;
    reply.set_text(e.what());
  }
  send_message(socket_, reply);
}

void Worker::drop_model(const Message& m) {
  if (m.model >= 0 && static_cast<std::size_t>(m.model) < slots_.size()) {
    std::unique_ptr<WorkerSlot>& slot = slots_[static_cast<std::size_t>(m.model)];
    if (slot && slot->engine) slot->engine->close_groups();
    slot.reset();  // the engine, then the memory it read (WorkerSlot's order)
  }
  Message reply;
  reply.type = MessageType::ModelDropped;
  reply.worker = static_cast<std::uint32_t>(options_.worker_id);
  reply.model = m.model;
  send_message(socket_, reply);
}

WorkerSlot& Worker::slot_of(const Message& m) {
  if (m.model < 0 || static_cast<std::size_t>(m.model) >= slots_.size() || !slots_[static_cast<std::size_t>(m.model)]) {
    throw ServiceError(ServiceError::Code::NotFound, detail::concat("model slot ", m.model, " is not bound in worker ",
                                                                    options_.worker_id));
  }
  return *slots_[static_cast<std::size_t>(m.model)];
}

int Worker::serve() {
  std::vector<UniqueFd> region_fds;
  while (true) {
    const std::optional<Message> next = receive_message(socket_, &region_fds);
    if (!next || next->type == MessageType::Shutdown) return 0;
    const Message& m = *next;
    if (m.type == MessageType::MapInput) {
      map_input(m, region_fds);
      region_fds.clear();  // the mapping keeps the object
      continue;
    }
    if (m.type == MessageType::BindModel) {  // Note [Repository load]
      bind_model(m, region_fds);
      region_fds.clear();
      continue;
    }
    region_fds.clear();
    if (m.type == MessageType::DropModel) {
      drop_model(m);
      continue;
    }
    if (m.type == MessageType::UnmapInput) {
      unmap_input(m);
      continue;
    }
    // The engine of the inference task this message starts, for what follows its reply.
    exec::PipelineEngine* task_engine = nullptr;
    if (m.type == MessageType::Infer && m.model >= 0 && static_cast<std::size_t>(m.model) < slots_.size() &&
        slots_[static_cast<std::size_t>(m.model)]) {
      task_engine = slots_[static_cast<std::size_t>(m.model)]->engine.get();
    }
    Message reply;
    reply.worker = static_cast<std::uint32_t>(options_.worker_id);
    reply.request = m.request;
    reply.model = m.model;
    try {
      switch (m.type) {
        case MessageType::Infer: infer(m, reply); break;
        case MessageType::Train: train(m, reply); break;
        case MessageType::Cleanup: cleanup(reply); break;
        default:
          throw Error(std::string("unexpected ") + to_string(m.type) + " message");
      }
    } catch (const InputError& e) {
      reply.type = MessageType::Failed;
      reply.value = static_cast<std::int64_t>(ServiceError::Code::InvalidArgument);
      reply.set_text(e.what());
    } catch (const ServiceError& e) {
      reply.type = MessageType::Failed;
      reply.value = static_cast<std::int64_t>(e.code());
      reply.set_text(e.what());
    } catch (const c10::Error& e) {
      // LibTorch refusing an input (a wrong shape reaching a kernel) is the client's error.
      reply.type = MessageType::Failed;
      reply.value = static_cast<std::int64_t>(ServiceError::Code::InvalidArgument);
      reply.set_text(e.what_without_backtrace());
    }
    send_message(socket_, reply);
    after_task(task_engine);
  }
}

void Worker::map_input(const Message& m, std::vector<UniqueFd>& region_fds) {
  InputRegionEntry entry;
  try {
    PSW_CHECK(region_fds.size() == 1, "a MapInput message without its descriptor");
    PSW_CHECK(m.value2 >= 0 && m.bytes > 0, "a MapInput message with a bad range");
    entry.mapping = std::make_unique<MappedInputRegion>(*backend_, region_fds.front(),
                                                        static_cast<std::uint64_t>(m.value2),
                                                        static_cast<std::uint64_t>(m.bytes));
  } catch (const std::exception& e) {
    entry.error = e.what();
  }
  input_regions_.insert_or_assign(static_cast<std::uint64_t>(m.value), std::move(entry));
}

void Worker::unmap_input(const Message& m) { input_regions_.erase(static_cast<std::uint64_t>(m.value)); }

void Worker::infer(const Message& m, Message& reply) {
  WorkerSlot& slot = slot_of(m);
  reply.times[0] = monotonic_ns();
  // Note [Request phases]: the device's side of the request is timed from this mark
  // on the idle compute stream, so that it includes the input's copy and the launch.
  backend_->mark(kMarkReceived);
  std::vector<std::int64_t> shape(m.shape, m.shape + m.rank);
  const auto type = static_cast<ElementType>(m.dtype);
  // Note [Inputs read in place]: from the client's region, or from the io segment.
  const bool in_region = (m.flags & kFlagInputInRegion) != 0;
  const std::uint8_t* source = in_region ? input_in_region(input_regions_, m) : io_->data() + io_layout_.input_offset();
  torch::Tensor input;
  const std::int64_t launch_began = monotonic_ns();
  if (in_region && on_host_) {
    // Here the CPU copies, through a mapping of an object the client may shrink at any
    // time (SIGBUS); on cuda the copy engine reads the page-locked pages, which stay.
    input = torch::empty(shape, torch::dtype(torch_type(type)));
    if (!copy_guarded(input.data_ptr(), source, input.nbytes())) {
      throw InputError("the input's shared memory object shrank while the request waited");
    }
  } else {
    input = torch::empty(shape, torch::dtype(torch_type(type)).device(backend_->device()));
    backend_->copy_to_device(input, source);
  }
  const std::int64_t launch_ns = monotonic_ns() - launch_began;
  backend_->mark(kMarkInputOnDevice);
  if ((m.flags & kFlagGenerate) != 0) return generate(m, reply, input);
  reply.times[7] = launch_ns;
  exec::PipelineEngine& engine = *slot.engine;
  const torch::Tensor& graph_input = slot.graph_input;
  const bool transfer = (m.flags & kFlagTransfer) != 0;
  const bool graph = graph_input.defined() && graph_input.sizes() == input.sizes();
  torch::Tensor output;
  if (graph && slot.captured) {
    // Note [TorchScript served through its graph]: the engine's marks around the replay, so
    // the phases read as for any request; the first kernel's wait for its group is inside the
    // graph, where no mark is: device_startup ends at the replay's start.
    backend_->mark(exec::PipelineEngine::kMarkBegin);
    backend_->mark(exec::PipelineEngine::kMarkFirstLayer);
    output = transfer ? slot.captured->switch_in_and_run(input) : slot.captured->run_resident(input);
    backend_->mark(exec::PipelineEngine::kMarkEnd);
  } else if (graph) {
    output = transfer ? engine.switch_in_and_run_graph(input) : engine.run_resident_graph(input);
  } else {
    output = transfer ? engine.switch_in_and_run(input) : engine.run_resident(input);
  }
  record_device_times(engine, transfer && !graph, reply);
  const std::vector<std::int64_t>& stated = slot.entry.output_shape;
  if (!stated.empty() && (output.dim() != static_cast<std::int64_t>(stated.size()) + 1 ||
                          !std::equal(stated.begin(), stated.end(), output.sizes().begin() + 1))) {
    std::ostringstream why;
    why << "model '" << slot.entry.name << "' answered " << output.scalar_type() << " " << output.sizes()
        << ", but its output_shape in the serve config is " << torch::IntArrayRef(stated) << " per sample";
    throw InputError(why.str());
  }
  const auto out_bytes = static_cast<std::int64_t>(output.nbytes());
  if (out_bytes > io_layout_.max_tensor_bytes || output.dim() > static_cast<std::int64_t>(kMaxRank)) {
    throw InputError(detail::concat("the output of ", out_bytes, " bytes exceeds max_tensor_bytes ",
                                    io_layout_.max_tensor_bytes));
  }
  // Straight into the client's region (Note [Outputs written in place]) or the io segment, both
  // registered with the device: on cuda one DMA into page-locked memory, where a host tensor
  // between took two copies, the first staged by the driver through its own buffer (pageable
  // memory) and the second by the CPU.
  std::uint8_t* in_client_region =
      (m.flags & kFlagOutputInRegion) != 0 ? output_in_region(input_regions_, m, out_bytes) : nullptr;
  if (in_client_region != nullptr && on_host_) {
    // The CPU writes through a mapping of an object the client may shrink (SIGBUS), as for inputs.
    const torch::Tensor host = output.contiguous();
    if (!copy_guarded(in_client_region, host.data_ptr(), static_cast<std::size_t>(out_bytes))) {
      throw InputError("the output's shared memory object shrank while the request ran");
    }
  } else {
    std::uint8_t* destination = in_client_region != nullptr ? in_client_region : io_->data() + io_layout_.output_offset();
    torch::from_blob(destination, output.sizes(), torch::dtype(output.scalar_type())).copy_(output);
  }
  if (in_client_region != nullptr) reply.flags |= kFlagOutputInRegion;
  backend_->synchronize();
  reply.times[1] = monotonic_ns();
  reply.type = MessageType::InferDone;
  reply.dtype = static_cast<std::int32_t>(element_type(output.scalar_type()));
  reply.rank = static_cast<std::uint32_t>(output.dim());
  for (std::int64_t d = 0; d < output.dim(); ++d) reply.shape[d] = output.size(d);
  reply.bytes = out_bytes;
}

void Worker::record_device_times(exec::PipelineEngine& engine, bool eager_switch, Message& reply) {
  engine.last_timing();  // synchronizes
  if (eager_switch) {  // Note [Host time of an eager switch]
    const EagerHostTimes host = engine.last_eager_host_times();
    reply.times[5] = host.prepare.ns();
    reply.times[6] = host.forward.ns();
  }
  reply.times[2] = backend_->elapsed(kMarkReceived, exec::PipelineEngine::kMarkFirstLayer).ns();
  reply.times[3] = backend_->elapsed(kMarkReceived, kMarkInputOnDevice).ns();
  reply.times[4] = backend_->elapsed(kMarkReceived, exec::PipelineEngine::kMarkEnd).ns();
}

void Worker::generate(const Message& m, Message& reply, const torch::Tensor& prompt) {
  WorkerSlot& slot = slot_of(m);
  exec::ZooModel& model = *slot.served.model;
  exec::Decoder* decoder = exec::as_decoder(model);
  if (decoder == nullptr) throw InputError(model.name() + " is not a decoder: it does not generate");
  const std::int64_t length = prompt.size(1);
  const std::int64_t max_tokens = m.value;
  const std::int64_t context = decoder->config().max_positions;
  if (prompt.dim() != 2 || prompt.size(0) != 1 || max_tokens < 1 || length + max_tokens > context) {
    throw InputError(detail::concat("a generate call takes one prompt (1 x L ids) and max_tokens >= 1 with L + "
                                    "max_tokens <= ", context, ", not ", prompt.sizes(), " and ", max_tokens));
  }
  const std::int64_t bucket = prompt_bucket(slot.entry.prompt_buckets, length);
  // Note [Prompt buckets]: padded to its bucket; the cache holds the bucket's prefill and the
  // tokens to come. Note [Decode graph]: where the slot's graphs are (its parameters at fixed
  // addresses), in its capacity class's cache, kept with the graph its steps replay; else in a
  // cache of its own and a graph captured for it.
  const std::int64_t positions = std::max(bucket, length + max_tokens);
  std::optional<exec::KvCache> own_cache;
  WorkerSlot::KeptDecode* kept = nullptr;
  if (slot.graph_input.defined() && backend_->supports_graphs()) {
    const auto [found, inserted] = slot.decodes.try_emplace(exec::decode_capacity(positions, context));
    if (inserted) {
      found->second.cache = std::make_unique<exec::KvCache>(decoder->make_cache(1, found->first));
      found->second.graph =
          std::make_unique<exec::DecodeGraph>(*backend_, backend_->new_graph_slot(), *decoder, *found->second.cache);
    }
    kept = &found->second;
  } else {
    own_cache.emplace(decoder->make_cache(1, positions));
  }
  exec::KvCache& cache = kept != nullptr ? *kept->cache : *own_cache;
  const exec::PipelineEngine::Forward prefill = [&](const torch::Tensor& tokens, const exec::LayerGate& gate) {
    return decoder->prefill_padded(tokens, cache, gate, length);
  };
  exec::PipelineEngine& engine = *slot.engine;
  const bool transfer = (m.flags & kFlagTransfer) != 0;
  const torch::Tensor padded = exec::pad_prompt(prompt, bucket);
  torch::Tensor first_logits;
  if (transfer) {
    first_logits = engine.switch_in_and_run(padded, prefill);
  } else if (slot.graph_input.defined()) {
    // Note [Prefill graphs]: where the slot's graphs are (its parameters at fixed addresses), a
    // resident prompt replays its bucket's prefill; the engine's marks around it, as for a
    // captured model's request.
    if (!slot.prefill_graphs) slot.prefill_graphs = std::make_unique<exec::PrefillGraphs>(*backend_, *decoder);
    backend_->mark(exec::PipelineEngine::kMarkBegin);
    backend_->mark(exec::PipelineEngine::kMarkFirstLayer);
    first_logits = slot.prefill_graphs->prefill(padded, length, cache);
    backend_->mark(exec::PipelineEngine::kMarkEnd);
  } else {
    first_logits = engine.run_resident(padded, prefill);
  }
  std::int64_t first_token_ns = 0;
  std::int64_t last_token_ns = 0;
  Message token;
  token.type = MessageType::Token;
  token.worker = static_cast<std::uint32_t>(options_.worker_id);
  token.request = m.request;
  token.model = m.model;
  const exec::TokenCallback send_token = [&](int i, const torch::Tensor& next) {
    token.value = next.item<std::int64_t>();  // waits for the device
    token.value2 = i;
    token.times[0] = last_token_ns = monotonic_ns();
    if (i == 0) first_token_ns = last_token_ns;
    send_message(socket_, token);
  };
  // Note [Decode graph]: the steps replay one graph where the backend has graphs.
  torch::Tensor ids;
  if (kept != nullptr) {
    ids = kept->graph->decode(first_logits, static_cast<int>(max_tokens), send_token);
  } else {
    if (!decode_graph_slot_) decode_graph_slot_ = backend_->new_graph_slot();
    ids = exec::greedy_decode_replayed(*backend_, *decode_graph_slot_, *decoder, first_logits, cache,
                                       static_cast<int>(max_tokens), send_token);
  }
  record_device_times(engine, transfer, reply);  // a generate call's switch is eager
  reply.times[7] = bucket;
  ids = ids.contiguous().to(torch::kCPU);
  const auto out_bytes = static_cast<std::int64_t>(ids.nbytes());
  if (out_bytes > io_layout_.max_tensor_bytes) {
    throw InputError(detail::concat("the ", ids.numel(), " generated ids exceed max_tensor_bytes ",
                                    io_layout_.max_tensor_bytes));
  }
  std::memcpy(io_->data() + io_layout_.output_offset(), ids.data_ptr(), static_cast<std::size_t>(out_bytes));
  reply.times[1] = monotonic_ns();
  reply.type = MessageType::InferDone;
  reply.dtype = static_cast<std::int32_t>(ElementType::Int64);
  reply.rank = 2;
  reply.shape[0] = 1;
  reply.shape[1] = ids.size(1);
  reply.bytes = out_bytes;
  reply.value = first_token_ns;
  reply.value2 = last_token_ns;
}

void Worker::train(const Message& m, Message& reply) {
  PSW_CHECK(training_ != nullptr, "no training job configured");
  reply.times[0] = monotonic_ns();
  const int socket = socket_;
  auto controller_gone = [this] { return socket_calls_off_training(); };
  // Paused in place (Note [Preemption without loss]): once the device has done what
  // was queued, say so, and wait at this boundary for the controller's word.
  auto pause = [&]() -> bool {
    backend_->synchronize();
    // Note [Pause and resume]: read before the controller can know of this pause.
    const std::uint32_t resumes = own_control_->resumes.load(std::memory_order_acquire);
    Message paused;
    paused.type = MessageType::TrainStopped;
    paused.worker = static_cast<std::uint32_t>(options_.worker_id);
    paused.value = committed_steps(training_->header());
    paused.value2 = kTrainPaused;
    paused.times[1] = monotonic_ns();
    note_stop_seen(paused);
    send_message(socket, paused);
    return wait_while_paused(*own_control_, resumes, controller_gone);
  };
  const TrainingJob::Result result = training_->run(
      m.value, own_control_->stop, [&](std::int64_t, double) { return !controller_gone(); }, pause);
  backend_->synchronize();
  reply.type = MessageType::TrainStopped;
  reply.times[1] = monotonic_ns();
  reply.value = result.completed_steps;
  reply.value2 = result.outcome == TrainingJob::Outcome::Preempted ? kTrainAbandoned : kTrainReachedTarget;
  note_stop_seen(reply);
}

void Worker::note_stop_seen(Message& stopped) const {
  // Note [Preemption phases]: where and when the job read the stop, for the controller's split.
  const TrainingJob::StopSeen& seen = training_->stop_seen();
  stopped.times[2] = seen.ns;
  stopped.times[3] = static_cast<std::int64_t>(seen.where);
}

bool Worker::socket_calls_off_training() {
  // A controller that goes away while training must not leave this worker training. It sends
  // a training worker nothing but DropModel, which is handled without stopping the job: an
  // unloaded model's memory is freed once every worker has let it go.
  while (true) {
    pollfd p{socket_, POLLIN, 0};
    if (::poll(&p, 1, 0) == 0) return false;
    Message peeked;
    const ssize_t n = ::recv(socket_, &peeked, sizeof peeked, MSG_PEEK | MSG_DONTWAIT);
    if (n != static_cast<ssize_t>(sizeof peeked) || peeked.type != MessageType::DropModel) return true;
    const std::optional<Message> drop = receive_message(socket_);
    if (!drop) return true;
    drop_model(*drop);
  }
}

void Worker::cleanup(Message& reply) {
  // The task's state is the daemon's; what a worker keeps between tasks is LibTorch's
  // own caches, which stay warm for the next activation.
  reply.type = MessageType::CleanupDone;
}

void Worker::after_task(exec::PipelineEngine* task_engine) {
  // Note [After the task] (exec/pipeline.hpp), once the reply is out (also after a
  // failed request, which may have opened groups): close the per-group handles, so the
  // next switch opens them again; with cache off, send the managed pages back to the host,
  // so the next switch migrates them again. The controller counts this worker free from
  // the reply on, so a request it sends here meanwhile waits in the socket until this is
  // done: off the reply's critical path, not always off the next request's.
  if (task_engine == nullptr) return;
  task_engine->close_groups();
  if (mode_ == exec::TransferMode::OnDemand && config_.cache == CachePolicy::Off) task_engine->evict_to_host();
}

}  // namespace

int run_worker(const ProcessOptions& options) {
  // Note [Worker start]: the start's times, sent with Ready.
  Message ready;
  ready.times[0] = monotonic_ns();
  return guarded(options.socket_fd, [&]() -> int {
    Worker worker(options, ready);
    if (!worker.start()) return 0;
    return worker.serve();
  });
}

}  // namespace psw::runtime
