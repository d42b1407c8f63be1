// RankGrid: Megatron-Core rank order and group placement on nodes.
//
// Megatron-Core (megatron/core/parallel_state.py, RankGenerator and
// generate_masked_orthogonal_rank_groups) lays ranks out in the order
// "tp-cp-ep-dp-pp", tp fastest. The dense generator has ep = 1, so its grid is
// tp × cp × dp × pp; the expert generator has cp = 1 and tp = etp, so its
// grid is etp × ep × edp × pp with edp = tp·cp·dp/(etp·ep) (world %
// (etp·ep·pp) == 0 there).
//
// Every group kind we use masks a run of *adjacent* axes of one of these
// grids (tp; cp; dp; cp-dp; tp-cp; pp; etp; ep; edp). The members of such a
// group therefore form an arithmetic progression {base + c·stride : c <
// size}, where stride is the product of the sizes of the axes below the run.
// That makes groups and their placement cheap to compute without
// materialising the whole grid.
#include "search_spaces/rank_grid.h"

#include <algorithm>
#include <cstdint>
#include <numeric>

#include "search_spaces/status.h"

namespace meshtune::search_spaces {
namespace {

// A group kind as an arithmetic progression in rank space.
struct Progression {
  int64_t stride;  // distance between consecutive members
  int64_t size;    // members per group
};

// How the members {x + c·stride : c < size} fall into buckets of `bucket`
// consecutive ranks (nodes or NVLink domains).
struct Spread {
  int64_t buckets;         // distinct buckets touched
  int64_t max_per_bucket;  // most members in one bucket
};

// Distinct buckets touched; O(1).
int64_t BucketsOf(int64_t x, int64_t stride, int64_t size, int64_t bucket) {
  if (size == 1) return 1;
  // Members at least a bucket apart never share a bucket.
  if (stride >= bucket) return size;
  // Steps shorter than a bucket visit consecutive buckets without gaps.
  return (x + (size - 1) * stride) / bucket - x / bucket + 1;
}

// Buckets and the most members in one; O(min(buckets, stride)).
Spread SpreadOf(int64_t x, int64_t stride, int64_t size, int64_t bucket) {
  if (size == 1) return {1, 1};
  if (stride >= bucket) return {size, 1};
  const int64_t first = x / bucket;
  const int64_t last = (x + (size - 1) * stride) / bucket;
  // Members c with k·bucket <= x + c·stride < (k+1)·bucket.
  auto count = [&](int64_t k) {
    const int64_t lo_num = k * bucket - x;
    const int64_t hi_num = (k + 1) * bucket - x;
    const int64_t lo = lo_num <= 0 ? 0 : (lo_num + stride - 1) / stride;
    const int64_t hi = std::min(size - 1, (hi_num + stride - 1) / stride - 1);
    return hi - lo + 1;
  };
  // Interior buckets repeat their count with a period dividing `stride`
  // ((k·bucket − x) mod stride cycles), so the first stride + 1 of them and
  // the last bucket cover every count.
  int64_t max_count = count(last);
  const int64_t stop = std::min(last - 1, first + stride + 1);
  for (int64_t k = first; k <= stop; ++k) {
    max_count = std::max(max_count, count(k));
  }
  return {last - first + 1, max_count};
}

// Orders placements from best to worst: more nodes is worse, then more NVLink
// domains, then fewer members sharing a node (less traffic stays local).
bool WorsePlacement(const GroupPlacement& a, const GroupPlacement& b) {
  if (a.nodes != b.nodes) return a.nodes > b.nodes;
  if (a.nvlink_domains != b.nvlink_domains) {
    return a.nvlink_domains > b.nvlink_domains;
  }
  return a.ranks_per_node < b.ranks_per_node;
}

}  // namespace

const char* ToString(GroupKind k) {
  switch (k) {
    case GroupKind::kTp:
      return "tp";
    case GroupKind::kCp:
      return "cp";
    case GroupKind::kDp:
      return "dp";
    case GroupKind::kDpCp:
      return "dp_cp";
    case GroupKind::kPp:
      return "pp";
    case GroupKind::kEp:
      return "ep";
    case GroupKind::kEdp:
      return "edp";
    case GroupKind::kTpCp:
      return "tp_cp";
    case GroupKind::kEtp:
      return "etp";
  }
  return "unknown";
}

RankGrid::RankGrid(const ParallelConfig& config, int64_t gpus_per_node,
                   int64_t nvlink_domain_gpus)
    : config_(config),
      world_(config.world()),
      gpus_per_node_(gpus_per_node),
      nvlink_domain_gpus_(nvlink_domain_gpus) {
  MESHTUNE_CHECK(config.tp >= 1 && config.pp >= 1 && config.cp >= 1 &&
                 config.dp >= 1 && config.ep >= 1 && config.expert_tp() >= 1);
  MESHTUNE_CHECK(gpus_per_node >= 1 && nvlink_domain_gpus >= 1);
  // The expert grid needs edp = tp·cp·dp/(etp·ep) to be whole
  // (parallel_state.py raises when world is not divisible by etp·ep·pp).
  MESHTUNE_CHECK((config.tp * config.cp * config.dp) %
                     (config.expert_tp() * config.ep) ==
                 0);
}

namespace {

Progression ProgressionOf(const ParallelConfig& c, GroupKind kind) {
  switch (kind) {
    case GroupKind::kTp:
      return {1, c.tp};
    case GroupKind::kCp:
      return {c.tp, c.cp};
    case GroupKind::kDp:
      return {c.tp * c.cp, c.dp};
    case GroupKind::kDpCp:
      return {c.tp, c.cp * c.dp};
    case GroupKind::kTpCp:
      return {1, c.tp * c.cp};
    case GroupKind::kPp:
      return {c.tp * c.cp * c.dp, c.pp};
    // Expert grid etp-ep-edp-pp (Megatron's expert RankGenerator, order
    // tp-ep-dp-pp with tp = etp and cp = 1).
    case GroupKind::kEtp:
      return {1, c.expert_tp()};
    case GroupKind::kEp:
      return {c.expert_tp(), c.ep};
    case GroupKind::kEdp:
      return {c.expert_tp() * c.ep,
              c.tp * c.cp * c.dp / (c.expert_tp() * c.ep)};
  }
  MESHTUNE_CHECK(false);
  return {1, 1};
}

}  // namespace

std::vector<std::vector<int64_t>> RankGrid::Groups(GroupKind kind) const {
  const Progression p = ProgressionOf(config_, kind);
  const int64_t block = p.stride * p.size;  // ranks covered by one run
  std::vector<std::vector<int64_t>> groups;
  groups.reserve(world_ / p.size);
  // Megatron numbers groups by the unmasked coordinates, fastest axis first:
  // the offset below the run (low) varies fastest, then the block (high).
  for (int64_t high = 0; high < world_ / block; ++high) {
    for (int64_t low = 0; low < p.stride; ++low) {
      std::vector<int64_t> members(p.size);
      for (int64_t c = 0; c < p.size; ++c) {
        members[c] = high * block + low + c * p.stride;
      }
      groups.push_back(std::move(members));
    }
  }
  return groups;
}

std::vector<int64_t> RankGrid::GroupOf(GroupKind kind, int64_t rank) const {
  MESHTUNE_CHECK(rank >= 0 && rank < world_);
  const Progression p = ProgressionOf(config_, kind);
  const int64_t block = p.stride * p.size;
  const int64_t base = (rank / block) * block + rank % p.stride;
  std::vector<int64_t> members(p.size);
  for (int64_t c = 0; c < p.size; ++c) members[c] = base + c * p.stride;
  return members;
}

GroupPlacement RankGrid::Placement(GroupKind kind) const {
  const Progression p = ProgressionOf(config_, kind);
  const int64_t gpn = gpus_per_node_;
  const int64_t domain = nvlink_domain_gpus_;
  GroupPlacement worst;
  worst.size = p.size;
  // Members a node (domain) apart each sit on their own node (domain),
  // whichever group it is.
  const bool nodes_fixed = p.size == 1 || p.stride >= gpn;
  const bool domains_fixed = p.size == 1 || p.stride >= domain;
  if (nodes_fixed && domains_fixed) {
    worst.nodes = p.size;
    worst.ranks_per_node = 1;
    worst.nvlink_domains = p.size;
    return worst;
  }
  // Otherwise a group's placement depends only on its base x modulo the
  // bucket sizes that still matter (shifting x by a multiple of them moves
  // every member by whole buckets), so look at one base per residue. Bases
  // are x = high·block + low with low < stride.
  const int64_t period = nodes_fixed     ? domain
                         : domains_fixed ? gpn
                                         : std::lcm(gpn, domain);
  const int64_t block = p.stride * p.size;
  // The worst any base can do: a span of `reach` ranks touches at most
  // (bucket − 1 + reach − 1)/bucket + 1 buckets, and n nodes hold at least
  // ceil(size/n) members on one of them. Reaching it ends the search early.
  const int64_t reach = (p.size - 1) * p.stride + 1;
  const int64_t max_nodes = std::min(p.size, (gpn - 1 + reach - 1) / gpn + 1);
  const int64_t max_domains =
      std::min(p.size, (domain - 1 + reach - 1) / domain + 1);
  const int64_t min_ranks_per_node = (p.size + max_nodes - 1) / max_nodes;
  bool first = true;
  // Returns true when `x` reaches the bound.
  auto consider = [&](int64_t x) {
    GroupPlacement g;
    g.size = p.size;
    const Spread nodes = SpreadOf(x, p.stride, p.size, gpn);
    g.nodes = nodes.buckets;
    g.ranks_per_node = nodes.max_per_bucket;
    g.nvlink_domains = BucketsOf(x, p.stride, p.size, domain);
    if (first || WorsePlacement(g, worst)) worst = g;
    first = false;
    return worst.nodes == max_nodes && worst.nvlink_domains == max_domains &&
           worst.ranks_per_node == min_ranks_per_node;
  };
  if (p.stride >= period) {
    // The offsets below the run alone reach every residue.
    for (int64_t x = 0; x < period; ++x) {
      if (consider(x)) break;
    }
    return worst;
  }
  // high·block cycles modulo period after period / gcd(block, period) blocks.
  const int64_t highs =
      std::min(world_ / block, period / std::gcd(block, period));
  // Residues already looked at (periods up to 4096 GPUs; beyond that some
  // bases are looked at twice, which costs time but not correctness).
  constexpr int64_t kWords = 64;
  uint64_t seen[kWords];
  const bool track = period <= 64 * kWords;
  const int64_t words = track ? (period + 63) / 64 : 0;
  std::fill(seen, seen + words, uint64_t{0});
  for (int64_t high = 0; high < highs; ++high) {
    for (int64_t low = 0; low < p.stride; ++low) {
      const int64_t x = high * block + low;
      if (track) {
        const int64_t r = x % period;
        const uint64_t bit = uint64_t{1} << (r % 64);
        if (seen[r / 64] & bit) continue;
        seen[r / 64] |= bit;
      }
      if (consider(x)) return worst;
    }
  }
  return worst;
}

RankGrid::Coord RankGrid::CoordOf(int64_t rank) const {
  MESHTUNE_CHECK(rank >= 0 && rank < world_);
  Coord c;
  c.tp = rank % config_.tp;
  c.cp = (rank / config_.tp) % config_.cp;
  c.dp = (rank / (config_.tp * config_.cp)) % config_.dp;
  c.pp = rank / (config_.tp * config_.cp * config_.dp);
  return c;
}

}  // namespace meshtune::search_spaces
