// Exceptions thrown by megamoe. Each carries the facts a user needs as fields, and a
// what() message that names them.
#pragma once
#include <stdexcept>
#include <string>
#include <vector>

namespace megamoe {

struct Error : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// A config that breaks the schema: names the file, the JSON path, the value and what was expected.
struct ConfigError : Error {
  ConfigError(std::string file, std::string json_path, std::string value, std::string expected);
  // A config that could not be found: its name (value), where it was looked for (expected).
  static ConfigError not_found(std::string name, std::string looked_in);
  std::string file, json_path, value, expected;

 private:
  ConfigError(std::string message, std::string file, std::string json_path, std::string value, std::string expected);
};

// An argument that is not what a call takes: names the argument (field), what it was (value) and
// what was expected (a checkpoint's tensor of the wrong shape for its layout, say).
struct InputError : Error {
  InputError(std::string field, std::string value, std::string expected);
  std::string field, value, expected;
};

// A kernel that did not compile. The rendered source was saved at source_path.
struct CompileError : Error {
  CompileError(std::string kernel_name, std::string key, std::vector<std::string> options,
               std::string log, std::string source_path);
  std::string kernel_name, key;
  std::vector<std::string> options;
  std::string log, source_path;
};

// A GPU driver or device failure; NoGpuError when no driver or no device is present.
struct DeviceError : Error {
  using Error::Error;
};
struct NoGpuError : DeviceError {
  using DeviceError::DeviceError;
};

// A wait for another rank of an expert-parallel group that did not end within the runtime's
// timeout (RuntimeOptions::timeout_ms). Raised at the next sync point (Runtime::take_errors) on
// the rank whose kernel waited; names the rank it waited for and the phase of the call.
// Every rank of the group must then call Runtime::recover() before its next call (docs/ep.md).
struct PeerTimeoutError : Error {
  PeerTimeoutError(int rank, int peer, std::string phase, int timeout_ms);
  int rank, peer;
  std::string phase;  // "counts", "rows", "layout" or "outputs"
  int timeout_ms;
};

}  // namespace megamoe
