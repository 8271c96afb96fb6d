#include "common/table_choice.hpp"

#include <utility>

namespace megamoe::workload {

std::string gpu_card(BackendKind backend, int device) { return open_device(backend, device)->name(); }

ToolTable pick_table(Config config, const std::string& asked, const std::string& card) {
  const TableChoice choice = choose_table(config, card, asked);
  ToolTable t;
  t.config = with_chosen_table(std::move(config), choice);
  t.option = asked;  // the runtimes take the narrowed config's one table; named only where the user named it
  t.line = choice.note;
  return t;
}

}  // namespace megamoe::workload
