#include "psw/runtime/processes.hpp"

#include <poll.h>
#include <unistd.h>

#include <cstring>
#include <deque>
#include <iostream>
#include <memory>
#include <optional>

#include "psw/common/error.hpp"
#include "psw/exec/backend.hpp"
#include "psw/runtime/ipc.hpp"
#include "psw/runtime/service.hpp"
#include "psw/runtime/training.hpp"
#include "served_models.hpp"

namespace psw::runtime {

namespace {

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
    const ServeConfig config = load_serve_config(options.config_path);
    check_served_mechanism(config.mechanism);
    if (options.backend != "host") {
      throw InputError("the memory daemon shares device memory through CUDA IPC, which is not built yet: "
                       "serve with --backend host");
    }
    std::vector<ServedModel> served = build_served_models(config);
    std::vector<SharedSegment> segments;
    const bool pinned = traits(config.mechanism).host_memory == HostMemory::Pinned;
    for (auto& s : served) {
      const auto bytes = static_cast<std::size_t>(s.layout.layout.total_bytes);
      segments.push_back(SharedSegment::create("store-" + s.plan.model, bytes));
      exec::ParameterStore::over(bytes_of(segments.back(), bytes), pinned).pack(*s.model, s.layout);
    }
    for (auto& s : served) {
      segments.push_back(SharedSegment::create("region-" + s.plan.model, static_cast<std::size_t>(s.layout.layout.total_bytes)));
    }
    if (config.training) {
      auto model = exec::make_model(config.training->model, config.training->seed);
      const auto bytes = static_cast<std::size_t>(TrainingJob::segment_bytes(*model));
      segments.push_back(SharedSegment::create("training-" + config.training->model, bytes));
      TrainingJob::initialize(*model, bytes_of(segments.back(), bytes));
    }
    served.clear();  // the daemon keeps the packed copies, not the models
    Message message;
    message.type = MessageType::Segments;
    message.value = static_cast<std::int64_t>(segments.size());
    std::vector<int> fds;
    for (const auto& s : segments) fds.push_back(s.fd());
    send_message(socket, message, fds);
    // Hold the memory until the controller says so, or goes away.
    while (true) {
      const std::optional<Message> next = receive_message(socket);
      if (!next || next->type == MessageType::Shutdown) return 0;
    }
  });
}

