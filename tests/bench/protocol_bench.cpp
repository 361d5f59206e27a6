// The protocol's part of a request whose input travels inside the gRPC message (Note [Protocol
// split] in psw/runtime/client/serving_benchmark.hpp), against the floor of moving the same bytes
// on the same host: one ModelInfer of the fake service's "double" model (its output as large as its
// input) through psw's gRPC front end and client on a Unix socket, beside the same bytes there and
// back through a plain Unix socket pair and a memcpy. The sizes are ResNet-152's and Inception-v3's
// inputs at batch 8 (4.8 and 8.6 MB) and a small one. Beside psw's client (its raw input sent in
// place, Note [Raw inputs sent in place] in client.cpp), the same call as the generated stub makes
// it, the input copied into the message: what the client did before, and what a C++ client written
// from the protocol does. The psw call and the memcpy are measured again with 150 ms idle before
// each, as cold requests come: what a gap costs; and again with the host's CPU wake-up latency held
// at 0 as psw serve can hold it (Note [CPU wake-up latency]). Each psw call's split is counted:
// to_server (message built to the handler holding it: serialisation, the socket), front_end (the
// handler: the message split and the input copied once into the front end's staging as psw serve's
// does, Note [Raw inputs received in place] in grpc_server.cpp, then the fake service copies the
// input into its output) and to_client (the response back), medians in ms. The same call is made
// over the REST front end too (the binary tensor extension on loopback TCP), back to back and
// spaced, timed whole. The process keeps its
// message memory as psw's serving commands do (Note [Message memory]). scripts/bench-protocol.sh
// (scripts/gpu-protocol.sh on a GPU host) writes its report through scripts/protocol_report.sh.
#include <benchmark/benchmark.h>
#include <grpcpp/grpcpp.h>
#include <httplib.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <system_error>
#include <thread>
#include <vector>

#include "../runtime/fake_inference_service.hpp"
#include "grpc_service.grpc.pb.h"
#include "psw/common/error.hpp"
#include "psw/common/output.hpp"
#include "psw/runtime/client/client.hpp"
#include "psw/runtime/ipc/cpu_latency.hpp"
#include "psw/runtime/ipc/message_memory.hpp"
#include "psw/runtime/server/grpc_server.hpp"
#include "psw/runtime/server/http_server.hpp"

namespace {

using psw::runtime::Client;
using psw::runtime::InferRequest;
using psw::runtime::InferResponse;
using psw::runtime::TensorData;

constexpr std::int64_t kMaxMessageBytes = std::int64_t{64} << 20;

// One front end for the whole run, over the fake service, on a socket in a fresh folder.
class Server {
 public:
  Server() {
    std::string pattern = (std::filesystem::temp_directory_path() / "psw-protocol-bench-XXXXXX").string();
    if (mkdtemp(pattern.data()) == nullptr) throw std::system_error(errno, std::generic_category(), "mkdtemp");
    folder_ = pattern;
    psw::runtime::Endpoint endpoint;
    endpoint.unix_path = (folder_ / "psw.sock").string();
    front_end_ = std::make_unique<psw::runtime::GrpcFrontEnd>(service_, endpoint, kMaxMessageBytes, 0, &staging_);
    http_ = std::make_unique<psw::runtime::HttpFrontEnd>(service_, "127.0.0.1:0", kMaxMessageBytes, nullptr, &staging_);
  }
  ~Server() {
    http_->shutdown();
    http_.reset();
    front_end_->shutdown();
    front_end_.reset();
    std::error_code ignored;
    psw::remove_tree(folder_, ignored);
  }
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;

  std::string target() const { return front_end_->target(); }
  std::string url() const { return http_->url(); }

