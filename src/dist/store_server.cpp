#include "dist/store_server.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "core/error.h"
#include "core/strings.h"
#include "dist/store_protocol.h"

namespace sg::dist {

namespace {
uint8_t code(StoreMessage m) { return static_cast<uint8_t>(m); }
}  // namespace

StoreServer::StoreServer(int port, int world_size, std::string job_token, const std::string& port_source,
                         const std::string& port_variable)
    : world_size_(world_size), job_token_(std::move(job_token)) {
  SG_CHECK(world_size >= 1, strprintf("rendezvous store: world size %d must be at least 1", world_size));
  listener_ = listen_on(port, port_source, port_variable);
  port_ = bound_port(listener_);
  SG_CHECK(::pipe2(wake_pipe_, O_CLOEXEC) == 0, std::string("pipe failed: ") + std::strerror(errno));
  thread_ = std::thread([this] { serve(); });
}

StoreServer::~StoreServer() {
  stopping_.store(true);
  const char byte = 1;
  ssize_t ignored = ::write(wake_pipe_[1], &byte, 1);
  (void)ignored;
  if (thread_.joinable()) thread_.join();
  ::close(wake_pipe_[0]);
  ::close(wake_pipe_[1]);
}

std::vector<int> StoreServer::joined_ranks() const {
  std::lock_guard<std::mutex> lock(mutex_);
  std::vector<int> out = joined_ranks_;
  std::sort(out.begin(), out.end());
  return out;
}

void StoreServer::send(Connection& c, uint8_t type, const std::string& payload) {
  if (c.open && !send_frame(c.socket.fd(), type, payload)) c.open = false;
}

void StoreServer::broadcast(uint8_t type, const std::string& payload) {
  // Rank 0 (this process) last: when its client acts on the message — _exit on an abort, returning from
  // the join, finishing — every other rank's copy is already on its way.
  for (auto& c : connections_) {
    if (c->rank > 0) send(*c, type, payload);
  }
  for (auto& c : connections_) {
    if (c->rank == 0) send(*c, type, payload);
  }
}

void StoreServer::on_fail(int rank, const std::string& message) {
  if (failure_sent_) return;  // the first failure is the cause; later ones are its consequences
  failure_sent_ = true;
  failure_payload_ = PayloadWriter().i32(rank).str(message).data();
  // The failing rank gets it too: its client waits for this echo, so the others are told before it exits.
  broadcast(code(StoreMessage::abort), failure_payload_);
}

void StoreServer::on_hello(Connection& c, const std::string& payload) {
  PayloadReader in(payload);
  const int rank = in.i32();
  const int world = in.i32();
  const std::string token = in.str();
  std::string refusal;
  // A rank of another job is turned away and this job goes on; a rank of this job that cannot join (another world
  // size, a rank out of range or twice) ends the job at once, as a failing rank does: the others would otherwise
  // wait out the rendezvous timeout for a rank that already exited.
  bool ends_the_job = true;
  if (token != job_token_) {
    refusal = strprintf(
        "this rank belongs to another job (token '%s', rank 0 has '%s'): MASTER_ADDR:MASTER_PORT is "
        "used by two runs; give each run its own MASTER_PORT",
        token.c_str(), job_token_.c_str());
    ends_the_job = false;
  } else if (world != world_size_) {
    refusal = strprintf("this rank says the world size is %d, rank 0 says %d: every rank must get the same "
                        "WORLD_SIZE / SLURM_NTASKS",
                        world, world_size_);
  } else if (rank < 0 || rank >= world_size_) {
    refusal = strprintf("rank %d is outside [0, %d)", rank, world_size_);
  } else {
    for (const auto& other : connections_) {
      if (other->rank == rank) {
        refusal = strprintf("rank %d joined twice: two processes were started with the same RANK / SLURM_PROCID",
                            rank);
      }
    }
  }
  if (!refusal.empty()) {
    send(c, code(StoreMessage::error), PayloadWriter().str(refusal).data());
    c.open = false;
    if (ends_the_job) on_fail(rank, strprintf("rank %d was refused at the rendezvous: %s", rank, refusal.c_str()));
    return;
  }
  c.rank = rank;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    joined_ranks_.push_back(rank);
  }
  if (failure_sent_) {
    send(c, code(StoreMessage::abort), failure_payload_);
    return;
  }
  if (static_cast<int>(joined_ranks().size()) == world_size_ && !ready_sent_) {
    ready_sent_ = true;
    broadcast(code(StoreMessage::ready), "");
  } else if (ready_sent_) {
    send(c, code(StoreMessage::ready), "");
  }
}

