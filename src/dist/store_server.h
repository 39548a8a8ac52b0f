#pragma once
// The rendezvous store server, run by rank 0 on a thread of its own (dist/store_protocol.h):
//   * joins: accepts one connection per rank, refuses a wrong world size, a duplicate rank or another
//     job's token, and answers `ready` to everyone once all ranks are there;
//   * a key-value store (set / blocking get) for rank 0's NCCL unique id;
//   * all-gathers of small host values (the per-step stop agreement, the capture check);
//   * liveness: a rank that reports a failure, or whose connection closes before it said bye, makes the
//     server send `abort` to every other rank; `done` goes out once every rank said bye.
#include <atomic>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "dist/socket.h"

namespace sg::dist {

class StoreServer {
 public:
  // Listens on `port` (0: any free port; see port()) and starts serving. Throws sg::Error when the port
  // cannot be opened, naming `port_source` and `port_variable` (dist/socket.h's listen_on).
  StoreServer(int port, int world_size, std::string job_token, const std::string& port_source = "MASTER_PORT",
              const std::string& port_variable = "");
  ~StoreServer();  // stops the thread and closes every connection
  StoreServer(const StoreServer&) = delete;
  StoreServer& operator=(const StoreServer&) = delete;

  int port() const { return port_; }
  // Ranks whose hello was accepted, sorted (for "timed out waiting for ranks ..." messages).
  std::vector<int> joined_ranks() const;

 private:
  struct Connection {
    Socket socket;
    std::string inbox;  // bytes received, not yet a whole frame
    int rank = -1;
    bool said_bye = false;
    bool open = true;
  };
  void serve();
  void handle(Connection& c, uint8_t type, const std::string& payload);
  void on_hello(Connection& c, const std::string& payload);
  void on_fail(int rank, const std::string& message);
  void broadcast(uint8_t type, const std::string& payload);  // to every joined rank
  void send(Connection& c, uint8_t type, const std::string& payload);

  int world_size_;
  std::string job_token_;
  Socket listener_;
  int port_ = 0;
  int wake_pipe_[2] = {-1, -1};
  std::thread thread_;
  std::atomic<bool> stopping_{false};

  mutable std::mutex mutex_;  // joined_ranks_ (read from other threads)
  std::vector<int> joined_ranks_;
  // Owned by the server thread.
  std::vector<std::unique_ptr<Connection>> connections_;  // stable addresses for waiting_
  std::map<std::string, std::string> values_;
  std::map<std::string, std::vector<Connection*>> waiting_;
  std::map<std::string, std::vector<std::optional<std::string>>> gathers_;
  bool ready_sent_ = false;
  bool failure_sent_ = false;
  std::string failure_payload_;
  int byes_ = 0;
};

}  // namespace sg::dist
