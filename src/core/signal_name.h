#pragma once
// A signal as messages name it: the stop signals by name ("SIGTERM"), any other by number ("signal 11").
#include <csignal>
#include <string>

namespace sg {

inline std::string signal_name(int signal_number) {
  switch (signal_number) {
    case SIGINT: return "SIGINT";
    case SIGTERM: return "SIGTERM";
    case SIGHUP: return "SIGHUP";
    default: return "signal " + std::to_string(signal_number);
  }
}

}  // namespace sg
