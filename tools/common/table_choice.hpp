// The bucket table a tool's runtimes take (docs/configs.md, "A table per card"), chosen once
// before the tool edits the config (a weight source, an entry), so that its edits land on the
// table that runs.
#pragma once
#include <string>

#include "megamoe/config.hpp"
#include "megamoe/device.hpp"

namespace megamoe::workload {

struct ToolTable {
  Config config;       // narrowed to the table (with_table)
  std::string option;  // for RuntimeOptions::bucket_table: --bucket-table's (the config holds that one table)
  std::string line;    // which table and why, for the tool's header
};

// The name of GPU `device` as the driver gives it (opens the GPU: NoGpuError where there is none).
std::string gpu_card(BackendKind backend, int device);

// `asked` (--bucket-table) where given, else the table of `card`, else the default.
ToolTable pick_table(Config config, const std::string& asked, const std::string& card);

}  // namespace megamoe::workload
