// Messages of megamoe's exceptions.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include "megamoe/errors.hpp"

namespace megamoe {

ConfigError::ConfigError(std::string file_, std::string json_path_, std::string value_,
                         std::string expected_)
    : Error(fmt::format("megamoe: config {}: {}: got {}, expected {}", file_, json_path_, value_,
                        expected_)),
      file(std::move(file_)),
      json_path(std::move(json_path_)),
      value(std::move(value_)),
      expected(std::move(expected_)) {}

ConfigError::ConfigError(std::string message, std::string file_, std::string json_path_, std::string value_,
                         std::string expected_)
    : Error(std::move(message)),
      file(std::move(file_)),
      json_path(std::move(json_path_)),
      value(std::move(value_)),
      expected(std::move(expected_)) {}

InputError::InputError(std::string field_, std::string value_, std::string expected_)
    : Error(fmt::format("megamoe: {}: {}, expected {}", field_, value_, expected_)),
      field(std::move(field_)),
      value(std::move(value_)),
      expected(std::move(expected_)) {}

ConfigError ConfigError::not_found(std::string name, std::string looked_in) {
  std::string message = fmt::format("megamoe: no config named '{}' ({})", name, looked_in);
  return ConfigError(std::move(message), "", "", std::move(name), std::move(looked_in));
}

CompileError::CompileError(std::string kernel_name_, std::string key_,
                           std::vector<std::string> options_, std::string log_,
                           std::string source_path_)
    : Error(fmt::format("megamoe: kernel {} (key {}) failed to compile; options: {}; source saved "
                        "at {}; compiler log:\n{}",
                        kernel_name_, key_, fmt::join(options_, " "), source_path_, log_)),
      kernel_name(std::move(kernel_name_)),
      key(std::move(key_)),
      options(std::move(options_)),
      log(std::move(log_)),
      source_path(std::move(source_path_)) {}

PeerTimeoutError::PeerTimeoutError(int rank_, int peer_, std::string phase_, int timeout_ms_)
    : Error(fmt::format("megamoe: rank {} waited more than {} ms for rank {} ({} phase of a call); every rank "
                        "must call Runtime::recover() before its next call",
                        rank_, timeout_ms_, peer_, phase_)),
      rank(rank_),
      peer(peer_),
      phase(std::move(phase_)),
      timeout_ms(timeout_ms_) {}

}  // namespace megamoe
