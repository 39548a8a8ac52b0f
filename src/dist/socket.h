#pragma once
// TCP plumbing for the rendezvous store: an owned socket, listen/connect with clear errors, and
// length-prefixed frames with a tiny binary encoding. Blocking I/O; SIGPIPE never raised (MSG_NOSIGNAL).
#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

namespace sg::dist {

class Socket {
 public:
  Socket() = default;
  explicit Socket(int fd) : fd_(fd) {}
  ~Socket() { close(); }
  Socket(Socket&& other) noexcept : fd_(other.release()) {}
  Socket& operator=(Socket&& other) noexcept;
  Socket(const Socket&) = delete;
  Socket& operator=(const Socket&) = delete;

  int fd() const { return fd_; }
  bool valid() const { return fd_ >= 0; }
  int release() {
    const int fd = fd_;
    fd_ = -1;
    return fd;
  }
  void close() noexcept;
  // Wakes a thread blocked in recv on this socket (shutdown(SHUT_RDWR)); the fd stays open.
  void shutdown() noexcept;

 private:
  int fd_ = -1;
};

using Clock = std::chrono::steady_clock;

// A listening socket on every interface (IPv6 dual-stack where available, else IPv4). port 0 picks a
// free one; bound_port() tells which. Throws sg::Error naming the port, where it came from (`port_source`:
// "MASTER_PORT", "MASTER_PORT + 1", ...) and the variable that picks another (`port_variable`; default: the
// source).
Socket listen_on(int port, const std::string& port_source = "MASTER_PORT", const std::string& port_variable = "");
int bound_port(const Socket& socket);

// Connects to host:port, retrying refused/unreachable attempts every 50 ms until `deadline` (rank 0 may
// not be listening yet). Throws sg::Error naming host, port, what the connection was for and `hint` (what to
// check; default: MASTER_ADDR/MASTER_PORT).
Socket connect_until(const std::string& host, int port, Clock::time_point deadline, const std::string& what,
                     const std::string& hint = "");
// One attempt; an invalid Socket when it fails.
Socket try_connect(const std::string& host, int port);

// Keep-alive (a peer host that vanishes is noticed in about 30 s) and no Nagle delay.
void tune_connection(int fd);

// ---- frames: [u32 payload length, big endian][u8 type][payload] ----
struct Frame {
  uint8_t type = 0;
  std::string payload;
};
inline constexpr uint32_t kMaxFramePayload = 64u << 20;

// Sends the whole frame; false when the peer is gone. Thread-safe only with external locking.
bool send_frame(int fd, uint8_t type, const std::string& payload) noexcept;
// Blocks for one frame; false on EOF, error or an oversized frame.
bool recv_frame(int fd, Frame& out);

// Payload encoding: fixed-width little-endian integers and length-prefixed strings.
class PayloadWriter {
 public:
  PayloadWriter& i32(int32_t v);
  PayloadWriter& i64(int64_t v);
  PayloadWriter& str(const std::string& v);
  const std::string& data() const { return data_; }

 private:
  std::string data_;
};

class PayloadReader {
 public:
  explicit PayloadReader(const std::string& data) : data_(data) {}
  // Each throws sg::Error on a truncated payload (a peer speaking another protocol).
  int32_t i32();
  int64_t i64();
  std::string str();

 private:
  void need(size_t n) const;
  template <class T>
  T fixed();
  const std::string& data_;
  size_t pos_ = 0;
};

// The host name of this machine (gethostname).
std::string local_host_name();

}  // namespace sg::dist
