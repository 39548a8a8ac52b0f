// core/inherited_signals.h: SIGHUP's disposition at start, read once.
#include "core/inherited_signals.h"

#include <signal.h>

namespace sg {

bool hangup_ignored_at_start() {
  static const bool ignored = [] {
    struct sigaction current {};
    return ::sigaction(SIGHUP, nullptr, &current) == 0 && current.sa_handler == SIG_IGN;
  }();
  return ignored;
}

}  // namespace sg
