// megamoe's public API at a glance.
//   config.hpp   configs (configs/*.json), buckets, kernel paths, load_config()
//   weights.hpp  MXFP4 expert weights, quantization from fp32/bf16
//   runtime.hpp  Runtime: prepare_weights(), forward(), take_errors()
//   device.hpp   the GPU interface of the cuda and hip backends
//   errors.hpp   ConfigError, InputError, CompileError, DeviceError, NoGpuError, PeerTimeoutError
#pragma once
#include "megamoe/config.hpp"
#include "megamoe/device.hpp"
#include "megamoe/errors.hpp"
#include "megamoe/runtime.hpp"
#include "megamoe/weights.hpp"
