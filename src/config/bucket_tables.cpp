// A config's bucket tables, one per card it was tuned on: which one a runtime takes.
#include "config/bucket_tables.hpp"

#include <fmt/format.h>

#include "megamoe/errors.hpp"

namespace megamoe {

std::vector<BucketTable> tables_of(const Config& c) {
  if (!c.tables.empty()) return c.tables;
  return {{c.table, c.buckets}};
}

std::string table_name(std::string_view card) { return card.empty() ? "default" : std::string(card); }

namespace {

std::string table_label(const BucketTable& t, bool is_default) {
  if (t.card.empty()) return "the default table (no card named)";
  return is_default ? fmt::format("{} (the default)", t.card) : t.card;
}

std::string table_list(const std::vector<BucketTable>& tables) {
  std::string s;
  for (std::size_t i = 0; i < tables.size(); ++i) s += (i ? "; " : "") + table_label(tables[i], i == 0);
  return s;
}

// Index into `tables` of the one named `card` ("default": the first), or -1.
int find_table(const std::vector<BucketTable>& tables, std::string_view card) {
  if (card == "default") return 0;
  for (std::size_t i = 0; i < tables.size(); ++i)
    if (!tables[i].card.empty() && tables[i].card == card) return int(i);
  return -1;
}

// find_table, or an Error naming the tables the config holds.
std::size_t table_index(const Config& c, const std::vector<BucketTable>& tables, std::string_view card) {
  const int i = find_table(tables, card);
  if (i < 0)
    throw Error(fmt::format("megamoe: config {} has no bucket table for '{}': it holds {}; name one of them, or "
                            "\"default\"",
                            c.name, card, table_list(tables)));
  return std::size_t(i);
}

// The config's buckets differ from the table they came from (`tables`: tables_of(c)).
bool edited(const Config& c, const std::vector<BucketTable>& tables) {
  for (const BucketTable& t : tables)
    if (t.card == c.table) return t.buckets != c.buckets;
  return true;
}

}  // namespace

Config with_table(Config config, std::string_view card) {
  const std::vector<BucketTable> tables = tables_of(config);
  const BucketTable t = tables[table_index(config, tables, card)];
  config.buckets = t.buckets;
  config.table = t.card;
  config.tables = {t};
  return config;
}

Config with_card_table(Config config, const std::string& card, const std::array<BucketConfig, kBucketCount>& table) {
  if (card.empty() || card == "default")
    throw Error(fmt::format("megamoe: a card table needs a card's name, got '{}'", card));
  std::vector<BucketTable> tables = tables_of(config);
  const int i = find_table(tables, card);
  if (i >= 0)
    tables[std::size_t(i)].buckets = table;
  else
    tables.push_back({card, table});
  config.tables = std::move(tables);
  config.buckets = table;
  config.table = card;
  return config;
}

TableChoice choose_table(const Config& config, std::string_view card, std::string_view asked) {
  const std::vector<BucketTable> tables = tables_of(config);
  TableChoice c;
  c.card = std::string(card);
  if (edited(config, tables)) {
    if (!asked.empty() && tables[table_index(config, tables, asked)].card != config.table)
      throw Error(fmt::format("megamoe: RuntimeOptions.bucket_table = '{}', but config {}'s buckets were edited in "
                              "code from its table '{}': pick the table with with_table before editing it",
                              asked, config.name, table_name(config.table)));
    c.table = config.table;
    c.edited = true;
    c.note = "bucket table: the config's buckets as edited in code";
    return c;
  }
  if (!asked.empty()) {
    const std::size_t i = table_index(config, tables, asked);
    c.table = tables[i].card;
    c.note = fmt::format("bucket table: {}, as RuntimeOptions.bucket_table names it (this GPU: {})",
                         table_label(tables[i], i == 0), card);
    c.warn = !c.table.empty() && c.table != card;
    return c;
  }
  if (const int i = find_table(tables, card); i >= 0 && !card.empty()) {
    c.table = tables[std::size_t(i)].card;
    c.note = fmt::format("bucket table: {}'s own", card);
    return c;
  }
  c.table = tables[0].card;
  if (card.empty()) {
    c.note = "bucket table: the default (no GPU here names a card)";
    return c;
  }
  if (c.table.empty() && tables.size() == 1) {
    c.note = "bucket table: the config's one (it names no card)";
    return c;
  }
  c.warn = true;
  c.note = fmt::format("bucket table: the default{}: config {} has none for {} (it holds {}), so its buckets may run "
                       "slower here than a table tuned on this card would; megamoe-tune writes one",
                       c.table.empty() ? "" : ", tuned on " + c.table, config.name, card, table_list(tables));
  return c;
}

Config with_chosen_table(Config config, const TableChoice& choice) {
  if (choice.edited) return config;
  return with_table(std::move(config), table_name(choice.table));
}

std::vector<Config> configs_for_tables(const Config& config, std::string_view card) {
  if (!card.empty()) return {with_table(config, card)};
  std::vector<Config> all;
  for (const BucketTable& t : tables_of(config)) all.push_back(with_table(config, table_name(t.card)));
  return all;
}

}  // namespace megamoe