 private:
  psw::runtime::testing::FakeInferenceService service_;
  std::filesystem::path folder_;
  // Staging as psw serve's (four slots), each slot as large as the largest input here.
  psw::runtime::InputStaging staging_{4, 16 << 20};
  std::unique_ptr<psw::runtime::GrpcFrontEnd> front_end_;
  std::unique_ptr<psw::runtime::HttpFrontEnd> http_;
};

Server& server() {
  static Server instance;
  return instance;
}

double median_ms(std::vector<double> ns) {
  if (ns.empty()) return 0;
  std::nth_element(ns.begin(), ns.begin() + static_cast<std::ptrdiff_t>(ns.size() / 2), ns.end());
  return ns[ns.size() / 2] / 1e6;
}

// A raw FP32 input of `bytes` (a multiple of 16: "double" takes [batch, 4]).
InferRequest double_request(std::int64_t bytes) {
  InferRequest request;
  request.model = "double";
  request.inputs.push_back(TensorData{"x", "FP32", {bytes / 16, 4}, std::string(static_cast<std::size_t>(bytes), '\x3f')});
  return request;
}

// Calls that come `gap` apart (0: back to back), the client and the server idle in between, as
// the serve benchmark's cold requests come (--gap-ms 150). The gap is left out of the timing.
constexpr std::chrono::milliseconds kColdGap{150};

void idle_before(benchmark::State& state, std::chrono::milliseconds gap) {
  if (gap.count() == 0) return;
  state.PauseTiming();
  std::this_thread::sleep_for(gap);
  state.ResumeTiming();
}

// One psw call per iteration, split as Note [Protocol split] says.
void grpc_raw_infer(benchmark::State& state, std::chrono::milliseconds gap) {
  const std::int64_t bytes = state.range(0);
  Client client(server().target(), kMaxMessageBytes);
  const InferRequest request = double_request(bytes);
  (void)client.infer(request);  // the connection and the server's threads up first
  std::vector<double> to_server, front_end, to_client;
  for (auto _ : state) {
    idle_before(state, gap);
    const InferResponse response = client.infer(request);
    const std::int64_t returned_ns = psw::runtime::steady_now_ns();
    if (response.outputs.empty() || static_cast<std::int64_t>(response.outputs[0].contents().size()) != bytes) {
      state.SkipWithError("the fake service's output is not the input's size");
      break;
    }
    to_server.push_back(static_cast<double>(response.front_end_received_ns - response.client_sent_ns));
    front_end.push_back(static_cast<double>(response.front_end_replied_ns - response.front_end_received_ns));
    to_client.push_back(static_cast<double>(returned_ns - response.front_end_replied_ns));
  }
  state.counters["to_server_ms"] = median_ms(to_server);
  state.counters["front_end_ms"] = median_ms(front_end);
  state.counters["to_client_ms"] = median_ms(to_client);
  state.SetBytesProcessed(state.iterations() * bytes * 2);
}

void BM_GrpcRawInfer(benchmark::State& state) { grpc_raw_infer(state, std::chrono::milliseconds{0}); }
void BM_GrpcRawInferSpaced(benchmark::State& state) { grpc_raw_infer(state, kColdGap); }

// The spaced calls again with the host's CPU wake-up latency held at 0 (Note [CPU wake-up
// latency]: idle CPUs poll instead of halting), as psw serve holds it with cpu_wakeup_latency_us;
// where this process may not open the kernel's file, the run says so in place of a time.
template <void (*Measure)(benchmark::State&, std::chrono::milliseconds)>
void held(benchmark::State& state) {
  std::optional<psw::runtime::CpuWakeupLatency> hold;
  try {
    hold.emplace(0);
  } catch (const psw::Error& e) {
    state.SkipWithError(e.what());
    for (auto _ : state) {
    }
    return;
  }
  Measure(state, kColdGap);
}

// The same call through the generated stub: the input copied into the message, which gRPC then
// serialises (psw's client before Note [Raw inputs sent in place]). Timed whole, as above.
void BM_GrpcRawInferStubCopied(benchmark::State& state) {
  const std::int64_t bytes = state.range(0);
  grpc::ChannelArguments arguments;
  arguments.SetMaxReceiveMessageSize(static_cast<int>(kMaxMessageBytes));
  arguments.SetMaxSendMessageSize(static_cast<int>(kMaxMessageBytes));
  arguments.SetInt(GRPC_ARG_HTTP2_MAX_FRAME_SIZE, 4 << 20);  // as psw's client
  arguments.SetInt(GRPC_ARG_HTTP2_STREAM_LOOKAHEAD_BYTES, 64 << 20);
  const auto stub = inference::GRPCInferenceService::NewStub(
      grpc::CreateCustomChannel(server().target(), grpc::InsecureChannelCredentials(), arguments));
  const InferRequest request = double_request(bytes);
  const auto call = [&] {
    inference::ModelInferRequest message;
    message.set_model_name(request.model);
    auto* tensor = message.add_inputs();
    tensor->set_name(request.inputs[0].name);
    tensor->set_datatype(request.inputs[0].datatype);
    for (const std::int64_t dim : request.inputs[0].shape) tensor->add_shape(dim);
    const std::string_view input = request.inputs[0].contents();
    message.add_raw_input_contents(input.data(), input.size());
    inference::ModelInferResponse response;
    grpc::ClientContext context;
    const grpc::Status status = stub->ModelInfer(&context, message, &response);
    return status.ok() && response.raw_output_contents_size() == 1 &&
           static_cast<std::int64_t>(response.raw_output_contents(0).size()) == bytes;
  };
  (void)call();  // the connection and the server's threads up first
  for (auto _ : state) {
    if (!call()) {
      state.SkipWithError("the generated stub's call failed or its output is not the input's size");
      break;
    }
  }
  state.SetBytesProcessed(state.iterations() * bytes * 2);
}

// The same call over the REST front end on loopback TCP, with the binary tensor extension (the
// input's bytes after the JSON header, the output's after the response's), through cpp-httplib's
// client on one kept-alive connection. Timed whole.
void rest_binary_infer(benchmark::State& state, std::chrono::milliseconds gap) {
  const std::int64_t bytes = state.range(0);
  const std::string header = std::string(R"({"inputs":[{"name":"x","datatype":"FP32","shape":[)") +
                             std::to_string(bytes / 16) + R"(,4],"parameters":{"binary_data_size":)" +
                             std::to_string(bytes) + R"(}}],"outputs":[{"name":"y","parameters":{"binary_data":true}}]})";
  std::string body = header + std::string(static_cast<std::size_t>(bytes), '\x3f');
  const std::string url = server().url();
  httplib::Client client(url);
  client.set_keep_alive(true);
  client.set_tcp_nodelay(true);
  const httplib::Headers headers{{"Inference-Header-Content-Length", std::to_string(header.size())}};
  const auto call = [&] {
    const httplib::Result r = client.Post("/v2/models/double/infer", headers, body, "application/octet-stream");
    return r && r->status == 200 && static_cast<std::int64_t>(r->body.size()) > bytes;
  };
  (void)call();  // the connection and the server's threads up first
  for (auto _ : state) {
    idle_before(state, gap);
    if (!call()) {
      state.SkipWithError("the REST call failed or its output is not the input's size");
      break;
    }
  }
  state.SetBytesProcessed(state.iterations() * bytes * 2);
}

void BM_RestBinaryInfer(benchmark::State& state) { rest_binary_infer(state, std::chrono::milliseconds{0}); }
void BM_RestBinaryInferSpaced(benchmark::State& state) { rest_binary_infer(state, kColdGap); }

void write_all(int fd, const char* data, std::int64_t bytes) {
  while (bytes > 0) {
    const ssize_t n = ::write(fd, data, static_cast<std::size_t>(bytes));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) throw std::system_error(errno, std::generic_category(), "write");
    data += n;
    bytes -= n;
  }
}

