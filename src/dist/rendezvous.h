#pragma once
// Joining a data-parallel run: rank 0 serves the rendezvous store, every rank connects to it and waits
// until all ranks are there. Where the store is:
//   TCP (default)  MASTER_ADDR:MASTER_PORT, from the launcher (dist/world_env.h); STEPGRAPH_STORE_PORT if
//                  set, and MASTER_PORT + 1 under torchrun's agent store (TORCHELASTIC_USE_AGENT_STORE=True:
//                  torchrun's agent serves its own TCPStore on MASTER_PORT): WorldInfo::master_port
//   file           STEPGRAPH_RENDEZVOUS_FILE on a filesystem every rank sees: rank 0 opens the store on a
//                  free port (STEPGRAPH_STORE_PORT, or Slurm's MASTER_PORT, if set: WorldInfo::master_port_given)
//                  and writes "host port token world" into the file (host:
//                  MASTER_ADDR if set, else its host name); the others read it. No address or port needs
//                  to be known in advance. Use a path of its own per job (e.g. with $SLURM_JOB_ID in it):
//                  a stale file of an earlier run is skipped only when the job tokens differ.
// After the join, the store carries rank 0's NCCL unique id to the others (broadcast_from_rank0), the
// per-step stop agreement and the liveness signal (dist/store_client.h).
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "dist/store_client.h"
#include "dist/store_server.h"
#include "dist/world_env.h"

namespace sg::dist {

// Why a rank stops after a step: a signal number (SIGINT, SIGTERM, SIGHUP), kStopForOtherReason (e.g. a
// failed metrics write) or 0 (no reason).
inline constexpr int kStopForOtherReason = -1;
struct StopAgreement {
  bool stop = false;     // some rank has a reason: every rank stops after this step
  int signal = 0;        // the signal of the lowest rank that received one, else 0: every rank exits 128 + it
  int signal_rank = -1;  // that rank
};
// The agreement from every rank's reason (index = rank).
StopAgreement agree_on_stop(const std::vector<int>& reasons);
// The ranks whose value differs from rank 0's (ascending), with rank 0's text and the first of them's
// (Rendezvous::differences_from_rank0).
struct RankDifference {
  std::vector<int> ranks;
  std::string rank0, first;
};

class Rendezvous {
 public:
  // Blocks until every rank joined (or throws sg::Error: timeout naming the missing ranks on rank 0, a
  // refusal, an unreachable master, missing MASTER_ADDR/MASTER_PORT). `on_abort` defaults to
  // exit_on_peer_failure(rank).
  Rendezvous(const WorldInfo& world, const RendezvousSettings& settings, AbortHandler on_abort = {});
  ~Rendezvous();  // without finish(): the other ranks learn that this one failed
  Rendezvous(const Rendezvous&) = delete;
  Rendezvous& operator=(const Rendezvous&) = delete;

  const WorldInfo& world() const { return world_; }
  int rank() const { return world_.rank; }
  int world_size() const { return world_.world_size; }
  StoreClient& store() { return *client_; }
  // "tcp 10.0.0.1:29500" or "file /shared/rdzv (node7:41231)".
  const std::string& where() const { return where_; }

  // Rank 0 computes the value; every rank returns it.
  std::string broadcast_from_rank0(const std::string& key, const std::function<std::string()>& make);
  // Every rank's reason to stop (one all-gather through the store), agreed by agree_on_stop.
  StopAgreement agree_stop(const std::string& key, int local_reason, double timeout_seconds);
  // Throws sg::Error on every rank, naming the ranks and values, unless all ranks pass the same value.
  void require_same(const std::string& key, const std::string& value, const std::string& what);
  // require_same's digest form, for values too large to all-gather (a configuration, weight fingerprints): the ranks
  // whose `text` differs from rank 0's, by its `digest` (all-gathered under `key`), with rank 0's text and the first
  // of them's; nullopt when none differs. Only on a difference do the two texts go through the store, so that every
  // rank can build the same error from them. Collective.
  std::optional<RankDifference> differences_from_rank0(const std::string& key, const std::string& digest,
                                                       const std::string& text);

  void report_failure(const std::string& message) noexcept;
  void finish();  // normal end of this rank: a barrier with every other rank

 private:
  WorldInfo world_;
  RendezvousSettings settings_;
  std::unique_ptr<StoreServer> server_;  // rank 0
  std::unique_ptr<StoreClient> client_;
  std::string where_;
  bool finished_ = false;
};

}  // namespace sg::dist
