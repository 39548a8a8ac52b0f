#pragma once
// The rendezvous store's messages (dist/socket.h frames). One connection per rank stays open for the
// whole run: it carries the rendezvous, small collectives of the host (stop agreement, capture check)
// and the liveness signal — a rank whose connection closes without BYE has failed, and the server tells
// every other rank at once (ABORT), so no rank waits forever in a collective for a dead peer.
#include <cstdint>

namespace sg::dist {

enum class StoreMessage : uint8_t {
  // rank -> server
  hello = 1,       // i32 rank, i32 world size, str job token
  set = 2,         // str key, str value
  get = 3,         // str key               (answered with value once the key is set)
  all_gather = 4,  // str key, str value    (answered with gathered once every rank sent the key)
  fail = 5,        // str message           (this rank failed: the server aborts the others)
  bye = 6,         // this rank finished normally (answered with done once every rank said bye)
  // server -> rank
  ready = 20,      // every rank joined
  value = 21,      // str key, str value
  gathered = 22,   // str key, i32 count, count x str (rank order)
  abort = 23,      // i32 failed rank, str message
  done = 24,       // every rank finished
  error = 25,      // str message: this rank's hello was refused
};

// The exit status of a rank that ended because ANOTHER rank failed (launchers report the failing
// rank's own status instead: dist/local_launcher.h).
inline constexpr int kPeerFailedExitCode = 70;

}  // namespace sg::dist
