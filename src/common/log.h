// Minimal leveled logging to stderr; the server and CLI share it so output stays uniform.
#pragma once
#include <string>

namespace rapid::log {
enum class Level { Debug = 0, Info = 1, Warn = 2, Error = 3 };
void set_level(Level l);
Level level();
void write(Level l, const std::string& msg);
inline void debug(const std::string& m) { write(Level::Debug, m); }
inline void info(const std::string& m) { write(Level::Info, m); }
inline void warn(const std::string& m) { write(Level::Warn, m); }
inline void error(const std::string& m) { write(Level::Error, m); }
}  // namespace rapid::log
