// megamoe's public API at a glance.
//   config.hpp   configs (configs/*.json), buckets, load_config()
//   runtime.hpp  Runtime: the run-time entry point
//   device.hpp   the GPU interface of the cuda and hip backends
//   errors.hpp   ConfigError, CompileError, DeviceError, NoGpuError
#pragma once
#include "megamoe/config.hpp"
#include "megamoe/device.hpp"
#include "megamoe/errors.hpp"
#include "megamoe/runtime.hpp"
