#include "dist/socket.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <thread>

#include "core/error.h"
#include "core/strings.h"

namespace sg::dist {

Socket& Socket::operator=(Socket&& other) noexcept {
  if (this != &other) {
    close();
    fd_ = other.release();
  }
  return *this;
}

void Socket::close() noexcept {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
}

void Socket::shutdown() noexcept {
  if (fd_ >= 0) ::shutdown(fd_, SHUT_RDWR);
}

void tune_connection(int fd) {
  const int one = 1;
  (void)setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  (void)setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &one, sizeof(one));
  const int idle = 10, interval = 5, count = 4;
  (void)setsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &idle, sizeof(idle));
  (void)setsockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, &interval, sizeof(interval));
  (void)setsockopt(fd, IPPROTO_TCP, TCP_KEEPCNT, &count, sizeof(count));
}

namespace {

Socket bind_and_listen(int family, int port, std::string& error) {
  Socket s(::socket(family, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (!s.valid()) {
    error = std::strerror(errno);
    return {};
  }
  const int one = 1;
  (void)setsockopt(s.fd(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  int rc = 0;
  if (family == AF_INET6) {
    const int zero = 0;
    (void)setsockopt(s.fd(), IPPROTO_IPV6, IPV6_V6ONLY, &zero, sizeof(zero));
    sockaddr_in6 a{};
    a.sin6_family = AF_INET6;
    a.sin6_addr = in6addr_any;
    a.sin6_port = htons(static_cast<uint16_t>(port));
    rc = ::bind(s.fd(), reinterpret_cast<sockaddr*>(&a), sizeof(a));
  } else {
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_ANY);
    a.sin_port = htons(static_cast<uint16_t>(port));
    rc = ::bind(s.fd(), reinterpret_cast<sockaddr*>(&a), sizeof(a));
  }
  if (rc != 0 || ::listen(s.fd(), 1024) != 0) {
    error = std::strerror(errno);
    return {};
  }
  return s;
}

}  // namespace

Socket listen_on(int port, const std::string& port_source, const std::string& port_variable) {
  const std::string& variable = port_variable.empty() ? port_source : port_variable;
  SG_CHECK(port >= 0 && port <= 65535, strprintf("%s = %d is not a TCP port", port_source.c_str(), port));
  std::string error6, error4;
  Socket s = bind_and_listen(AF_INET6, port, error6);
  if (!s.valid()) s = bind_and_listen(AF_INET, port, error4);
  if (!s.valid()) {
    throw Error(
        strprintf("rank 0 cannot serve the rendezvous store on port %d (%s): %s. Pick a free port: %s=<port> "
                  "(another job or a previous run may still hold this one)",
                  port, port_source.c_str(), error4.empty() ? error6.c_str() : error4.c_str(), variable.c_str()));
  }
  return s;
}

int bound_port(const Socket& socket) {
  sockaddr_storage a{};
  socklen_t len = sizeof(a);
  SG_CHECK(getsockname(socket.fd(), reinterpret_cast<sockaddr*>(&a), &len) == 0,
           std::string("getsockname failed: ") + std::strerror(errno));
  if (a.ss_family == AF_INET6) return ntohs(reinterpret_cast<sockaddr_in6*>(&a)->sin6_port);
  return ntohs(reinterpret_cast<sockaddr_in*>(&a)->sin_port);
}

Socket try_connect(const std::string& host, int port) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  const std::string service = std::to_string(port);
  if (getaddrinfo(host.c_str(), service.c_str(), &hints, &found) != 0) return {};
  Socket out;
  for (addrinfo* a = found; a != nullptr && !out.valid(); a = a->ai_next) {
    Socket s(::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol));
    if (s.valid() && ::connect(s.fd(), a->ai_addr, a->ai_addrlen) == 0) out = std::move(s);
  }
  freeaddrinfo(found);
  if (out.valid()) tune_connection(out.fd());
  return out;
}

Socket connect_until(const std::string& host, int port, Clock::time_point deadline, const std::string& what,
                     const std::string& hint) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  const int rc = getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &found);
  if (rc != 0) {
    throw Error(strprintf("cannot resolve %s (%s): %s; set MASTER_ADDR to a host name or address of rank 0's node",
                          host.c_str(), what.c_str(), gai_strerror(rc)));
  }
  freeaddrinfo(found);
  for (;;) {
    Socket s = try_connect(host, port);
    if (s.valid()) return s;
    if (Clock::now() >= deadline) {
      throw Error(
          strprintf("could not connect to %s:%d (%s) before the timeout: %s (STEPGRAPH_RENDEZVOUS_TIMEOUT "
                    "sets the timeout)",
                    host.c_str(), port, what.c_str(),
                    hint.empty() ? "is rank 0 running, and are MASTER_ADDR/MASTER_PORT its host and a port it "
                                   "can open?"
                                 : hint.c_str()));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
}

bool send_frame(int fd, uint8_t type, const std::string& payload) noexcept {
  if (payload.size() > kMaxFramePayload) return false;
  std::string buffer(5, '\0');
  const uint32_t n = htonl(static_cast<uint32_t>(payload.size()));
  std::memcpy(buffer.data(), &n, 4);
  buffer[4] = static_cast<char>(type);
  buffer += payload;
  size_t sent = 0;
  while (sent < buffer.size()) {
    const ssize_t k = ::send(fd, buffer.data() + sent, buffer.size() - sent, MSG_NOSIGNAL);
    if (k < 0 && errno == EINTR) continue;
    if (k <= 0) return false;
    sent += static_cast<size_t>(k);
  }
  return true;
}

namespace {
bool recv_all(int fd, char* out, size_t n) {
  size_t got = 0;
  while (got < n) {
    const ssize_t k = ::recv(fd, out + got, n - got, 0);
    if (k < 0 && errno == EINTR) continue;
    if (k <= 0) return false;
    got += static_cast<size_t>(k);
  }
  return true;
}
}  // namespace

bool recv_frame(int fd, Frame& out) {
  char header[5];
  if (!recv_all(fd, header, 5)) return false;
  uint32_t n = 0;
  std::memcpy(&n, header, 4);
  n = ntohl(n);
  if (n > kMaxFramePayload) return false;
  out.type = static_cast<uint8_t>(header[4]);
  out.payload.assign(n, '\0');
  return n == 0 || recv_all(fd, out.payload.data(), n);
}

namespace {
template <class T>
void append_fixed(std::string& data, T v) {
  char b[sizeof(T)];
  std::memcpy(b, &v, sizeof(T));
  data.append(b, sizeof(T));
}
}  // namespace

PayloadWriter& PayloadWriter::i32(int32_t v) {
  append_fixed(data_, v);
  return *this;
}

PayloadWriter& PayloadWriter::i64(int64_t v) {
  append_fixed(data_, v);
  return *this;
}

PayloadWriter& PayloadWriter::str(const std::string& v) {
  i32(static_cast<int32_t>(v.size()));
  data_ += v;
  return *this;
}

void PayloadReader::need(size_t n) const {
  if (pos_ + n > data_.size()) {
    throw Error("the rendezvous store received a truncated message: is another program (or another stepgraph "
                "version) using MASTER_ADDR:MASTER_PORT?");
  }
}

template <class T>
T PayloadReader::fixed() {
  need(sizeof(T));
  T v;
  std::memcpy(&v, data_.data() + pos_, sizeof(T));
  pos_ += sizeof(T);
  return v;
}

int32_t PayloadReader::i32() { return fixed<int32_t>(); }
int64_t PayloadReader::i64() { return fixed<int64_t>(); }

std::string PayloadReader::str() {
  const int32_t n = i32();
  if (n < 0) need(data_.size() + 1);  // throws
  need(static_cast<size_t>(n));
  std::string v = data_.substr(pos_, static_cast<size_t>(n));
  pos_ += static_cast<size_t>(n);
  return v;
}

std::string local_host_name() {
  char name[256] = {0};
  if (gethostname(name, sizeof(name) - 1) != 0) return "localhost";
  return name;
}

}  // namespace sg::dist
