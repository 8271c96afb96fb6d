// megamoe-tune's tactic space: every knob the Hopper path's kernels read per bucket, the values
// worth timing for a bucket's rows per expert, and the shape contract's pruning (check_bucket:
// a candidate the config would refuse is never compiled or timed).
//   table-wide: x_scale, h_scale and the combine wire (over several ranks every bucket must take
//               the same: docs/layer.md), chosen once for the whole table;
//   per bucket: each stage's token tile and weight tile, and the weight source; over several
//               ranks also the dispatch knobs (blocks, persistent, stride), timed on the group.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "megamoe/config.hpp"

namespace megamoe::tune {

// What the search may try beyond the tiles.
struct SpaceOptions {
  bool fp8_resident = true;  // the weight source (false: each bucket's stays the start's)
  bool fp8_wire = true;      // the combine wire (false: the start's)
  bool modes = true;         // the x and h scale modes (false: the start's)
};

// The table-wide arithmetic: x's and h's scale modes and the combine wire.
struct Modes {
  XScale x = XScale::per_block;
  HScale h = HScale::per_block;
  CombineWire wire = CombineWire::bf16;
  bool operator==(const Modes& o) const { return x == o.x && h == o.h && wire == o.wire; }
};
Modes modes_of(const BucketConfig& b);
std::string to_string(const Modes& m);  // "x row, h static, wire bf16"
// "x=row,h=static,wire=bf16" (each part once, any order; a part left out keeps `base`'s), or an
// Error naming the part and what it allows.
Modes parse_modes(const std::string& text, const Modes& base);

// The modes to try: `start` first, then x block and row, h block and (for a bounded activation)
// static, with the starting wire; then the other wire (where allowed) with the best of those. A
// static h for an unbounded activation (SiLU) is pruned here, with its reason in `pruned`.
std::vector<Modes> mode_candidates(const Config& config, const Modes& start, const SpaceOptions& space,
                                   std::vector<std::string>* pruned = nullptr);
std::vector<Modes> wire_candidates(const Modes& best, const SpaceOptions& space);

// `b` with modes `m`, each stage's tiles narrowed to what its form allows (a 256-row weight tile
// becomes 128 where the form refuses it; a token tile past the form's widest becomes the widest).
BucketConfig with_modes(const Config& config, BucketConfig b, const Modes& m);
// `b` reading `w`, its tiles narrowed likewise.
BucketConfig with_weights(const Config& config, BucketConfig b, WeightSource w);

// Routed rows an expert takes at bucket `bucket` of the table's keys (tokens x topk / the keys'
// experts a rank) on average, and the busiest of the rank's experts under uniform routing
// (the mean plus three standard deviations of its binomial count).
double mean_rows_per_expert(const Config& config, int bucket);
double busiest_rows_per_expert(const Config& config, int bucket);

// The token tiles worth timing at a bucket: the eight widest multiples of 16 up to the busiest
// expert's rows rounded up to 16, plus 16, and at most 256 (wider tiles than an expert's rows
// only waste the tile; narrower ones than these need more tiles an expert, each streaming its
// whole weight slice).
std::vector<int> token_tiles(const Config& config, int bucket);

enum class Knob { stage1, stage2, weights, dispatch_blocks, dispatch_persistent, dispatch_stride };
std::string_view to_string(Knob k);

struct Pruned {
  BucketConfig entry;
  std::string why;  // the ConfigError's text
};

// The entries that differ from `incumbent` in `knob` alone, each passing the shape contract for
// `config` (those that fail go to `pruned` with the contract's reason). stage1 / stage2: every
// token tile of token_tiles() with weight tiles 128 and 256; weights: the other weight source,
// its tiles narrowed (none where space.fp8_resident is off: the source stays the start's);
// dispatch_blocks: kDispatchBlocks; dispatch_persistent: the other setting; dispatch_stride:
// kDispatchStrides.
std::vector<BucketConfig> candidates(const Config& config, const BucketConfig& incumbent, Knob knob,
                                     const SpaceOptions& space, std::vector<Pruned>* pruned = nullptr);

// The dispatch knobs' values worth timing: blocks that send (the kernels round them up to whole
// clusters and cap them at the grid, so a value past the grid times as the grid), and tokens a
// warp sends per step.
inline constexpr int kDispatchBlocks[] = {8, 16, 32, 64, 96, 128};
inline constexpr int kDispatchStrides[] = {1, 2, 4};

// Tokens a rank passes in a call that takes table key `bucket` at `world` (each rank holding
// model.experts / world experts): the most that key covers, or 0 where no call of 1 to
// kMaxBucket tokens takes it (a key below what one token gives, such as bucket 1 of Kimi-K3's
// table at EP16, or above what the most tokens give).
std::int64_t tokens_at_world(const Config& model, int world, int bucket);

// Whether `b` passes the contract for `config`; the reason where it does not.
bool allowed(const Config& config, const BucketConfig& b, std::string* why = nullptr);

}  // namespace megamoe::tune
