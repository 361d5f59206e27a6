#include "psw/runtime/server/http_server.hpp"

#include <httplib.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <optional>
#include <thread>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "psw/common/error.hpp"
#include "model_lookup.hpp"
#include "tcp_address.hpp"

namespace psw::runtime {

// Named, not anonymous: the unity build compiles this file with the gRPC front end, whose
// helpers would meet these.
namespace rest {

struct HttpAnswer {
  int status = 200;
  std::string body;
  std::string content_type = "application/json";
  std::optional<std::size_t> header_length;  // Inference-Header-Content-Length
};

HttpAnswer error_answer(int status, const std::string& message) {
  return {status, nlohmann::json{{"error", message}}.dump(), "application/json", std::nullopt};
}

// The inference call: the request parsed, to the service, the answer back in the protocol's form.
HttpAnswer infer(InferenceService& service, InputStaging* staging, const std::string& model,
                 const std::string& version, const httplib::Request& http) {
  std::optional<std::string> header_length;
  if (http.has_header("Inference-Header-Content-Length")) {
    header_length = http.get_header_value("Inference-Header-Content-Length");
  }
  const RestInferRequest parsed = parse_rest_infer(http.body, header_length, model, version, staging);
  RestInferAnswer answer = encode_rest_infer(parsed, service.infer(parsed.request));
  HttpAnswer out;
  out.body = std::move(answer.body);
  out.header_length = answer.header_length;
  if (out.header_length) out.content_type = "application/octet-stream";
  return out;
}

std::string server_sent_event(const char* event, const nlohmann::json& data) {
  return (event != nullptr ? std::string("event: ") + event + "\n" : std::string()) + "data: " + data.dump() + "\n\n";
}

// Note [REST front end]: a streaming generate call runs on a thread of its own, so that an
// error before the first token is still an HTTP status; the handler waits for the first event,
// then the response streams the rest from here. The client closing the stream cancels the call.
class GenerationRelay {
 public:
  GenerationRelay(InferenceService& service, GenerateRequest request) {
    request.cancelled = [this] { return closed_.load(); };
    thread_ = std::thread([this, &service, request = std::move(request)] {
      try {
        const GenerateResponse r = service.generate(request, [this](const GeneratedToken& t) {
          push(server_sent_event(nullptr, {{"index", t.index}, {"output_id", t.id}}), false);
        });
        push(server_sent_event("end", rest_generate_answer(r)), true);
      } catch (const ServiceError& e) {
        fail(http_status_of(e.code()), e.what());
      } catch (const std::exception& e) {
        fail(500, e.what());
      }
    });
  }
  ~GenerationRelay() {
    closed_ = true;
    thread_.join();
  }
  GenerationRelay(const GenerationRelay&) = delete;
  GenerationRelay& operator=(const GenerationRelay&) = delete;

  // Waits for the first event: nullopt once there is one to stream, else the error's answer.
  std::optional<HttpAnswer> first() {
    std::unique_lock<std::mutex> lock(mutex_);
    changed_.wait(lock, [this] { return !events_.empty() || finished_; });
    if (events_.empty() && error_status_ != 0) return error_answer(error_status_, error_);
    return std::nullopt;
  }
  // The next events (blocking until there are some); empty once the stream has ended.
  std::string next() {
    std::unique_lock<std::mutex> lock(mutex_);
    changed_.wait(lock, [this] { return !events_.empty() || finished_; });
    std::string out;
    for (const std::string& e : events_) out += e;
    events_.clear();
    if (out.empty() && error_status_ != 0 && !error_told_) {
      error_told_ = true;
      return server_sent_event("error", {{"error", error_}, {"status", error_status_}});
    }
    return out;
  }
  void close() { closed_ = true; }

 private:
  void push(std::string event, bool last) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      events_.push_back(std::move(event));
      finished_ = finished_ || last;
    }
    changed_.notify_all();
  }
  void fail(int status, const std::string& message) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      error_status_ = status;
      error_ = message;
      finished_ = true;
    }
    changed_.notify_all();
  }

  std::mutex mutex_;
  std::condition_variable changed_;
  std::deque<std::string> events_;
  bool finished_ = false;
  int error_status_ = 0;
  std::string error_;
  bool error_told_ = false;
  std::atomic<bool> closed_{false};
  std::thread thread_;
};

}  // namespace rest

struct HttpFrontEnd::Impl {
  InferenceService& service;
  InputStaging* staging = nullptr;  // Note [Raw inputs received in place]; null: none
  httplib::Server server;
  std::thread thread;
  std::string url;

  explicit Impl(InferenceService& s) : service(s) {}

