#pragma once
// One rank's connection to the rendezvous store (dist/store_server.h), open for the whole run. A reader
// thread receives every message; the calling thread waits on what it asked for.
//
// Liveness: when another rank fails (it reported a failure, or its connection closed before it
// finished) or the connection to rank 0 is lost, the abort handler runs on the reader thread. The
// default handler prints who failed and why and _exit()s with kPeerFailedExitCode at once: this rank
// may be blocked inside an NCCL collective that can never complete, and a process that is gone leaves
// nothing to clean up (the driver reclaims the device). Tests install their own handler.
#include <chrono>
#include <condition_variable>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "dist/socket.h"

namespace sg::dist {

struct PeerFailure {
  int rank = -1;  // -1: the connection to the rendezvous server (rank 0) was lost
  std::string message;
};
using AbortHandler = std::function<void(const PeerFailure&)>;
// Prints "stepgraph rank R: ending because ..." to stderr and _exit(kPeerFailedExitCode).
AbortHandler exit_on_peer_failure(int own_rank);

class StoreClient {
 public:
  // Connects to host:port (retrying until the timeout: rank 0 may start later), says hello and waits
  // until every rank has joined. Throws sg::Error on a refusal (wrong world size, duplicate rank,
  // another job's token) or a timeout; `joined_status` (rank 0) adds which ranks are missing; `connect_hint`
  // says what to check when rank 0 never answers (dist/socket.h's connect_until).
  StoreClient(const std::string& host, int port, int rank, int world_size, const std::string& job_token,
              double timeout_seconds, AbortHandler on_abort, std::function<std::string()> joined_status = {},
              const std::string& connect_hint = "");
  ~StoreClient();  // closes the connection (without bye: the others treat that as a failure)
  StoreClient(const StoreClient&) = delete;
  StoreClient& operator=(const StoreClient&) = delete;

  int rank() const { return rank_; }
  int world_size() const { return world_size_; }

  void set(const std::string& key, const std::string& value);
  // Waits until some rank has set `key`. Throws sg::Error after the timeout.
  std::string get(const std::string& key, double timeout_seconds);
  // The same, calling `waiting(seconds waited so far)` every `every_seconds` while it waits (a line for the log).
  std::string get(const std::string& key, double timeout_seconds, const std::function<void(double)>& waiting,
                  double every_seconds);
  // Every rank's value for `key`, in rank order, once all ranks have called all_gather with it.
  std::vector<std::string> all_gather(const std::string& key, const std::string& value, double timeout_seconds);

  // This rank failed: tells the server (which aborts the other ranks) and waits up to `wait_seconds`
  // until the server has passed it on. Never throws; idempotent.
  void report_failure(const std::string& message, double wait_seconds = 2.0) noexcept;
  // This rank finished normally: says bye and waits until every rank has (a barrier at the end of a
  // run), so no rank tears down NCCL while another may still use it. Throws sg::Error on a timeout.
  void finish(double timeout_seconds);

 private:
  void read_loop();
  // Waits until `ready()` holds (under mutex_) or the deadline passes; false on timeout.
  bool wait_until(double timeout_seconds, const std::function<bool()>& ready);
  void send(uint8_t type, const std::string& payload);

  int rank_;
  int world_size_;
  Socket socket_;
  std::mutex send_mutex_;
  AbortHandler on_abort_;
  std::thread reader_;

  std::mutex mutex_;
  std::condition_variable changed_;
  bool ready_ = false;
  bool done_ = false;
  bool closed_ = false;     // the reader saw EOF
  bool failed_self_ = false;
  bool failure_echoed_ = false;
  std::optional<std::string> refusal_;
  std::optional<PeerFailure> peer_failure_;
  std::map<std::string, std::string> values_;
  std::map<std::string, std::vector<std::string>> gathered_;
};

}  // namespace sg::dist