void read_all(int fd, char* data, std::int64_t bytes) {
  while (bytes > 0) {
    const ssize_t n = ::read(fd, data, static_cast<std::size_t>(bytes));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) throw std::system_error(errno, std::generic_category(), "read");
    data += n;
    bytes -= n;
  }
}

// The same bytes there and back through a Unix stream socket pair with the system's default
// buffers, an echo thread on the other end (reads them all, writes them back): what moving a
// request's input and a response of its size costs on this host without a protocol.
void BM_UnixSocketRoundTrip(benchmark::State& state) {
  const std::int64_t bytes = state.range(0);
  int fds[2];
  if (::socketpair(AF_UNIX, SOCK_STREAM, 0, fds) != 0) {
    state.SkipWithError("socketpair failed");
    return;
  }
  std::thread echo([&, fd = fds[1]] {
    std::string buffer(static_cast<std::size_t>(bytes), '\0');
    try {
      for (;;) {
        read_all(fd, buffer.data(), bytes);
        write_all(fd, buffer.data(), bytes);
      }
    } catch (const std::system_error&) {
      // The other end closed: the benchmark is over.
    }
  });
  const std::string out(static_cast<std::size_t>(bytes), '\x3f');
  std::string in(static_cast<std::size_t>(bytes), '\0');
  for (auto _ : state) {
    write_all(fds[0], out.data(), bytes);
    read_all(fds[0], in.data(), bytes);
  }
  ::close(fds[0]);
  echo.join();
  ::close(fds[1]);
  state.SetBytesProcessed(state.iterations() * bytes * 2);
}

