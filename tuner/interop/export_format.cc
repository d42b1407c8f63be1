#include "tuner/interop/export_format.h"

#include "tuner/interop/bridge_overrides.h"
#include "tuner/interop/megatron_args.h"
#include "tuner/interop/nemo_overrides.h"

namespace meshtune::tuner {

StatusOr<ExportFormat> ParseExportFormat(
    const std::string& text, const std::string& flag,
    const std::vector<std::string>& others) {
  if (text == "megatron") return ExportFormat::kMegatron;
  if (text == "nemo") return ExportFormat::kNemo;
  if (text == "bridge") return ExportFormat::kBridge;
  std::string names;
  for (const std::string& name : others) names += name + ", ";
  names += "megatron, nemo or bridge";
  return Status::InvalidArgument(flag + ": unknown format '" + text + "'",
                                 "use " + flag + " " + names);
}

StatusOr<ExportedPlan> ExportPlan(ExportFormat format, const PlanToExport& p) {
  ExportedPlan out;
  switch (format) {
    case ExportFormat::kMegatron: {
      std::vector<std::string> args =
          MegatronArgs(p.model, p.training, p.config, p.flash_attention);
      for (const std::string& a :
           MegatronTokenizerArgs(p.model, /*model_as_variable=*/false)) {
        args.push_back(a);
      }
      for (const std::string& a : MegatronRunArgs(p.run)) {
        // A job's own flags: tune launch writes them with its time limit.
        if (a.rfind("--save-interval", 0) == 0 ||
            a.rfind("--exit-duration-in-mins", 0) == 0) {
          continue;
        }
        args.push_back(a);
      }
      out.text = FormatMegatronArgs(args);
      return out;
    }
    case ExportFormat::kNemo: {
      auto yaml = NemoOverrides(p.model, p.training, p.config, p.gpus_per_node,
                                p.flash_attention);
      if (!yaml.ok()) return yaml.status();
      out.text = yaml.value();
      return out;
    }
    case ExportFormat::kBridge:
      out.text = FormatMegatronArgs(BridgeOverrides(
          p.model, p.training, p.config, p.flash_attention, p.run, &out.notes));
      return out;
  }
  return out;
}

}  // namespace meshtune::tuner
