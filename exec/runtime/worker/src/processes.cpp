#include "psw/runtime/worker/processes.hpp"

#include <poll.h>
#include <sys/mman.h>
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

#include "psw/common/error.hpp"
#include "psw/exec/backend.hpp"
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
    data_ = static_cast<const std::uint8_t*>(base_) + (object_offset - map_offset);
    size_ = byte_size;
  }
  ~MappedInputRegion() {
    registered_ = torch::Tensor();  // unregistered (cuda) before the pages go
    ::munmap(base_, length_);
  }
  MappedInputRegion(const MappedInputRegion&) = delete;
  MappedInputRegion& operator=(const MappedInputRegion&) = delete;

  const std::uint8_t* data() const { return data_; }
  std::uint64_t size() const { return size_; }

 private:
  void* base_ = MAP_FAILED;
  std::size_t length_ = 0;
  torch::Tensor registered_;
  const std::uint8_t* data_ = nullptr;
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
const std::uint8_t* input_in_region(const std::map<std::uint64_t, InputRegionEntry>& regions, const Message& m) {
  const auto it = regions.find(static_cast<std::uint64_t>(m.value));
  if (it == regions.end()) {
    throw ServiceError(ServiceError::Code::Internal,
                       detail::concat("the input's shared memory region ", m.value, " is not mapped in the worker"));
  }
  if (!it->second.mapping) throw ServiceError(ServiceError::Code::Internal, it->second.error);
  const MappedInputRegion& region = *it->second.mapping;
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

void send_hello(int socket, int worker) {
  Message hello;
  hello.type = MessageType::Hello;
  hello.worker = static_cast<std::uint32_t>(worker);
  hello.value = ::getpid();
  send_message(socket, hello);
}

}  // namespace