// The same bytes copied once in memory, there and back: back to back, the buffers stay in the
// processor's caches; 150 ms apart, what is left of them there after an idle gap.
void memcpy_round_trip(benchmark::State& state, std::chrono::milliseconds gap) {
  const std::int64_t bytes = state.range(0);
  std::string a(static_cast<std::size_t>(bytes), '\x3f');
  std::string b(static_cast<std::size_t>(bytes), '\0');
  for (auto _ : state) {
    idle_before(state, gap);
    std::memcpy(b.data(), a.data(), a.size());
    benchmark::ClobberMemory();
    std::memcpy(a.data(), b.data(), b.size());
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(state.iterations() * bytes * 2);
}

void BM_MemcpyRoundTrip(benchmark::State& state) { memcpy_round_trip(state, std::chrono::milliseconds{0}); }
void BM_MemcpyRoundTripSpaced(benchmark::State& state) { memcpy_round_trip(state, kColdGap); }
void BM_GrpcRawInferSpacedHeld(benchmark::State& state) { held<grpc_raw_infer>(state); }
void BM_MemcpyRoundTripSpacedHeld(benchmark::State& state) { held<memcpy_round_trip>(state); }

// 8 KB (BERT-base's tokens), ResNet-152's 8 x 3 x 224 x 224 and Inception-v3's 8 x 3 x 299 x 299
// FP32 inputs.
void sizes(benchmark::internal::Benchmark* b) { b->Arg(8192)->Arg(4816896)->Arg(8582496); }

BENCHMARK(BM_GrpcRawInfer)->Apply(sizes)->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK(BM_GrpcRawInferStubCopied)->Apply(sizes)->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK(BM_RestBinaryInfer)->Apply(sizes)->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK(BM_UnixSocketRoundTrip)->Apply(sizes)->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK(BM_MemcpyRoundTrip)->Apply(sizes)->UseRealTime()->Unit(benchmark::kMillisecond);
// 20 calls 150 ms apart: 3 s a size, whatever --benchmark_min_time says.
BENCHMARK(BM_GrpcRawInferSpaced)->Apply(sizes)->Iterations(20)->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK(BM_RestBinaryInferSpaced)->Apply(sizes)->Iterations(20)->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK(BM_MemcpyRoundTripSpaced)->Apply(sizes)->Iterations(20)->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK(BM_GrpcRawInferSpacedHeld)->Apply(sizes)->Iterations(20)->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK(BM_MemcpyRoundTripSpacedHeld)->Apply(sizes)->Iterations(20)->UseRealTime()->Unit(benchmark::kMillisecond);

}  // namespace

int main(int argc, char** argv) {
  // As psw's commands that serve or send requests, before any thread starts (Note [Message
  // memory]): without it every request faults its megabytes in again, which on this project's
  // virtual machines costs more than the protocol itself.
  psw::runtime::keep_message_memory();
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