  // Runs a handler; every failure becomes the protocol's error body with its status.
  template <typename Body>
  void answer(httplib::Response& response, Body&& body) {
    send(response, guarded(body));
  }
  template <typename Body>
  static rest::HttpAnswer guarded(Body&& body) {
    try {
      return body();
    } catch (const ServiceError& e) {
      return rest::error_answer(http_status_of(e.code()), e.what());
    } catch (const std::exception& e) {
      return rest::error_answer(500, e.what());
    }
  }
  static void send(httplib::Response& response, rest::HttpAnswer out) {
    response.status = out.status;
    if (out.header_length) response.set_header("Inference-Header-Content-Length", std::to_string(*out.header_length));
    response.set_content(std::move(out.body), out.content_type.c_str());
  }

  static rest::HttpAnswer ok(const nlohmann::json& body) { return {200, body.dump(), "application/json", std::nullopt}; }
  // Health and readiness: 200 when true, 400 when not (the protocol's HTTP binding).
  static rest::HttpAnswer truth(bool value) { return {value ? 200 : 400, "", "application/json", std::nullopt}; }

  void routes() {
    server.Get("/v2/health/live", [this](const httplib::Request&, httplib::Response& r) {
      answer(r, [&] { return truth(service.live()); });
    });
    server.Get("/v2/health/ready", [this](const httplib::Request&, httplib::Response& r) {
      answer(r, [&] { return truth(service.ready()); });
    });
    server.Get("/v2", [this](const httplib::Request&, httplib::Response& r) {
      answer(r, [&] { return ok({{"name", "psw"}, {"version", "0.1"}, {"extensions", nlohmann::json::array({"binary_tensor_data"})}}); });
    });
    // Note [Repository index] (model_lookup.hpp): the body, optional, is {"ready": true|false}.
    server.Post("/v2/repository/index", [this](const httplib::Request& q, httplib::Response& r) {
      answer(r, [&] {
        bool ready_only = false;
        if (!q.body.empty()) {
          const nlohmann::json body = nlohmann::json::parse(q.body, nullptr, /*allow_exceptions=*/false);
          if (!body.is_object() || (body.contains("ready") && !body["ready"].is_boolean())) {
            throw ServiceError(ServiceError::Code::InvalidArgument,
                               "the repository index takes no body, or a JSON object {\"ready\": true|false}");
          }
          ready_only = body.value("ready", false);
        }
        nlohmann::json index = nlohmann::json::array();
        for (const ModelIndexEntry& e : repository_index(service, "", ready_only)) {
          nlohmann::json entry = {{"name", e.name}, {"version", e.version}, {"state", e.state}};
          if (!e.reason.empty()) entry["reason"] = e.reason;
          index.push_back(std::move(entry));
        }
        return ok(index);
      });
    });
    // Note [Repository load] (controller.hpp): parse_rest_repository_body.
    server.Post(R"(/v2/repository/models/([^/]+)/(load|unload))", [this](const httplib::Request& q, httplib::Response& r) {
      answer(r, [&] {
        const bool load = q.matches[2] == "load";
        const std::string config = parse_rest_repository_body(q.body, load);
        if (load) {
          service.load_model(q.matches[1], config);
        } else {
          service.unload_model(q.matches[1]);
        }
        return ok(nlohmann::json::object());
      });
    });
    // NAME, then optionally /versions/V.
    const std::string model = R"(/v2/models/([^/]+)(?:/versions/([^/]+))?)";
    server.Get(model, [this](const httplib::Request& q, httplib::Response& r) {
      answer(r, [&] {
        const ModelInfo m = find_served_model(service, q.matches[1], q.matches[2]);
        return ok({{"name", m.name},
                   {"versions", m.versions},
                   {"platform", m.platform},
                   {"inputs", rest_tensor_metadata(m.inputs)},
                   {"outputs", rest_tensor_metadata(m.outputs)}});
      });
    });
    server.Get(model + "/ready", [this](const httplib::Request& q, httplib::Response& r) {
      answer(r, [&] { return truth(find_served_model(service, q.matches[1], q.matches[2]).ready); });
    });
    server.Post(model + "/infer", [this](const httplib::Request& q, httplib::Response& r) {
      answer(r, [&] { return rest::infer(service, staging, q.matches[1], q.matches[2], q); });
    });
    // Note [Generate call]: the model's version is checked as infer's is.
    server.Post(model + "/generate", [this](const httplib::Request& q, httplib::Response& r) {
      answer(r, [&] {
        find_served_model(service, q.matches[1], q.matches[2]);
        const GenerateRequest request = parse_rest_generate(q.body, q.matches[1]);
        return ok(rest_generate_answer(service.generate(request, nullptr)));
      });
    });
    server.Post(model + "/generate_stream", [this](const httplib::Request& q, httplib::Response& r) {
      std::shared_ptr<rest::GenerationRelay> relay;
      const rest::HttpAnswer refused = guarded([&]() -> rest::HttpAnswer {
        find_served_model(service, q.matches[1], q.matches[2]);
        relay = std::make_shared<rest::GenerationRelay>(service, parse_rest_generate(q.body, q.matches[1]));
        if (std::optional<rest::HttpAnswer> error = relay->first()) return *error;
        return {0, "", "", std::nullopt};  // streaming
      });
      if (refused.status != 0) {
        relay.reset();
        send(r, refused);
        return;
      }
      r.set_chunked_content_provider(
          "text/event-stream",
          [relay](std::size_t, httplib::DataSink& sink) {
            const std::string events = relay->next();
            if (events.empty()) {
              sink.done();
              return true;
            }
            if (!sink.write(events.data(), events.size())) {
              relay->close();  // the client went away: the call is cancelled
              return false;
            }
            return true;
          },
          [relay](bool) { relay->close(); });
    });
    // Anything else: the protocol's error body, not the library's empty 404.
    server.set_error_handler([](const httplib::Request& q, httplib::Response& r) {
      if (!r.body.empty()) return;
      const std::string what = r.status == 404   ? "no such endpoint: " + q.method + " " + q.path
                               : r.status == 413 ? "the request is larger than the server takes"
                                                 : "the request failed with HTTP status " + std::to_string(r.status);
      r.set_content(nlohmann::json{{"error", what}}.dump(), "application/json");
    });
  }
};

