#include "dist/store_client.h"

#include <unistd.h>

#include <algorithm>
#include <cstdio>

#include "core/error.h"
#include "core/strings.h"
#include "dist/store_protocol.h"

namespace sg::dist {

namespace {
uint8_t code(StoreMessage m) { return static_cast<uint8_t>(m); }
}  // namespace

AbortHandler exit_on_peer_failure(int own_rank) {
  return [own_rank](const PeerFailure& failure) {
    const std::string text =
        failure.rank >= 0
            ? strprintf("\nstepgraph rank %d: ending because rank %d failed: %s\n", own_rank, failure.rank,
                        failure.message.c_str())
            : strprintf("\nstepgraph rank %d: ending because %s\n", own_rank, failure.message.c_str());
    ssize_t ignored = ::write(STDERR_FILENO, text.data(), text.size());
    (void)ignored;
    _exit(kPeerFailedExitCode);
  };
}

StoreClient::StoreClient(const std::string& host, int port, int rank, int world_size, const std::string& job_token,
                         double timeout_seconds, AbortHandler on_abort, std::function<std::string()> joined_status,
                         const std::string& connect_hint)
    : rank_(rank), world_size_(world_size), on_abort_(std::move(on_abort)) {
  const auto deadline =
      Clock::now() + std::chrono::milliseconds(static_cast<int64_t>(timeout_seconds * 1000.0));
  socket_ =
      connect_until(host, port, deadline,
                    strprintf("the rendezvous store of rank 0, for rank %d of %d", rank, world_size), connect_hint);
  send(code(StoreMessage::hello), PayloadWriter().i32(rank).i32(world_size).str(job_token).data());
  reader_ = std::thread([this] { read_loop(); });
  const double left = std::chrono::duration<double>(deadline - Clock::now()).count();
  const bool answered = wait_until(std::max(left, 0.1), [this] { return ready_ || refusal_ || closed_ || peer_failure_; });
  std::string problem;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (refusal_) {
      problem = "rank 0's rendezvous store refused rank " + std::to_string(rank) + ": " + *refusal_;
    } else if (!answered) {
      problem = strprintf("rank %d timed out after %.0f s waiting for all %d ranks to join the rendezvous at %s:%d",
                          rank, timeout_seconds, world_size, host.c_str(), port);
      if (joined_status) problem += " (" + joined_status() + ")";
      problem += "; start every rank (WORLD_SIZE / SLURM_NTASKS of them), or raise STEPGRAPH_RENDEZVOUS_TIMEOUT";
    } else if (closed_ && !ready_ && !peer_failure_) {
      problem = strprintf(
          "rank %d lost the connection to the rendezvous store at %s:%d while joining (is another "
          "program listening on port %d?)",
          rank, host.c_str(), port, port);
    }
  }
  if (!problem.empty()) {
    socket_.shutdown();
    reader_.join();
    throw Error(problem);
  }
}

StoreClient::~StoreClient() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!done_) failed_self_ = true;  // closing now must not run the abort handler on our own way out
  }
  socket_.shutdown();
  if (reader_.joinable()) reader_.join();
}

void StoreClient::send(uint8_t type, const std::string& payload) {
  std::lock_guard<std::mutex> lock(send_mutex_);
  (void)send_frame(socket_.fd(), type, payload);
}

bool StoreClient::wait_until(double timeout_seconds, const std::function<bool()>& ready) {
  std::unique_lock<std::mutex> lock(mutex_);
  return changed_.wait_for(lock, std::chrono::milliseconds(static_cast<int64_t>(timeout_seconds * 1000.0)), ready);
}