void StoreServer::handle(Connection& c, uint8_t type, const std::string& payload) {
  const auto message = static_cast<StoreMessage>(type);
  if (c.rank < 0 && message != StoreMessage::hello) {
    c.open = false;  // not a stepgraph rank
    return;
  }
  PayloadReader in(payload);
  switch (message) {
    case StoreMessage::hello:
      on_hello(c, payload);
      break;
    case StoreMessage::set: {
      const std::string key = in.str();
      const std::string value = in.str();
      values_[key] = value;
      const std::string reply = PayloadWriter().str(key).str(value).data();
      for (Connection* w : waiting_[key]) send(*w, code(StoreMessage::value), reply);
      waiting_.erase(key);
      break;
    }
    case StoreMessage::get: {
      const std::string key = in.str();
      const auto it = values_.find(key);
      if (it != values_.end()) {
        send(c, code(StoreMessage::value), PayloadWriter().str(key).str(it->second).data());
      } else {
        waiting_[key].push_back(&c);
      }
      break;
    }
    case StoreMessage::all_gather: {
      const std::string key = in.str();
      auto& slots = gathers_[key];
      slots.resize(static_cast<size_t>(world_size_));
      slots[static_cast<size_t>(c.rank)] = in.str();
      if (std::all_of(slots.begin(), slots.end(), [](const auto& s) { return s.has_value(); })) {
        PayloadWriter reply;
        reply.str(key).i32(world_size_);
        for (const auto& s : slots) reply.str(*s);
        broadcast(code(StoreMessage::gathered), reply.data());
        gathers_.erase(key);
      }
      break;
    }
    case StoreMessage::fail:
      on_fail(c.rank, in.str());
      break;
    case StoreMessage::bye:
      if (!c.said_bye) {
        c.said_bye = true;
        if (++byes_ == world_size_) broadcast(code(StoreMessage::done), "");
      }
      break;
    default:
      c.open = false;
      break;
  }
}

void StoreServer::serve() {
  for (;;) {
    std::vector<pollfd> fds;
    fds.push_back({wake_pipe_[0], POLLIN, 0});
    fds.push_back({listener_.fd(), POLLIN, 0});
    for (auto& c : connections_) fds.push_back({c->socket.fd(), POLLIN, 0});
    const int n = ::poll(fds.data(), fds.size(), -1);
    if (stopping_.load()) return;
    if (n < 0) {
      if (errno == EINTR) continue;
      return;
    }
    if (fds[1].revents & POLLIN) {
      Socket accepted(::accept4(listener_.fd(), nullptr, nullptr, SOCK_CLOEXEC));
      if (accepted.valid()) {
        tune_connection(accepted.fd());
        auto c = std::make_unique<Connection>();
        c->socket = std::move(accepted);
        connections_.push_back(std::move(c));
      }
    }
    for (size_t i = 2; i < fds.size(); ++i) {
      if (fds[i].revents == 0) continue;
      Connection& c = *connections_[i - 2];
      char buffer[65536];
      const ssize_t k = ::recv(c.socket.fd(), buffer, sizeof(buffer), 0);
      if (k <= 0) {
        if (k < 0 && errno == EINTR) continue;
        c.open = false;
        continue;
      }
      c.inbox.append(buffer, static_cast<size_t>(k));
      // Every whole frame in the inbox.
      while (c.open && c.inbox.size() >= 5) {
        uint32_t len = 0;
        std::memcpy(&len, c.inbox.data(), 4);
        len = ntohl(len);
        if (len > kMaxFramePayload) {
          c.open = false;
          break;
        }
        if (c.inbox.size() < 5 + static_cast<size_t>(len)) break;
        const uint8_t type = static_cast<uint8_t>(c.inbox[4]);
        const std::string payload = c.inbox.substr(5, len);
        c.inbox.erase(0, 5 + static_cast<size_t>(len));
        try {
          handle(c, type, payload);
        } catch (const Error&) {
          c.open = false;  // a malformed message: drop this connection
        }
      }
    }
    // Closed connections: a rank that leaves without bye has failed.
    for (size_t i = 0; i < connections_.size();) {
      Connection& c = *connections_[i];
      if (c.open) {
        ++i;
        continue;
      }
      if (c.rank >= 0 && !c.said_bye) {
        on_fail(c.rank, strprintf("rank %d ended without finishing (it crashed, was killed, or lost its "
                                  "connection to rank 0)",
                                  c.rank));
      }
      for (auto& [key, list] : waiting_) list.erase(std::remove(list.begin(), list.end(), &c), list.end());
      connections_.erase(connections_.begin() + static_cast<std::ptrdiff_t>(i));
    }
  }
}

}  // namespace sg::dist
