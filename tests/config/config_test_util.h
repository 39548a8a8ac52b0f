#pragma once
// Shared by the config tests.
#include <string>

#include "config/config.h"

namespace sg::config {

// The ConfigError message of `f`, or "" when it does not throw.
template <class F>
std::string config_error(F&& f) {
  try {
    f();
  } catch (const config::ConfigError& e) {
    return e.what();
  }
  return "";
}

}  // namespace sg::config