void StoreClient::read_loop() {
  Frame frame;
  for (;;) {
    const bool ok = recv_frame(socket_.fd(), frame);
    std::optional<PeerFailure> abort;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (!ok) {
        closed_ = true;
        if (ready_ && !done_ && !failed_self_ && !peer_failure_) {
          peer_failure_ = PeerFailure{-1, "the connection to the rendezvous store on rank 0 was lost (rank 0 ended "
                                          "or the network failed)"};
          abort = peer_failure_;
        }
      } else {
        try {
          PayloadReader in(frame.payload);
          switch (static_cast<StoreMessage>(frame.type)) {
            case StoreMessage::ready:
              ready_ = true;
              break;
            case StoreMessage::error:
              refusal_ = in.str();
              break;
            case StoreMessage::value: {
              const std::string key = in.str();
              values_[key] = in.str();
              break;
            }
            case StoreMessage::gathered: {
              const std::string key = in.str();
              const int count = in.i32();
              std::vector<std::string> all;
              for (int i = 0; i < count; ++i) all.push_back(in.str());
              gathered_[key] = std::move(all);
              break;
            }
            case StoreMessage::abort: {
              PeerFailure f;
              f.rank = in.i32();
              f.message = in.str();
              if (f.rank == rank_) {
                failure_echoed_ = true;
              } else if (!failed_self_ && !done_ && !peer_failure_) {
                peer_failure_ = f;
                abort = f;
              }
              break;
            }
            case StoreMessage::done:
              done_ = true;
              break;
            default:
              break;
          }
        } catch (const Error&) {
          // A malformed frame from something that is not our server: ignore it.
        }
      }
    }
    changed_.notify_all();
    if (abort && on_abort_) on_abort_(*abort);
    if (!ok) return;
  }
}

void StoreClient::set(const std::string& key, const std::string& value) {
  send(code(StoreMessage::set), PayloadWriter().str(key).str(value).data());
}

std::string StoreClient::get(const std::string& key, double timeout_seconds) {
  return get(key, timeout_seconds, {}, timeout_seconds);
}

std::string StoreClient::get(const std::string& key, double timeout_seconds, const std::function<void(double)>& waiting,
                             double every_seconds) {
  send(code(StoreMessage::get), PayloadWriter().str(key).data());
  const auto start = std::chrono::steady_clock::now();
  const auto waited = [&] { return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(); };
  const auto ready = [&] { return values_.count(key) > 0 || closed_ || peer_failure_; };
  bool got = false;
  for (double left = timeout_seconds; !got && left > 0; left = timeout_seconds - waited()) {
    got = wait_until(waiting ? std::min(left, every_seconds) : left, ready);
    if (!got && waiting && waited() < timeout_seconds) waiting(waited());
  }
  std::lock_guard<std::mutex> lock(mutex_);
  const auto it = values_.find(key);
  if (it != values_.end()) return it->second;
  if (peer_failure_) throw Error("the run was aborted while rank " + std::to_string(rank_) + " waited for '" + key +
                                 "': " + peer_failure_->message);
  throw Error(strprintf("rank %d %s while waiting for '%s' from the rendezvous store", rank_,
                        got ? "lost the connection to rank 0" : "timed out", key.c_str()));
}

std::vector<std::string> StoreClient::all_gather(const std::string& key, const std::string& value,
                                                 double timeout_seconds) {
  send(code(StoreMessage::all_gather), PayloadWriter().str(key).str(value).data());
  const bool got = wait_until(timeout_seconds, [&] { return gathered_.count(key) > 0 || closed_ || peer_failure_; });
  std::lock_guard<std::mutex> lock(mutex_);
  const auto it = gathered_.find(key);
  if (it != gathered_.end()) {
    std::vector<std::string> out = std::move(it->second);
    gathered_.erase(it);
    return out;
  }
  if (peer_failure_) throw Error("the run was aborted while rank " + std::to_string(rank_) + " waited for '" + key +
                                 "' from every rank: " + peer_failure_->message);
  throw Error(strprintf("rank %d %s while waiting for every rank's '%s'", rank_,
                        got ? "lost the connection to rank 0" : "timed out", key.c_str()));
}

void StoreClient::report_failure(const std::string& message, double wait_seconds) noexcept {
  try {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (failed_self_ || done_ || closed_) return;
      failed_self_ = true;
    }
    send(code(StoreMessage::fail), PayloadWriter().str(message).data());
    wait_until(wait_seconds, [this] { return failure_echoed_ || closed_; });
  } catch (...) {
  }
}

void StoreClient::finish(double timeout_seconds) {
  send(code(StoreMessage::bye), "");
  const bool got = wait_until(timeout_seconds, [this] { return done_ || closed_ || peer_failure_; });
  std::lock_guard<std::mutex> lock(mutex_);
  if (done_) return;
  if (peer_failure_) throw Error("rank " + std::to_string(rank_) + " finished, but " + peer_failure_->message);
  throw Error(strprintf("rank %d finished but %s before every rank had finished", rank_,
                        got ? "lost the connection to rank 0" : "timed out"));
}

}  // namespace sg::dist
