#include "psw/runtime/server/metrics_http.hpp"

#include <arpa/inet.h>
#include <netdb.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <cstring>
#include <thread>

#include "tcp_address.hpp"
#include "psw/common/error.hpp"
#include "psw/runtime/ipc/access_token.hpp"
#include "psw/runtime/ipc/ipc.hpp"

namespace psw::runtime {

namespace {

constexpr int kRequestTimeoutMs = 2000;
constexpr std::size_t kMaxRequestBytes = 8192;

void write_all(int fd, const std::string& text) {
  std::size_t done = 0;
  while (done < text.size()) {
    const ssize_t n = ::send(fd, text.data() + done, text.size() - done, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;  // the client went away: nothing to do
    done += static_cast<std::size_t>(n);
  }
}

std::string response(int code, const char* reason, const std::string& type, const std::string& body) {
  return "HTTP/1.1 " + std::to_string(code) + " " + reason + "\r\nContent-Type: " + type +
         "\r\nContent-Length: " + std::to_string(body.size()) + "\r\nConnection: close\r\n\r\n" + body;
}

// The value of the request's Authorization header (names are case-insensitive), or "".
std::string authorization_of(const std::string& request) {
  std::size_t at = request.find("\r\n");
  while (at != std::string::npos && at + 2 < request.size()) {
    const std::size_t end = request.find("\r\n", at + 2);
    const std::string line = request.substr(at + 2, end == std::string::npos ? std::string::npos : end - at - 2);
    const std::size_t colon = line.find(':');
    if (colon != std::string::npos) {
      std::string name = line.substr(0, colon);
      for (char& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
      if (name == "authorization") {
        std::size_t begin = colon + 1;
        while (begin < line.size() && line[begin] == ' ') ++begin;
        return line.substr(begin);
      }
    }
    at = end;
  }
  return "";
}

}  // namespace

struct MetricsHttpServer::Impl {
  const AccessToken* token = nullptr;  // Note [Remote access]
  std::function<std::string()> metrics;
  UniqueFd listener;
  UniqueFd stop;
  std::string url;
  std::thread thread;

  void serve(int fd) {
    std::string request;
    char buffer[1024];
    while (request.find("\r\n\r\n") == std::string::npos && request.size() <= kMaxRequestBytes) {
      pollfd p{fd, POLLIN, 0};
      if (::poll(&p, 1, kRequestTimeoutMs) <= 0) return;
      const ssize_t n = ::recv(fd, buffer, sizeof buffer, 0);
      if (n <= 0) return;
      request.append(buffer, static_cast<std::size_t>(n));
      if (request.size() > kMaxRequestBytes) {
        write_all(fd, response(431, "Request Header Fields Too Large", "text/plain", "request too large\n"));
        return;
      }
    }
    const std::string line = request.substr(0, request.find("\r\n"));
    if (token != nullptr && !token->admits(authorization_of(request))) {
      write_all(fd, response(401, "Unauthorized", "text/plain",
                             "psw serve's metrics need a bearer token (Authorization: Bearer TOKEN)\n"));
    } else if (line.rfind("GET /metrics ", 0) == 0 || line == "GET /metrics") {
      write_all(fd, response(200, "OK", "text/plain; version=0.0.4; charset=utf-8", metrics()));
    } else {
      write_all(fd, response(404, "Not Found", "text/plain", "psw serve answers GET /metrics only\n"));
    }
  }

  void loop() {
    while (true) {
      pollfd fds[2] = {{stop.get(), POLLIN, 0}, {listener.get(), POLLIN, 0}};
      if (::poll(fds, 2, -1) < 0) {
        if (errno == EINTR) continue;
        return;
      }
      if (fds[0].revents != 0) return;
      if ((fds[1].revents & POLLIN) != 0) {
        UniqueFd client(::accept4(listener.get(), nullptr, nullptr, SOCK_CLOEXEC));
        if (client) {
          try {
            serve(client.get());
          } catch (const std::exception&) {
            // One failed scrape must not take the endpoint down.
          }
        }
      }
    }
  }
};

MetricsHttpServer::MetricsHttpServer(std::function<std::string()> metrics, const std::string& address,
                                     const AccessToken* token)
    : impl_(std::make_unique<Impl>()) {
  impl_->token = token;
  const HostPort parsed = parse_tcp_address(address);
  check_tcp_host(address, parsed);
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* results = nullptr;
  const int status = ::getaddrinfo(parsed.host.c_str(), std::to_string(parsed.port).c_str(), &hints, &results);
  if (status != 0) throw InputError("cannot resolve the metrics address '" + address + "': " + ::gai_strerror(status));
  std::string failure = "no address";
  for (addrinfo* r = results; r != nullptr && !impl_->listener; r = r->ai_next) {
    UniqueFd fd(::socket(r->ai_family, r->ai_socktype | SOCK_CLOEXEC, r->ai_protocol));
    if (!fd) continue;
    if (::bind(fd.get(), r->ai_addr, r->ai_addrlen) == 0 && ::listen(fd.get(), 16) == 0) {
      impl_->listener = std::move(fd);
    } else {
      failure = std::strerror(errno);
    }
  }
  ::freeaddrinfo(results);
  if (!impl_->listener) throw InputError("cannot listen for metrics on " + address + ": " + failure);
  sockaddr_storage bound{};
  socklen_t length = sizeof bound;
  ::getsockname(impl_->listener.get(), reinterpret_cast<sockaddr*>(&bound), &length);
  const int port = bound.ss_family == AF_INET6 ? ntohs(reinterpret_cast<sockaddr_in6*>(&bound)->sin6_port)
                                               : ntohs(reinterpret_cast<sockaddr_in*>(&bound)->sin_port);
  const std::string host = parsed.bracketed ? "[" + parsed.host + "]" : parsed.host;
  impl_->url = "http://" + host + ":" + std::to_string(port) + "/metrics";
  impl_->stop = UniqueFd(::eventfd(0, EFD_CLOEXEC));
  impl_->metrics = std::move(metrics);
  impl_->thread = std::thread([this] { impl_->loop(); });
}

MetricsHttpServer::~MetricsHttpServer() {
  const std::uint64_t one = 1;
  [[maybe_unused]] const ssize_t n = ::write(impl_->stop.get(), &one, sizeof one);
  if (impl_->thread.joinable()) impl_->thread.join();
}

std::string MetricsHttpServer::url() const { return impl_->url; }

}  // namespace psw::runtime
