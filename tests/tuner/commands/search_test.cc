// `tune search` with --memory-headroom (a plan that fit no longer does), the
// JSON near_capacity flag of every candidate, and the --etp pin, run in
// process.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

#include "costmodel/datasheet_calibration.h"
#include "search_spaces/cluster_spec.h"
#include "tests/tuner/tune_in_process.h"
#include "tuner/inputs/inputs.h"
#include "tuner/search/search_driver.h"

namespace meshtune::tuner {
namespace {

using nlohmann::json;
using testing::InProcessRun;
using testing::Tune;

json SearchJson(const std::vector<std::string>& extra) {
  std::vector<std::string> args = {"search", "--model", "gpt3-1.3b", "--gpus",
                                   "8",      "--gpu",   "a100-80g",  "--top",
                                   "100000", "--json",  "--no-db"};
  args.insert(args.end(), extra.begin(), extra.end());
  const InProcessRun run = Tune(args);
  EXPECT_EQ(run.exit_code, 0) << run.err;
  return json::parse(run.out);
}

TEST(SearchMemoryHeadroom, HeadroomRemovesPlansThatFitBefore) {
  // a100-80g: 80 GiB exposed − 3 GiB reserve = 77 GiB usable; 8 GiB of
  // headroom leaves 69 GiB.
  const json before = SearchJson({});
  const json after = SearchJson({"--memory-headroom", "8GiB"});
  std::set<std::string> fit_after;
  for (const json& c : after["candidates"]) {
    EXPECT_LE(c["memory_gib"]["total"].get<double>(), 69.0);
    fit_after.insert(c["config"].dump());
  }
  int64_t removed = 0;
  for (const json& c : before["candidates"]) {
    const double total = c["memory_gib"]["total"].get<double>();
    EXPECT_LE(total, 77.0);
    const bool kept = fit_after.count(c["config"].dump()) > 0;
    EXPECT_EQ(kept, total <= 69.0) << c["config"].dump() << " " << total;
    if (!kept) ++removed;
  }
  // The best plan without headroom (70.41 GiB, golden
  // search_gpt3-1.3b_8xa100-80g.txt) is one of them.
  const json& best = before["candidates"][0];
  EXPECT_GT(best["memory_gib"]["total"].get<double>(), 69.0);
  EXPECT_EQ(fit_after.count(best["config"].dump()), 0u);
  EXPECT_GT(removed, 0);
  EXPECT_EQ(after["feasible"].get<int64_t>(),
            before["feasible"].get<int64_t>() - removed);
  EXPECT_EQ(after["pruned"]["out_of_memory"].get<int64_t>(),
            before["pruned"]["out_of_memory"].get<int64_t>() + removed);
  // The same in percent: 10 % of 80 GiB = 8 GiB.
  EXPECT_EQ(SearchJson({"--memory-headroom", "10%"})["feasible"],
            after["feasible"]);
}

TEST(SearchMemoryHeadroom, JsonFlagsCandidatesWithinFivePercent) {
  for (const char* headroom : {"0", "8"}) {
    const double usable = 77.0 - std::stod(headroom);
    const json j = SearchJson({"--memory-headroom", headroom});
    int64_t flagged = 0, clear = 0;
    for (const json& c : j["candidates"]) {
      const double total = c["memory_gib"]["total"].get<double>();
      EXPECT_EQ(c["near_capacity"].get<bool>(),
                total >= search_spaces::kNearCapacityFraction * usable)
          << total << " of " << usable;
      (c["near_capacity"].get<bool>() ? flagged : clear) += 1;
    }
    // Both kinds occur, so the check above is not vacuous.
    EXPECT_GT(flagged, 0) << headroom;
    EXPECT_GT(clear, 0) << headroom;
  }
}

TEST(SearchMemoryHeadroom, BadValueIsAnInputError) {
  const InProcessRun run = Tune({"search", "--model", "gpt3-1.3b", "--gpus",
                                 "8", "--no-db", "--memory-headroom", "-2"});
  EXPECT_EQ(run.exit_code, 2);
  EXPECT_EQ(run.out, "");
  EXPECT_NE(run.err.find("--memory-headroom must not be negative, got '-2'"),
            std::string::npos)
      << run.err;
}

TEST(SearchEtpPin, EveryCandidateHasThePinnedEtp) {
  // Mixtral 8x7B on 16 H100: without a pin the search tries etp 1, 2, 4, 8
  // and tp; with --etp 1 every ranked plan has etp 1.
  InputFlags f;
  f.model = "mixtral-8x7b";
  f.gpus = "16";
  f.gpu = "h100";
  f.tp = "2,4";
  f.pp = "2";
  auto free_in = ResolveInputs(f);
  ASSERT_TRUE(free_in.ok()) << free_in.status().message();
  const costmodel::DatasheetCalibration calibration(free_in->cluster);
  const SearchResult free_result =
      RunSearch(free_in->model, free_in->cluster, free_in->training,
                free_in->space, calibration);
  std::set<int64_t> etps;
  for (const auto& e : free_result.ranked) etps.insert(e.config.expert_tp());
  EXPECT_GT(etps.size(), 1u);  // the search varies etp when it is free

  for (const char* pin : {"1", "2"}) {
    f.etp = pin;
    auto in = ResolveInputs(f);
    ASSERT_TRUE(in.ok()) << in.status().message();
    const SearchResult pinned =
        RunSearch(in->model, in->cluster, in->training, in->space, calibration);
    ASSERT_GT(pinned.feasible, 0) << pin;
    for (const auto& e : pinned.ranked) {
      EXPECT_EQ(e.config.expert_tp(), std::stoll(pin));
    }
  }
}

TEST(SearchEtpPin, EstimateTakesOneEtp) {
  const InProcessRun run =
      Tune({"estimate", "--model", "mixtral-8x7b", "--gpus", "16", "--gpu",
            "h100", "--tp", "4", "--sp", "--ep", "4", "--etp", "1", "--no-db"});
  ASSERT_EQ(run.exit_code, 0) << run.err;
  EXPECT_NE(run.out.find("configuration: tp4 pp1 vpp1 cp1 ep4 dp4 etp1 "),
            std::string::npos)
      << run.out;
  const InProcessRun dense = Tune({"estimate", "--model", "gpt3-1.3b", "--gpus",
                                   "8", "--etp", "1", "--no-db"});
  EXPECT_EQ(dense.exit_code, 2);
  EXPECT_NE(dense.err.find("--etp 1: model gpt3-1.3b has no experts"),
            std::string::npos)
      << dense.err;
}

TEST(SearchEpOverlap, EstimatePricesItAndSearchKeepsItsPreconditions) {
  // Mixtral 8x7B on 16 H100, ep 8 across two nodes: the overlap hides the
  // all-to-alls of paired micro-batches behind compute.
  const std::vector<std::string> base = {
      "estimate", "--model", "mixtral-8x7b", "--gpus", "16", "--gpu", "h100",
      "--tp",     "2",       "--sp",         "--ep",   "8",  "--gbs", "256",
      "--json",   "--no-db"};
  const InProcessRun plain = Tune(base);
  ASSERT_EQ(plain.exit_code, 0) << plain.err;
  std::vector<std::string> with = base;
  with.push_back("--overlap-moe-expert-parallel-comm");
  const InProcessRun overlap = Tune(with);
  ASSERT_EQ(overlap.exit_code, 0) << overlap.err;
  const double plain_ep = nlohmann::json::parse(plain.out)["time_s"]["ep_comm"];
  const double overlap_ep =
      nlohmann::json::parse(overlap.out)["time_s"]["ep_comm"];
  EXPECT_GT(plain_ep, 0.0);
  EXPECT_LT(overlap_ep, plain_ep);

  // Every plan the search ranks with the flag meets Megatron's
  // preconditions: virtual stages whenever pp > 1.
  InputFlags f;
  f.model = "mixtral-8x7b";
  f.gpus = "16";
  f.gpu = "h100";
  f.tp = "2";
  f.pp = "1,2";
  f.moe_ep_overlap = true;
  auto in = ResolveInputs(f);
  ASSERT_TRUE(in.ok()) << in.status().message();
  const costmodel::DatasheetCalibration calibration(in->cluster);
  const SearchResult result =
      RunSearch(in->model, in->cluster, in->training, in->space, calibration);
  ASSERT_FALSE(result.ranked.empty());
  for (const auto& e : result.ranked) {
    EXPECT_TRUE(e.config.pp == 1 || e.config.vpp > 1)
        << search_spaces::ToString(e.config);
  }
}

}  // namespace
}  // namespace meshtune::tuner