int run_worker(const ProcessOptions& options) {
  const int socket = options.socket_fd;
  return guarded(socket, [&]() -> int {
    send_hello(socket, options.worker_id);
    std::vector<UniqueFd> fds;
    const std::optional<Message> segments_message = receive_message(socket, &fds);
    if (!segments_message) return 0;
    if (segments_message->type != MessageType::Segments) {
      throw Error(std::string("expected the segments, got a ") + to_string(segments_message->type) + " message");
    }
    const ServeConfig config = load_serve_config(options.config_path);
    const std::size_t num_models = config.models.size();
    const std::size_t expected = 2 * num_models + (config.training ? 1 : 0) + 2;
    if (fds.size() != expected) {
      throw Error(detail::concat("expected ", expected, " segments (Note [Segment order]), got ", fds.size()));
    }
    std::vector<SharedSegment> segments;
    for (auto& fd : fds) segments.push_back(SharedSegment::attach(std::move(fd)));
    auto backend = exec::make_backend(options.backend);
    std::vector<ServedModel> served = build_served_models(config);
    const exec::TransferMode mode = transfer_mode_of(config.mechanism);
    std::deque<exec::ParameterStore> stores;
    std::deque<exec::DeviceRegion> regions;
    std::vector<std::unique_ptr<exec::PipelineEngine>> engines;
    for (std::size_t i = 0; i < num_models; ++i) {
      auto& s = served[i];
      const auto bytes = static_cast<std::size_t>(s.layout.layout.total_bytes);
      stores.push_back(exec::ParameterStore::over(bytes_of(segments[i], bytes), mode != exec::TransferMode::Pageable));
      regions.push_back(exec::DeviceRegion::over(bytes_of(segments[num_models + i], bytes)));
      s.model->to(backend->device());
      engines.push_back(std::make_unique<exec::PipelineEngine>(*backend, *s.model, s.plan, stores.back(),
                                                               &regions.back(), mode));
    }
    std::unique_ptr<exec::ZooModel> training_model;
    std::unique_ptr<TrainingJob> training;
    if (config.training) {
      const SharedSegment& segment = segments[2 * num_models];
      training_model = exec::make_model(config.training->model, 0);
      training = std::make_unique<TrainingJob>(*training_model, *config.training, bytes_of(segment, segment.size()),
                                               reinterpret_cast<TrainingHeader*>(segment.data()));
    }
    const SharedSegment& control_segment = segments[expected - 2];
    const SharedSegment& io = segments[expected - 1];
    PSW_CHECK(control_segment.size() >= sizeof(WorkerControl) * kMaxWorkers, "control segment too small");
    auto* control = reinterpret_cast<WorkerControl*>(control_segment.data());
    const IoLayout io_layout{config.max_tensor_bytes};
    PSW_CHECK(static_cast<std::int64_t>(io.size()) >= io_layout.total(), "io segment too small");
    const std::atomic<std::uint32_t>& stop = control[options.worker_id].stop;

    Message ready;
    ready.type = MessageType::Ready;
    ready.worker = static_cast<std::uint32_t>(options.worker_id);
    send_message(socket, ready);

    while (true) {
      const std::optional<Message> next = receive_message(socket);
      if (!next || next->type == MessageType::Shutdown) return 0;
      const Message& m = *next;
      Message reply;
      reply.worker = static_cast<std::uint32_t>(options.worker_id);
      reply.request = m.request;
      reply.model = m.model;
      try {
        switch (m.type) {
          case MessageType::Infer: {
            PSW_CHECK(m.model >= 0 && static_cast<std::size_t>(m.model) < num_models, "no model ", m.model);
            reply.times[0] = monotonic_ns();
            std::vector<std::int64_t> shape(m.shape, m.shape + m.rank);
            const auto type = static_cast<ElementType>(m.dtype);
            torch::Tensor input = torch::from_blob(io.data() + io_layout.input_offset(), shape,
                                                   torch::dtype(torch_type(type)))
                                      .to(backend->device(), /*non_blocking=*/false, /*copy=*/true);
            exec::PipelineEngine& engine = *engines[static_cast<std::size_t>(m.model)];
            torch::Tensor output = (m.flags & kFlagTransfer) != 0 ? engine.switch_in_and_run(input)
                                                                  : engine.run_resident(input);
            output = output.contiguous().to(torch::kCPU);
            backend->synchronize();
            reply.times[1] = monotonic_ns();
            const auto out_bytes = static_cast<std::int64_t>(output.nbytes());
            if (out_bytes > io_layout.max_tensor_bytes || output.dim() > static_cast<std::int64_t>(kMaxRank)) {
              throw InputError(detail::concat("the output of ", out_bytes, " bytes exceeds max_tensor_bytes ",
                                              io_layout.max_tensor_bytes));
            }
            std::memcpy(io.data() + io_layout.output_offset(), output.data_ptr(), static_cast<std::size_t>(out_bytes));
            reply.type = MessageType::InferDone;
            reply.dtype = static_cast<std::int32_t>(element_type(output.scalar_type()));
            reply.rank = static_cast<std::uint32_t>(output.dim());
            for (std::int64_t d = 0; d < output.dim(); ++d) reply.shape[d] = output.size(d);
            reply.bytes = out_bytes;
            break;
          }
          case MessageType::Train: {
            PSW_CHECK(training != nullptr, "no training job configured");
            reply.times[0] = monotonic_ns();
            // A controller that goes away while training must not leave this worker training:
            // between steps, a hang-up (or any message) on the socket stops it.
            const TrainingJob::Result result = training->run(m.value, stop, [socket](std::int64_t, double) {
              pollfd p{socket, POLLIN, 0};
              return ::poll(&p, 1, 0) == 0;
            });
            reply.type = MessageType::TrainStopped;
            reply.times[1] = monotonic_ns();
            reply.value = result.completed_steps;
            reply.value2 = result.outcome == TrainingJob::Outcome::Preempted ? 1 : 0;
            break;
          }
          case MessageType::Cleanup:
            // The task's state is the daemon's; what a worker keeps between tasks is LibTorch's
            // own caches, which stay warm for the next activation.
            reply.type = MessageType::CleanupDone;
            break;
          default:
            throw Error(std::string("unexpected ") + to_string(m.type) + " message");
        }
      } catch (const InputError& e) {
        reply.type = MessageType::Failed;
        reply.value = static_cast<std::int64_t>(ServiceError::Code::InvalidArgument);
        reply.set_text(e.what());
      } catch (const c10::Error& e) {
        // LibTorch refusing an input (a wrong shape reaching a kernel) is the client's error.
        reply.type = MessageType::Failed;
        reply.value = static_cast<std::int64_t>(ServiceError::Code::InvalidArgument);
        reply.set_text(e.what_without_backtrace());
      }
      send_message(socket, reply);
    }
  });
}

}  // namespace psw::runtime
