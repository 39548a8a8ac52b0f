#include "dist/rendezvous.h"

#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "core/error.h"
#include "core/strings.h"

namespace sg::dist {
namespace {

constexpr const char* kFileMagic = "stepgraph-rendezvous 1";

struct FileEntry {
  std::string host;
  int port = 0;
  std::string token;
  int world_size = 0;
};

void write_rendezvous_file(const std::string& path, const FileEntry& e) {
  const std::string tmp = strprintf("%s.tmp-%d", path.c_str(), static_cast<int>(::getpid()));
  {
    std::ofstream out(tmp, std::ios::trunc);
    out << kFileMagic << "\n" << e.host << " " << e.port << "\n" << e.world_size << "\n" << e.token << "\n";
    out.close();
    SG_CHECK(!out.fail(), "rank 0 cannot write the rendezvous file " + tmp +
                              " (STEPGRAPH_RENDEZVOUS_FILE): is its directory writable and shared by every rank?");
  }
  std::error_code ec;
  std::filesystem::rename(tmp, path, ec);
  SG_CHECK(!ec, "rank 0 cannot create the rendezvous file " + path + ": " + ec.message());
}

std::optional<FileEntry> read_rendezvous_file(const std::string& path) {
  std::ifstream in(path);
  if (!in) return std::nullopt;
  std::string magic, token;
  FileEntry e;
  if (!std::getline(in, magic) || magic != kFileMagic) return std::nullopt;
  if (!(in >> e.host >> e.port >> e.world_size)) return std::nullopt;
  std::getline(in, token);  // rest of the world-size line
  std::getline(in, e.token);
  return e;
}

// The other ranks: wait for a file of THIS job whose server answers.
FileEntry await_rendezvous_file(const std::string& path, const WorldInfo& world, Clock::time_point deadline) {
  std::string seen;
  for (;;) {
    if (const auto e = read_rendezvous_file(path)) {
      if (e->token == world.job_token && e->world_size == world.world_size) {
        if (try_connect(e->host, e->port).valid()) return *e;
        seen = strprintf("it names %s:%d, which does not answer", e->host.c_str(), e->port);
      } else {
        seen = strprintf("it belongs to another run (world size %d, job token '%s'; this rank has %d, '%s')",
                         e->world_size, e->token.c_str(), world.world_size, world.job_token.c_str());
      }
    }
    if (Clock::now() >= deadline) {
      throw Error(strprintf("rank %d timed out waiting for rank 0 to publish the rendezvous in %s "
                            "(STEPGRAPH_RENDEZVOUS_FILE)%s; is rank 0 running, and is the path on a filesystem every "
                            "rank sees?",
                            world.rank, path.c_str(), seen.empty() ? "" : ("; the file exists but " + seen).c_str()));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
}

// What rank 0's listen error names: where the port came from, and the variable that picks another.
std::string port_source_text(const WorldInfo& world) {
  if (world.port_source.empty()) return "MASTER_PORT";
  if (world.agent_store && world.port_source == "MASTER_PORT + 1") {
    return "MASTER_PORT + 1: torchrun's agent serves its own store on MASTER_PORT (TORCHELASTIC_USE_AGENT_STORE=True)";
  }
  return world.port_source;
}

// What a rank that cannot reach rank 0's store should check. Under torchrun's agent store the store is on MASTER_ADDR
// at another port than MASTER_PORT, and MASTER_ADDR need not be global rank 0's host.
std::string connect_hint(const WorldInfo& world) {
  if (!world.agent_store) return "";
  return strprintf(
      "is rank 0 running? Under torchrun (TORCHELASTIC_USE_AGENT_STORE=True) rank 0 serves stepgraph's store on "
      "MASTER_ADDR at %s = %d (STEPGRAPH_STORE_PORT picks another; torchrun's own store holds MASTER_PORT), which "
      "needs global rank 0 on MASTER_ADDR's host: true on one node and with --rdzv-backend static. With torchrun's "
      "c10d rendezvous across nodes MASTER_ADDR can be another node's (it depends on torch's version), and its "
      "MASTER_PORT is one the OS picked: set STEPGRAPH_RENDEZVOUS_FILE (or train --rendezvous-file) to a path on "
      "a filesystem every node sees, which needs no address, or start the ranks with srun",
      world.port_source.c_str(), world.master_port);
}

}  // namespace

Rendezvous::Rendezvous(const WorldInfo& world, const RendezvousSettings& settings, AbortHandler on_abort)
    : world_(world), settings_(settings) {
  if (!on_abort) on_abort = exit_on_peer_failure(world.rank);
  const auto deadline =
      Clock::now() + std::chrono::milliseconds(static_cast<int64_t>(settings.timeout_seconds * 1000.0));
  std::string host;
  int port = 0;
  if (!settings.file.empty()) {
    if (world.rank == 0) {
      // The file names the port: a free one unless STEPGRAPH_STORE_PORT or Slurm's MASTER_PORT sets it (one derived
      // from SLURM_JOB_ID could be taken, by another step of the job on this node, say; MASTER_PORT + 1 under
      // torchrun's agent store by anything).
      server_ = std::make_unique<StoreServer>(world.master_port_given ? world.master_port : 0, world.world_size,
                                              world.job_token, port_source_text(world), world.port_variable);
      host = world.master_addr.empty() ? local_host_name() : world.master_addr;
      port = server_->port();
      write_rendezvous_file(settings.file, {host, port, world.job_token, world.world_size});
    } else {
      const FileEntry e = await_rendezvous_file(settings.file, world, deadline);
      host = e.host;
      port = e.port;
    }
    where_ = strprintf("file %s (%s:%d)", settings.file.c_str(), host.c_str(), port);
  } else {
    if (world.master_addr.empty() || world.master_port == 0) {
      throw Error(strprintf(
          "%s is not set (world size %d, launcher %s): set MASTER_ADDR and MASTER_PORT to rank 0's host and a free "
          "port, or STEPGRAPH_RENDEZVOUS_FILE to a path on a filesystem every rank sees",
          world.master_addr.empty() ? "MASTER_ADDR" : "MASTER_PORT", world.world_size, world.launcher.c_str()));
    }
    host = world.master_addr;
    port = world.master_port;
    if (world.rank == 0) {
      server_ = std::make_unique<StoreServer>(port, world.world_size, world.job_token, port_source_text(world),
                                              world.port_variable);
    }
    where_ = strprintf("tcp %s:%d", host.c_str(), port);
  }
  std::function<std::string()> status;
  if (server_) {
    status = [this] {
      std::vector<std::string> missing;
      const std::vector<int> joined = server_->joined_ranks();
      for (int r = 0; r < world_.world_size; ++r) {
        if (std::find(joined.begin(), joined.end(), r) == joined.end()) missing.push_back(std::to_string(r));
      }
      return "missing ranks: " + join(missing, ", ");
    };
  }
  const double left = std::max(0.1, std::chrono::duration<double>(deadline - Clock::now()).count());
  client_ =
      std::make_unique<StoreClient>(host, port, world.rank, world.world_size, world.job_token, left,
                                    std::move(on_abort), status, settings.file.empty() ? connect_hint(world) : "");
}

Rendezvous::~Rendezvous() {
  if (!finished_ && client_) client_->report_failure("it stopped with an error (see its output)");
  client_.reset();
  server_.reset();
  if (world_.rank == 0 && !settings_.file.empty()) {
    std::error_code ec;
    std::filesystem::remove(settings_.file, ec);
  }
}

std::string Rendezvous::broadcast_from_rank0(const std::string& key, const std::function<std::string()>& make) {
  if (world_.rank == 0) {
    std::string value = make();
    client_->set(key, value);
    return value;
  }
  return client_->get(key, settings_.timeout_seconds);
}

StopAgreement agree_on_stop(const std::vector<int>& reasons) {
  StopAgreement agreed;
  for (size_t r = 0; r < reasons.size(); ++r) {
    if (reasons[r] == 0) continue;
    agreed.stop = true;
    if (reasons[r] > 0 && agreed.signal == 0) {
      agreed.signal = reasons[r];
      agreed.signal_rank = static_cast<int>(r);
    }
  }
  return agreed;
}

StopAgreement Rendezvous::agree_stop(const std::string& key, int local_reason, double timeout_seconds) {
  std::vector<int> reasons;
  for (const std::string& v : client_->all_gather(key, std::to_string(local_reason), timeout_seconds)) {
    reasons.push_back(std::atoi(v.c_str()));
  }
  return agree_on_stop(reasons);
}

void Rendezvous::require_same(const std::string& key, const std::string& value, const std::string& what) {
  const std::vector<std::string> all = client_->all_gather(key, value, settings_.timeout_seconds);
  std::vector<std::string> differing;
  for (size_t r = 0; r < all.size(); ++r) {
    if (all[r] != all[0]) differing.push_back(strprintf("rank %zu has %s", r, all[r].c_str()));
  }
  if (!differing.empty()) {
    throw Error(strprintf("%s differs between ranks: rank 0 has %s, %s", what.c_str(), all[0].c_str(),
                          join(differing, ", ").c_str()));
  }
}

std::optional<RankDifference> Rendezvous::differences_from_rank0(const std::string& key, const std::string& digest,
                                                                 const std::string& text) {
  StoreClient& store = *client_;
  const double wait = settings_.timeout_seconds;
  const std::vector<std::string> digests = store.all_gather(key + "/digest", digest, wait);
  RankDifference d;
  for (size_t r = 1; r < digests.size(); ++r) {
    if (digests[r] != digests[0]) d.ranks.push_back(static_cast<int>(r));
  }
  if (d.ranks.empty()) return std::nullopt;
  // Every rank reads rank 0's text and the first differing rank's, so every rank can throw the same error.
  const int first = d.ranks[0];
  const auto text_key = [&key](int r) { return strprintf("%s/text/rank%d", key.c_str(), r); };
  if (rank() == 0 || rank() == first) store.set(text_key(rank()), text);
  d.rank0 = rank() == 0 ? text : store.get(text_key(0), wait);
  d.first = rank() == first ? text : store.get(text_key(first), wait);
  return d;
}

void Rendezvous::report_failure(const std::string& message) noexcept {
  finished_ = true;  // reported: the destructor adds nothing
  if (client_) client_->report_failure(message);
}

void Rendezvous::finish() {
  // Generous: rank 0 may still be writing the last checkpoint; a dead rank ends the wait at once.
  client_->finish(std::max(settings_.timeout_seconds, 3600.0));
  finished_ = true;
}

}  // namespace sg::dist
