#include "tcp_address.hpp"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include "psw/common/error.hpp"

namespace psw::runtime {

HostPort parse_tcp_address(const std::string& address) {
  const std::string usage = " (expected HOST:PORT, e.g. 127.0.0.1:8001 or [::1]:8001)";
  HostPort parsed;
  std::string port_text;
  if (!address.empty() && address.front() == '[') {
    const auto close = address.find(']');
    if (close == std::string::npos || close + 1 >= address.size() || address[close + 1] != ':') {
      throw InputError("bad TCP address '" + address + "'" + usage);
    }
    parsed.host = address.substr(1, close - 1);
    parsed.bracketed = true;
    port_text = address.substr(close + 2);
  } else {
    const auto colon = address.rfind(':');
    if (colon == std::string::npos) throw InputError("TCP address '" + address + "' has no port" + usage);
    parsed.host = address.substr(0, colon);
    if (parsed.host.find(':') != std::string::npos) {
      throw InputError("bad TCP address '" + address + "': write an IPv6 address in brackets" + usage);
    }
    port_text = address.substr(colon + 1);
  }
  if (port_text.empty() || port_text.size() > 5 ||
      port_text.find_first_not_of("0123456789") != std::string::npos || std::stoi(port_text) > 65535) {
    throw InputError("bad port in TCP address '" + address + "'" + usage);
  }
  parsed.port = std::stoi(port_text);
  return parsed;
}

namespace {

bool is_wildcard(const sockaddr* address) {
  if (address->sa_family == AF_INET) {
    return reinterpret_cast<const sockaddr_in*>(address)->sin_addr.s_addr == htonl(INADDR_ANY);
  }
  if (address->sa_family == AF_INET6) {
    const in6_addr& ip = reinterpret_cast<const sockaddr_in6*>(address)->sin6_addr;
    if (IN6_IS_ADDR_UNSPECIFIED(&ip)) return true;
    if (IN6_IS_ADDR_V4MAPPED(&ip)) {
      return ip.s6_addr[12] == 0 && ip.s6_addr[13] == 0 && ip.s6_addr[14] == 0 && ip.s6_addr[15] == 0;
    }
  }
  return false;
}

bool is_loopback(const sockaddr* address) {
  if (address->sa_family == AF_INET) {
    return (ntohl(reinterpret_cast<const sockaddr_in*>(address)->sin_addr.s_addr) >> 24) == 127;
  }
  if (address->sa_family == AF_INET6) {
    const in6_addr& ip = reinterpret_cast<const sockaddr_in6*>(address)->sin6_addr;
    if (IN6_IS_ADDR_LOOPBACK(&ip)) return true;
    if (IN6_IS_ADDR_V4MAPPED(&ip)) return ip.s6_addr[12] == 127;
  }
  return false;
}

// Calls `visit` with every address the host of `address` resolves to, as the server will resolve
// it; how many. InputError when it does not resolve.
template <typename Visit>
std::size_t for_each_resolved(const std::string& address, const HostPort& parsed, Visit&& visit) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* results = nullptr;
  const int status = ::getaddrinfo(parsed.host.c_str(), nullptr, &hints, &results);
  if (status != 0) {
    throw InputError("cannot resolve the host of TCP address '" + address + "': " + ::gai_strerror(status));
  }
  std::size_t count = 0;
  for (const addrinfo* result = results; result != nullptr; result = result->ai_next, ++count) visit(result->ai_addr);
  ::freeaddrinfo(results);
  return count;
}

}  // namespace

bool is_loopback_tcp_address(const std::string& address) {
  const HostPort parsed = parse_tcp_address(address);
  if (parsed.host.empty() || parsed.host == "*") return false;  // every interface
  bool loopback = true;
  const std::size_t found = for_each_resolved(address, parsed, [&](const sockaddr* resolved) {
    loopback = loopback && is_loopback(resolved);
  });
  return loopback && found > 0;
}

void check_remote_access(const std::vector<std::pair<std::string, std::string>>& listeners, bool allow_remote,
                         bool has_token) {
  for (const auto& [flag, address] : listeners) {
    if (address.empty()) continue;
    check_tcp_host(address, parse_tcp_address(address));  // every interface: never, token or not
    if (is_loopback_tcp_address(address)) continue;
    const std::string what = flag + " " + address + ": an address other hosts can reach";
    if (!allow_remote) {
      throw InputError(what + " is refused without --allow-remote and a bearer token (--token-file FILE): whoever "
                              "reaches it could run the models, read their outputs and stop the training job "
                              "(docs/serving.md, Remote access); use a loopback address or the Unix socket otherwise");
    }
    if (!has_token) {
      throw InputError(what + " with --allow-remote needs a bearer token (--token-file FILE, a file only you can "
                              "read); every call must then carry it");
    }
  }
}

// TCP has no file permissions: whoever reaches the port can use the server. Listening on every
// interface would expose it to the network, so a wildcard host is refused; loopback or one
// interface's address must be named. The host is resolved as the server will resolve it, so
// spellings such as "0" or "::0" are caught too.
void check_tcp_host(const std::string& address, const HostPort& parsed) {
  const std::string refusal = "refusing to listen on every interface (TCP address '" + address +
                              "'): name loopback (127.0.0.1, [::1], localhost) or one interface's "
                              "address; clients reach the server on a Unix socket by default";
  if (parsed.host.empty() || parsed.host == "*") throw InputError(refusal);
  bool wildcard = false;
  for_each_resolved(address, parsed, [&](const sockaddr* resolved) { wildcard = wildcard || is_wildcard(resolved); });
  if (wildcard) throw InputError(refusal);
}

}  // namespace psw::runtime