HttpFrontEnd::HttpFrontEnd(InferenceService& service, const std::string& address, std::int64_t max_body_bytes,
                           const AccessToken* token, InputStaging* staging)
    : impl_(std::make_unique<Impl>(service)) {
  impl_->staging = staging;
  const HostPort where = parse_tcp_address(address);
  check_tcp_host(address, where);
  impl_->routes();
  if (token != nullptr) {
    // Note [Remote access]: before any route, and before the body is looked at.
    impl_->server.set_pre_routing_handler([token](const httplib::Request& q, httplib::Response& r) {
      if (token->admits(q.get_header_value("Authorization"))) return httplib::Server::HandlerResponse::Unhandled;
      r.status = 401;
      r.set_header("WWW-Authenticate", "Bearer");
      r.set_content(nlohmann::json{{"error", q.has_header("Authorization")
                                                 ? "the request's bearer token is not this server's"
                                                 : "this server takes requests with a bearer token only "
                                                   "(Authorization: Bearer TOKEN)"}}
                        .dump(),
                    "application/json");
      return httplib::Server::HandlerResponse::Handled;
    });
  }
  impl_->server.set_payload_max_length(static_cast<std::size_t>(max_body_bytes));
  // Note [REST without Nagle]: the library writes a response's headers and its body apart; with
  // Nagle's algorithm on, the body waits for the client's acknowledgement of the headers, which a
  // client delays by up to 40 ms (delayed ACK): a small infer call took 27-65 ms on loopback
  // against 0.15 ms through gRPC (psw_protocol_bench). The accepted sockets inherit the option.
  impl_->server.set_tcp_nodelay(true);
  // SO_REUSEADDR only: the library's default adds SO_REUSEPORT, which would let a second server
  // share a port in use instead of failing (as for the gRPC front end).
  impl_->server.set_socket_options([](socket_t sock) {
    const int yes = 1;
    ::setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof yes);
  });
  int port = where.port;
  if (port == 0) {
    port = impl_->server.bind_to_any_port(where.host);
    if (port < 0) throw InputError("--http-listen " + address + ": cannot listen (the address is not one of this host's)");
  } else if (!impl_->server.bind_to_port(where.host, port)) {
    throw InputError("--http-listen " + address + ": the port is in use or the address is not one of this host's");
  }
  impl_->url = "http://" + (where.bracketed ? "[" + where.host + "]" : where.host) + ":" + std::to_string(port);
  // So that the service maps the staging where it reads inputs before the first request does.
  if (staging != nullptr) service.shared_memory_registered(staging->whole());
  impl_->thread = std::thread([this] { impl_->server.listen_after_bind(); });
  // Running before the constructor returns: a stop() before the loop starts would be lost and
  // the loop would then run for ever.
  for (int i = 0; i < 5000 && !impl_->server.is_running(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(1));
}

HttpFrontEnd::~HttpFrontEnd() { shutdown(); }

std::string HttpFrontEnd::url() const { return impl_->url; }

void HttpFrontEnd::shutdown() {
  if (!impl_->thread.joinable()) return;
  impl_->server.stop();
  impl_->thread.join();
}

}  // namespace psw::runtime
