#include "search_spaces/space/search_space.h"

#include <algorithm>

namespace meshtune::search_spaces {
namespace {

std::string Show(int64_t v) { return std::to_string(v); }
std::string Show(bool v) { return v ? "true" : "false"; }
std::string Show(const Recompute& r) { return ToString(r); }

template <typename T>
std::string ShowList(const std::vector<T>& values) {
  std::string out;
  for (size_t i = 0; i < values.size(); ++i) {
    if (i > 0) out += ",";
    out += Show(static_cast<T>(values[i]));
  }
  return out;
}

Status Contradiction(const std::string& axis, const std::string& flags,
                     const std::string& file) {
  return Status::InvalidArgument(
      "contradictory pins: " + axis + " " + flags + " (command line) and " +
          file + " (search space file)",
      "drop the command-line pin or pick a value the search space file "
      "allows");
}

// Both sides pinned: keep the file's values that the flags also allow, in
// the file's order. Either side empty ("any"): the other side.
template <typename T>
Status IntersectAxis(const std::string& axis, const std::vector<T>& file,
                     const std::vector<T>& flags, std::vector<T>* out) {
  if (file.empty() || flags.empty()) {
    *out = file.empty() ? flags : file;
    return Status::Ok();
  }
  std::vector<T> both;
  for (size_t i = 0; i < file.size(); ++i) {
    const T v = file[i];
    if (std::find(flags.begin(), flags.end(), v) != flags.end() &&
        std::find(both.begin(), both.end(), v) == both.end()) {
      both.push_back(v);
    }
  }
  if (both.empty()) return Contradiction(axis, ShowList(flags), ShowList(file));
  *out = std::move(both);
  return Status::Ok();
}

// Recompute pins intersect with the full-recompute wildcard (num_layers 0)
// matching every full variant: {full:any} ∩ {full:block:2} = {full:block:2}.
Status IntersectRecompute(const std::vector<Recompute>& file,
                          const std::vector<Recompute>& flags,
                          std::vector<Recompute>* out) {
  if (file.empty() || flags.empty()) {
    *out = file.empty() ? flags : file;
    return Status::Ok();
  }
  std::vector<Recompute> both;
  auto add = [&both](const Recompute& r) {
    if (std::find(both.begin(), both.end(), r) == both.end()) {
      both.push_back(r);
    }
  };
  for (const Recompute& a : file) {
    for (const Recompute& b : flags) {
      if (a.granularity != b.granularity) continue;
      if (a.granularity != RecomputeGranularity::kFull) {
        add(a);
      } else if (a.num_layers <= 0) {
        add(b);
      } else if (b.num_layers <= 0 || a == b) {
        add(a);
      }
    }
  }
  if (both.empty()) {
    return Contradiction("recompute", ShowList(flags), ShowList(file));
  }
  *out = std::move(both);
  return Status::Ok();
}

}  // namespace

StatusOr<SearchSpace> SearchSpace::Merge(const SearchSpace& file,
                                         const SearchSpace& flags) {
  SearchSpace out;
  MESHTUNE_RETURN_IF_ERROR(
      IntersectAxis("tensor_model_parallel_size", file.tp, flags.tp, &out.tp));
  MESHTUNE_RETURN_IF_ERROR(IntersectAxis("pipeline_model_parallel_size",
                                         file.pp, flags.pp, &out.pp));
  MESHTUNE_RETURN_IF_ERROR(IntersectAxis("virtual_pipeline_model_parallel_size",
                                         file.vpp, flags.vpp, &out.vpp));
  MESHTUNE_RETURN_IF_ERROR(
      IntersectAxis("context_parallel_size", file.cp, flags.cp, &out.cp));
  MESHTUNE_RETURN_IF_ERROR(
      IntersectAxis("expert_model_parallel_size", file.ep, flags.ep, &out.ep));
  MESHTUNE_RETURN_IF_ERROR(IntersectAxis("expert_tensor_parallel_size",
                                         file.etp, flags.etp, &out.etp));
  MESHTUNE_RETURN_IF_ERROR(
      IntersectAxis("data_parallel_size", file.dp, flags.dp, &out.dp));
  MESHTUNE_RETURN_IF_ERROR(
      IntersectAxis("micro_batch_size", file.mbs, flags.mbs, &out.mbs));
  MESHTUNE_RETURN_IF_ERROR(
      IntersectAxis("sequence_parallel", file.sp, flags.sp, &out.sp));
  MESHTUNE_RETURN_IF_ERROR(IntersectAxis("use_distributed_optimizer",
                                         file.dist_opt, flags.dist_opt,
                                         &out.dist_opt));
  MESHTUNE_RETURN_IF_ERROR(
      IntersectRecompute(file.recompute, flags.recompute, &out.recompute));
  // Limits (not pins): a value the command line changed from the default wins
  // over the file's ("flags over file").
  const SearchSpace defaults;
  out.max_tp = flags.max_tp != defaults.max_tp ? flags.max_tp : file.max_tp;
  out.max_mbs =
      flags.max_mbs != defaults.max_mbs ? flags.max_mbs : file.max_mbs;
  return out;
}

}  // namespace meshtune::search_spaces