int run_memory_daemon(const ProcessOptions& options) {
  const int socket = options.socket_fd;
  return guarded(socket, [&] {
    send_hello(socket, 0);
    const ServeConfig config = load_serve_config(options.config_path, options.config_overrides);
    check_served_mechanism(config.mechanism);
    auto backend = exec::make_backend(options.backend);
    const bool on_host = backend->name() == "host";
    if (!on_host) check_mps_daemon(config.mechanism);
    std::vector<ServedModel> served = build_served_models(config);
    // The user's weights, before anything is packed (exec/weights.hpp); the workers bind their
    // models to the regions the packed bytes are copied into, so only this process reads them.
    for (std::size_t i = 0; i < served.size(); ++i)
      if (!config.models[i].weights.empty()) exec::load_weights(*served[i].model, config.models[i].weights);
    std::unique_ptr<exec::ZooModel> training_model;
    if (config.training) {
      training_model = exec::make_model(config.training->model, config.training->seed);
      TrainingJob::check_config(*training_model, *config.training);
      if (!config.training->weights.empty()) exec::load_weights(*training_model, config.training->weights);
    }
    const MechanismTraits& mechanism = traits(config.mechanism);
    const bool per_group = mechanism.ipc_handle_per_group;        // Note [Per-group handles]
    const bool managed = mechanism.allocation == Allocation::Managed;  // Note [Managed memory]
    // The device memory the config needs, checked before any of it is allocated.
    Bytes needed = 0;
    for (const auto& s : served) {
      if (per_group && !on_host) {
        for (const Bytes span : s.layout.layout.group_span) needed += span > 0 ? shared_allocation_bytes(span) : 0;
      } else {
        needed += s.layout.layout.total_bytes;
      }
    }
    // Unified memory: no regions here; each worker makes managed memory for every model, all
    // of which may be on the device at once (with cache: lru, or in the middle of a task).
    // Asking for more than the device has would measure the driver's eviction instead.
    if (managed) needed *= config.workers;
    if (training_model) needed += TrainingJob::state_bytes(*training_model, *config.training);
    const Bytes free = backend->device_free_memory();
    if (needed > free) {
      throw InputError(detail::concat(
          options.config_path, ": ",
          managed ? detail::concat("the models' managed memory (one copy of every model for each of the ",
                                   config.workers, " workers) and the training state need ")
                  : std::string("the models' parameter regions and the training state need "),
          needed, " bytes of device memory, but the device has ", free, " free: serve fewer models",
          managed ? ", use fewer workers" : "", " or train a smaller one"));
    }
    // Shared host memory: every model packed once (Note [Segment order]).
    std::vector<SharedSegment> host_segments;
    const bool pinned = traits(config.mechanism).host_memory == HostMemory::Pinned;
    for (auto& s : served) {
      const auto bytes = static_cast<std::size_t>(s.layout.layout.total_bytes);
      host_segments.push_back(SharedSegment::create("store-" + s.plan.model, bytes));
      exec::ParameterStore::over(bytes_of(host_segments.back(), bytes), pinned).pack(*s.model, s.layout);
    }
    TrainingHeader* header = nullptr;
    if (training_model) {
      host_segments.push_back(SharedSegment::create("training-header", sizeof(TrainingHeader)));
      header = reinterpret_cast<TrainingHeader*>(host_segments.back().data());
    }
    // Device regions: shared segments on the host backend, exportable device memory on cuda.
    std::vector<Bytes> region_bytes;
    for (const auto& s : served) region_bytes.push_back(s.layout.layout.total_bytes);
    if (training_model) region_bytes.push_back(TrainingJob::state_bytes(*training_model, *config.training));
    std::vector<SharedSegment> host_regions;
    std::vector<torch::Tensor> device_regions;
    torch::Tensor training_state;  // the job's two slots (Note [Committed slot])
    // Note [Per-group handles]: per model, its group memory (held here until the end) and the
    // segment its Region message carries (the group segment on host, the handle table on cuda).
    std::vector<std::vector<torch::Tensor>> group_memory(served.size());
    std::vector<SharedSegment> group_segments;
    if (per_group) {
      for (std::size_t r = 0; r < served.size(); ++r) {
        const MemoryLayout& layout = served[r].layout.layout;
        if (on_host) {
          const auto page = static_cast<Bytes>(::sysconf(_SC_PAGESIZE));
          group_segments.push_back(SharedSegment::create(
              "groups-" + served[r].plan.model, static_cast<std::size_t>(group_segment_offsets(layout, page).back())));
          continue;
        }
        SharedSegment table = SharedSegment::create("handles-" + served[r].plan.model,
                                                    layout.group_span.size() * kGroupHandleBytes);
        for (std::size_t g = 0; g < layout.group_span.size(); ++g) {
          if (layout.group_span[g] == 0) continue;  // no parameters: no memory, a zero handle
          group_memory[r].push_back(backend->allocate_shared_device(layout.group_span[g]));
          const std::string handle = backend->export_device(group_memory[r].back());
          PSW_CHECK(handle.size() == kGroupHandleBytes, "a device handle of ", handle.size(), " bytes");
          std::memcpy(table.data() + g * kGroupHandleBytes, handle.data(), handle.size());
        }
        group_segments.push_back(std::move(table));
      }
    }
    for (std::size_t r = 0; r < region_bytes.size(); ++r) {
      const bool is_training = r == served.size();
      // Per-group memory and managed memory replace the models' regions.
      if (!is_training && (per_group || managed)) continue;
      const std::string name = is_training ? "training-state" : "region-" + served[r].plan.model;
      torch::Tensor region;
      if (on_host) {
        host_regions.push_back(SharedSegment::create(name, static_cast<std::size_t>(region_bytes[r])));
        region = bytes_of(host_regions.back(), static_cast<std::size_t>(region_bytes[r]));
      } else {
        region = backend->allocate_shared_device(region_bytes[r]);
        device_regions.push_back(region);
      }
      if (is_training) {
        TrainingJob::initialize(*training_model, *config.training, region, header);
        training_state = region;
      }
    }
    // The daemon keeps the packed copies and the regions, not the served models; the training
    // model stays, for its layout, to write checkpoints (Note [Training checkpoint]): its host
    // copy of the weights is the price.
    served.clear();
    Message message;
    message.type = MessageType::Segments;
    message.value = static_cast<std::int64_t>(host_segments.size());
    std::vector<int> fds;
    for (const auto& s : host_segments) fds.push_back(s.fd());
    send_message(socket, message, fds);
    // The k-th region allocated above is region r's (models without a region of their own
    // are skipped, the training state is last).
    std::size_t allocated = 0;
    for (std::size_t r = 0; r < region_bytes.size(); ++r) {
      Message region;
      region.type = MessageType::Region;
      region.model = r < config.models.size() ? static_cast<std::int32_t>(r) : -1;
      region.value = region_bytes[r];  // the model's packed bytes (the controller's residency)
      const bool is_training = r == config.models.size();
      if (!is_training && per_group) {
        send_message(socket, region, {group_segments[r].fd()});
      } else if (!is_training && managed) {
        send_message(socket, region);  // nothing: each worker makes its own managed memory
      } else if (on_host) {
        send_message(socket, region, {host_regions[allocated++].fd()});
      } else {
        const std::string handle = backend->export_device(device_regions[allocated++]);
        PSW_CHECK(handle.size() == sizeof region.handle, "a device handle of ", handle.size(), " bytes");
        std::memcpy(region.handle, handle.data(), handle.size());
        send_message(socket, region);
      }
    }
    // Hold the memory until the controller says so, or goes away; write checkpoints meanwhile.
    while (true) {
      const std::optional<Message> next = receive_message(socket);
      if (!next || next->type == MessageType::Shutdown) return 0;
      if (next->type != MessageType::Checkpoint) continue;
      Message answer;
      try {
        PSW_CHECK(training_model != nullptr, "a checkpoint asked of a server without a training job");
        const TrainingCheckpoint done = TrainingJob::save_checkpoint(*training_model, *config.training, training_state,
                                                                     *header, next->get_text());
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
      send_message(socket, answer);
    }
  });
}

namespace {

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
  void receive_regions();
  void build_engines();
  void make_training_job();
  void map_io();

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
  void cleanup(Message& reply);
  void after_task(exec::PipelineEngine* task_engine);

  const ProcessOptions& options_;
  const int socket_;
  Message ready_;
  std::vector<UniqueFd> fds_;
  ServeConfig config_;
  std::size_t num_models_ = 0;
  std::size_t num_regions_ = 0;
  std::size_t expected_ = 0;
  std::vector<SharedSegment> segments_;
  std::unique_ptr<exec::Backend> backend_;
  bool on_host_ = false;
  bool per_group_ = false;  // Note [Per-group handles]
  exec::TransferMode mode_ = exec::TransferMode::Pipelined;
  // The device regions (Note [Segment order]). A model under no-ipc-optimization has its
  // group segment (host) or handle table (cuda) instead, and one under unified memory
  // nothing: the worker makes its managed memory in build_engines.
  std::vector<SharedSegment> host_regions_;
  std::vector<torch::Tensor> regions_;
  std::vector<UniqueFd> group_fds_;          // host: the model's group segment
  std::vector<SharedSegment> handle_tables_;  // cuda: the model's group handles
  WorkerControl* control_ = nullptr;
  std::atomic<std::uint64_t>* group_opens_ = nullptr;
  std::vector<ServedModel> served_;
  std::deque<exec::ParameterStore> stores_;
  std::deque<exec::DeviceRegion> device_regions_;
  std::vector<std::unique_ptr<exec::PipelineEngine>> engines_;
  std::vector<torch::Tensor> graph_inputs_;  // per model: the input its graphs were captured for
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
  num_models_ = config_.models.size();
  num_regions_ = num_models_ + (config_.training ? 1 : 0);
  expected_ = num_models_ + (config_.training ? 1 : 0) + 2;
  if (fds_.size() != expected_) {
    throw Error(detail::concat("expected ", expected_, " segments (Note [Segment order]), got ", fds_.size()));
  }
  for (auto& fd : fds_) segments_.push_back(SharedSegment::attach(std::move(fd)));
  backend_ = exec::make_backend(options_.backend);
  ready_.times[1] = monotonic_ns();
  on_host_ = backend_->name() == "host";
  const MechanismTraits& mechanism = traits(config_.mechanism);
  per_group_ = mechanism.ipc_handle_per_group;
  mode_ = transfer_mode_of(config_.mechanism);
  receive_regions();
  const SharedSegment& control_segment = segments_[expected_ - 2];
  PSW_CHECK(control_segment.size() >= sizeof(WorkerControl) * kMaxWorkers, "control segment too small");
  control_ = reinterpret_cast<WorkerControl*>(control_segment.data());
  group_opens_ = &control_[options_.worker_id].group_opens;
  ready_.times[2] = monotonic_ns();
  build_engines();
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

void Worker::receive_regions() {
  regions_.resize(num_regions_);
  group_fds_.resize(num_models_);
  handle_tables_.resize(num_models_);
  for (std::size_t r = 0; r < num_regions_; ++r) {
    std::vector<UniqueFd> region_fds;
    const std::optional<Message> m = receive_message(socket_, &region_fds);
    if (!m || m->type != MessageType::Region) throw Error("expected a device region from the controller");
    const bool is_model = r < num_models_;
    if (is_model && per_group_) {
      PSW_CHECK(region_fds.size() == 1, "a model's group handles without their segment");
      if (on_host_) {
        group_fds_[r] = std::move(region_fds.front());
      } else {
        handle_tables_[r] = SharedSegment::attach(std::move(region_fds.front()));
      }
    } else if (is_model && mode_ == exec::TransferMode::OnDemand) {
      PSW_CHECK(region_fds.empty(), "a device region for a model in managed memory");
    } else if (on_host_) {
      PSW_CHECK(region_fds.size() == 1, "a host region without its segment");
      host_regions_.push_back(SharedSegment::attach(std::move(region_fds.front())));
      regions_[r] = bytes_of(host_regions_.back(), static_cast<std::size_t>(m->value));
    } else {
      regions_[r] = backend_->import_device(std::string(reinterpret_cast<const char*>(m->handle), sizeof m->handle),
                                            m->value);
    }
  }
}

void Worker::build_engines() {
  served_ = build_served_models(config_);
  const bool pinned = mode_ != exec::TransferMode::Pageable;
  if (mode_ == exec::TransferMode::OnDemand) {
    // Note [Managed memory]: this worker's managed copies of the models, checked against the
    // device's free memory now, with the daemon's allocations and the other contexts made.
    Bytes needed = 0;
    for (const auto& s : served_) needed += s.layout.layout.total_bytes;
    const Bytes free = backend_->device_free_memory();
    if (needed > free) {
      throw InputError(detail::concat(options_.config_path, ": worker ", options_.worker_id,
                                      " needs ", needed, " bytes of managed memory for the models (unified memory), "
                                      "but the device has ", free, " free: serve fewer models or use fewer workers"));
    }
  }
  const auto page = static_cast<Bytes>(::sysconf(_SC_PAGESIZE));
  for (std::size_t i = 0; i < num_models_; ++i) {
    auto& s = served_[i];
    const Bytes bytes = s.layout.layout.total_bytes;
    stores_.push_back(exec::ParameterStore::over(backend_->register_host(segments_[i].data(), bytes, pinned), pinned));
    s.model->to(backend_->device());
    if (per_group_) {
      // Note [Per-group handles]: opened on the switch path, counted for the controller.
      exec::GroupOpener open;
      std::atomic<std::uint64_t>* group_opens = group_opens_;
      if (on_host_) {
        const std::vector<Bytes> offsets = group_segment_offsets(s.layout.layout, page);
        const int fd = group_fds_[i].get();
        open = [fd, offsets, group_opens](std::size_t g, Bytes group_bytes) {
          PSW_CHECK(offsets[g] + group_bytes <= offsets[g + 1], "group ", g, " outside its pages");
          torch::Tensor memory = map_group(fd, offsets[g], group_bytes);
          group_opens->fetch_add(1, std::memory_order_relaxed);
          return memory;
        };
      } else {
        const SharedSegment* table = &handle_tables_[i];
        PSW_CHECK(table->size() >= s.layout.layout.group_span.size() * kGroupHandleBytes, "a short handle table");
        open = [backend = backend_.get(), table, group_opens](std::size_t g, Bytes group_bytes) {
          const auto* handle = reinterpret_cast<const char*>(table->data() + g * kGroupHandleBytes);
          torch::Tensor memory = backend->import_device(std::string(handle, kGroupHandleBytes), group_bytes);
          group_opens->fetch_add(1, std::memory_order_relaxed);
          return memory;
        };
      }
      engines_.push_back(
          std::make_unique<exec::PipelineEngine>(*backend_, *s.model, s.plan, stores_.back(), std::move(open)));
    } else {
      if (mode_ == exec::TransferMode::OnDemand) {
        // Note [Managed memory]: filled from the packed host copy, every page on the host.
        regions_[i] = backend_->allocate_managed(stores_.back().bytes());
      }
      device_regions_.push_back(exec::DeviceRegion::over(regions_[i]));
      engines_.push_back(std::make_unique<exec::PipelineEngine>(*backend_, *s.model, s.plan, stores_.back(),
                                                                &device_regions_.back(), mode_));
    }
    // Init part 1: the switch and resident graphs, captured before any request, for the
    // configured batch (other batches run eagerly). Not for per-group memory, whose
    // addresses change with every switch, nor from pageable memory or per-tensor
    // allocations: switches_eagerly_in_server, the definition the simulator's profile entries use.
    if (backend_->supports_graphs() && !switches_eagerly_in_server(config_.mechanism)) {
      const torch::Tensor example = served_example_input(*s.model, config_.models[i], 0).to(backend_->device());
      engines_.back()->capture_graphs(example, /*traced=*/false);
      graph_inputs_.push_back(example);
    } else {
      graph_inputs_.emplace_back();
    }
    // The capture's warm-up ran the model: its pages go back to the host, so the first
    // request switches a cold model as every later one does.
    if (mode_ == exec::TransferMode::OnDemand) engines_.back()->evict_to_host();
  }
}

void Worker::make_training_job() {
  if (!config_.training) return;
  training_model_ = exec::make_model(config_.training->model, 0);
  training_model_->to(backend_->device());
  training_ = std::make_unique<TrainingJob>(*training_model_, *config_.training, regions_[num_models_],
                                            reinterpret_cast<TrainingHeader*>(segments_[num_models_].data()));
  // Note [Bounded lookahead]: a stop takes effect within this many layers of device work.
  const auto lookahead = static_cast<std::size_t>(config_.training->lookahead);
  training_->set_boundary_hook([backend = backend_.get(), lookahead] { backend->throttle(lookahead); });
  training_->set_device_fence([backend = backend_.get()] { backend->synchronize(); });
}

void Worker::map_io() {
  io_ = &segments_[expected_ - 1];
  io_layout_ = IoLayout{config_.max_tensor_bytes};
  PSW_CHECK(static_cast<std::int64_t>(io_->size()) >= io_layout_.total(), "io segment too small");
  own_control_ = &control_[options_.worker_id];
  io_pinned_ = backend_->register_host(io_->data(), static_cast<Bytes>(io_->size()), true);
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
    region_fds.clear();
    if (m.type == MessageType::UnmapInput) {
      unmap_input(m);
      continue;
    }
    // The engine of the inference task this message starts, for what follows its reply.
    exec::PipelineEngine* task_engine = m.type == MessageType::Infer && m.model >= 0 &&
                                                static_cast<std::size_t>(m.model) < num_models_
                                            ? engines_[static_cast<std::size_t>(m.model)].get()
                                            : nullptr;
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
  PSW_CHECK(m.model >= 0 && static_cast<std::size_t>(m.model) < num_models_, "no model ", m.model);
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
  if (in_region && on_host_) {
    // Here the CPU copies, through a mapping of an object the client may shrink at any
    // time (SIGBUS); on cuda the copy engine reads the page-locked pages, which stay.
    input = torch::empty(shape, torch::dtype(torch_type(type)));
    if (!copy_guarded(input.data_ptr(), source, input.nbytes())) {
      throw InputError("the input's shared memory object shrank while the request waited");
    }
  } else {
    input = torch::from_blob(const_cast<std::uint8_t*>(source), shape, torch::dtype(torch_type(type)))
                .to(backend_->device(), /*non_blocking=*/true, /*copy=*/true);
  }
  backend_->mark(kMarkInputOnDevice);
  if ((m.flags & kFlagGenerate) != 0) return generate(m, reply, input);
  exec::PipelineEngine& engine = *engines_[static_cast<std::size_t>(m.model)];
  const torch::Tensor& graph_input = graph_inputs_[static_cast<std::size_t>(m.model)];
  const bool transfer = (m.flags & kFlagTransfer) != 0;
  const bool graph = graph_input.defined() && graph_input.sizes() == input.sizes();
  torch::Tensor output = graph ? (transfer ? engine.switch_in_and_run_graph(input) : engine.run_resident_graph(input))
                               : (transfer ? engine.switch_in_and_run(input) : engine.run_resident(input));
  record_device_times(engine, transfer && !graph, reply);
  output = output.contiguous().to(torch::kCPU);
  backend_->synchronize();
  reply.times[1] = monotonic_ns();
  const auto out_bytes = static_cast<std::int64_t>(output.nbytes());
  if (out_bytes > io_layout_.max_tensor_bytes || output.dim() > static_cast<std::int64_t>(kMaxRank)) {
    throw InputError(detail::concat("the output of ", out_bytes, " bytes exceeds max_tensor_bytes ",
                                    io_layout_.max_tensor_bytes));
  }
  std::memcpy(io_->data() + io_layout_.output_offset(), output.data_ptr(), static_cast<std::size_t>(out_bytes));
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
  const auto index = static_cast<std::size_t>(m.model);
  exec::ZooModel& model = *served_[index].model;
  exec::Decoder* decoder = exec::as_decoder(model);
  if (decoder == nullptr) throw InputError(model.name() + " is not a decoder: it does not generate");
  const std::int64_t length = prompt.size(1);
  const std::int64_t max_tokens = m.value;
  const std::int64_t context = decoder->config().max_positions;
  if (prompt.dim() != 2 || prompt.size(0) != 1 || max_tokens < 1 || length + max_tokens > context) {
    throw InputError(detail::concat("a generate call takes one prompt (1 x L ids) and max_tokens >= 1 with L + "
                                    "max_tokens <= ", context, ", not ", prompt.sizes(), " and ", max_tokens));
  }
  const std::int64_t bucket = prompt_bucket(config_.models[index].prompt_buckets, length);
  // Note [Prompt buckets]: padded to its bucket; the cache holds the bucket's prefill and the
  // tokens to come.
  exec::KvCache cache = decoder->make_cache(1, std::max(bucket, length + max_tokens));
  const exec::PipelineEngine::Forward prefill = [&](const torch::Tensor& tokens, const exec::LayerGate& gate) {
    return decoder->prefill_padded(tokens, cache, gate, length);
  };
  exec::PipelineEngine& engine = *engines_[index];
  const bool transfer = (m.flags & kFlagTransfer) != 0;
  const torch::Tensor padded = exec::pad_prompt(prompt, bucket);
  const torch::Tensor first_logits =
      transfer ? engine.switch_in_and_run(padded, prefill) : engine.run_resident(padded, prefill);
  std::int64_t first_token_ns = 0;
  std::int64_t last_token_ns = 0;
  Message token;
  token.type = MessageType::Token;
  token.worker = static_cast<std::uint32_t>(options_.worker_id);
  token.request = m.request;
  token.model = m.model;
  torch::Tensor ids = exec::greedy_decode(
      *decoder, first_logits, cache, static_cast<int>(max_tokens), [&](int i, const torch::Tensor& next) {
        token.value = next.item<std::int64_t>();  // waits for the device
        token.value2 = i;
        token.times[0] = last_token_ns = monotonic_ns();
        if (i == 0) first_token_ns = last_token_ns;
        send_message(socket_, token);
      });
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
  // A controller that goes away while training must not leave this worker training:
  // between steps, a hang-up (or any message) on the socket stops it.
  auto controller_gone = [socket] {
    pollfd p{socket, POLLIN, 0};
    return ::poll(&p, 1, 0) != 0;
  };
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
