#pragma once
// Minimal leveled logging to stderr; stdout is kept for command results (YAML, JSON, tables).
#include <string>

#include "core/strings.h"

namespace sg::log {

enum class Level { debug = 0, info = 1, warn = 2, error = 3 };

void set_level(Level level);
Level level();
void write(Level level, const std::string& message);

inline void info(const std::string& message) { write(Level::info, message); }
inline void warn(const std::string& message) { write(Level::warn, message); }
inline void error(const std::string& message) { write(Level::error, message); }
inline void debug(const std::string& message) {
  if (level() <= Level::debug) write(Level::debug, message);
}

}  // namespace sg::log
