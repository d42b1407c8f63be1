#include "tuner/regress/baseline_file.h"

#include <cmath>
#include <nlohmann/json.hpp>
#include <set>

#include "search_spaces/file_io.h"
#include "tuner/io/output_file.h"
#include "tuner/regress/benchmarks.h"

namespace meshtune::tuner {
namespace {

using nlohmann::json;

const char* const kHint =
    "write baseline files with 'tune regress baseline export' and do not "
    "edit them; re-export to update one";

nlohmann::json ProvenanceJson(const results::Provenance& p) {
  return {{"tool_version", p.tool_version},
          {"git_revision", p.git_revision},
          {"created_unix_s", p.created_unix_s}};
}

// Reads the keys of one JSON object, checking types and that no key is
// unknown; the first problem is kept and reported with its dotted path.
class ObjectReader {
 public:
  ObjectReader(const std::string& path, const json& object, std::string where,
               Status* status)
      : path_(path),
        object_(object),
        where_(std::move(where)),
        status_(status) {
    if (status_->ok() && !object_.is_object()) {
      Fail(where_.empty() ? "the file" : "'" + where_ + "'",
           "must be a JSON object");
    }
  }
  ~ObjectReader() {
    if (!status_->ok() || !object_.is_object()) return;
    for (const auto& item : object_.items()) {
      if (known_.count(item.key()) == 0) {
        Fail("key '" + Key(item.key()) + "'", "is not a known key");
        return;
      }
    }
  }

  const json* Get(const std::string& key) {
    known_.insert(key);
    if (!status_->ok() || !object_.is_object()) return nullptr;
    auto it = object_.find(key);
    if (it == object_.end()) {
      Fail("key '" + Key(key) + "'", "is missing");
      return nullptr;
    }
    return &*it;
  }
  std::string String(const std::string& key) {
    const json* v = Get(key);
    if (v == nullptr) return "";
    if (!v->is_string())
      return Fail("'" + Key(key) + "'", "must be a string"), "";
    return v->get<std::string>();
  }
  int64_t Int(const std::string& key) {
    const json* v = Get(key);
    if (v == nullptr) return 0;
    if (!v->is_number_integer()) {
      return Fail("'" + Key(key) + "'", "must be an integer"), 0;
    }
    return v->get<int64_t>();
  }
  double Number(const std::string& key) {
    const json* v = Get(key);
    if (v == nullptr) return 0;
    if (!v->is_number() || !std::isfinite(v->get<double>())) {
      return Fail("'" + Key(key) + "'", "must be a finite number"), 0;
    }
    return v->get<double>();
  }
  std::vector<double> Numbers(const std::string& key) {
    const json* v = Get(key);
    std::vector<double> out;
    if (v == nullptr) return out;
    bool good = v->is_array() && !v->empty();
    for (size_t i = 0; good && i < v->size(); ++i) {
      good = (*v)[i].is_number() && std::isfinite((*v)[i].get<double>());
      if (good) out.push_back((*v)[i].get<double>());
    }
    if (!good)
      Fail("'" + Key(key) + "'", "must be a non-empty array of numbers");
    return out;
  }
  void Fail(const std::string& what, const std::string& problem) {
    if (status_->ok()) {
      *status_ =
          Status::InvalidArgument(path_ + ": " + what + " " + problem, kHint);
    }
  }
  std::string Key(const std::string& key) const {
    return where_.empty() ? key : where_ + "." + key;
  }

 private:
  const std::string& path_;
  const json& object_;
  std::string where_;
  Status* status_;
  std::set<std::string> known_;
};

results::Provenance ReadProvenance(ObjectReader& r) {
  results::Provenance p;
  p.tool_version = r.String("tool_version");
  p.git_revision = r.String("git_revision");
  p.created_unix_s = r.Int("created_unix_s");
  return p;
}

bool Close(double a, double b) {
  return std::fabs(a - b) <= 1e-9 * std::max(std::fabs(a), std::fabs(b));
}

}  // namespace

std::string BaselineFileText(const BaselineFile& file) {
  const results::RegressBaseline& b = file.baseline;
  const results::RegressResult& r = b.result;
  const results::HardwareFingerprint& hw = file.hardware;
  json j = {{"format", kBaselineFileFormat},
            {"version", kBaselineFileVersion},
            {"name", b.name},
            {"benchmark", r.benchmark},
            {"spec", r.spec},
            {"hardware",
             {{"id", hw.id},
              {"backend", hw.backend},
              {"cpu_model", hw.cpu_model},
              {"cpu_cores", hw.cpu_cores},
              {"memory_gib", hw.memory_gib},
              {"gpu_model", hw.gpu_model},
              {"gpu_count", hw.gpu_count},
              {"driver_version", hw.driver_version},
              {"library_versions", hw.library_versions}}},
            {"result",
             {{"tool_version", r.provenance.tool_version},
              {"git_revision", r.provenance.git_revision},
              {"created_unix_s", r.provenance.created_unix_s},
              {"threads", r.threads},
              {"warmup_steps", r.warmup_steps},
              {"steps_per_repeat", r.steps_per_repeat},
              {"tokens_per_step", r.tokens_per_step},
              {"tokens_per_s", r.tokens_per_s},
              {"cpu_tokens_per_s", r.cpu_tokens_per_s},
              {"tokens_per_s_median", r.tokens_per_s_median},
              {"tokens_per_s_spread", r.tokens_per_s_spread},
              {"cpu_tokens_per_s_median", r.cpu_tokens_per_s_median},
              {"cpu_tokens_per_s_spread", r.cpu_tokens_per_s_spread},
              {"losses", r.losses}}},
            {"set", ProvenanceJson(b.provenance)}};
  return j.dump(2) + "\n";
}

Status WriteBaselineFile(const std::string& path, const BaselineFile& file) {
  return WriteOutputFile(path, BaselineFileText(file), "--file");
}

StatusOr<BaselineFile> ReadBaselineFile(const std::string& path) {
  // ReadRegularFile, not an ifstream: a FIFO or device given as --baseline
  // or --file would block the read for ever.
  StatusOr<std::string> text =
      search_spaces::ReadRegularFile(path, "baseline file");
  if (!text.ok()) {
    if (text.status().code() != Status::Code::kNotFound) return text.status();
    return Status::NotFound("no baseline file '" + path + "'",
                            "pass a file written by 'tune regress baseline "
                            "export', or a baseline name ('tune regress "
                            "baseline list')");
  }
  const json j = json::parse(text.value(), nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) {
    return Status::InvalidArgument(path + ": not a JSON file", kHint);
  }
  Status status;
  BaselineFile file;
  results::RegressBaseline& b = file.baseline;
  results::RegressResult& r = b.result;
  {
    ObjectReader top(path, j, "", &status);
    const std::string format = top.String("format");
    if (status.ok() && format != kBaselineFileFormat) {
      top.Fail("'format'",
               "is '" + format + "', not '" + kBaselineFileFormat + "'");
    }
    const int64_t version = top.Int("version");
    if (status.ok() && version != kBaselineFileVersion) {
      top.Fail("'version'", "is " + std::to_string(version) +
                                ", this tune reads version " +
                                std::to_string(kBaselineFileVersion));
    }
    b.name = top.String("name");
    if (status.ok() && b.name.empty()) top.Fail("'name'", "is empty");
    r.benchmark = top.String("benchmark");
    r.spec = top.String("spec");
    if (const json* hw = top.Get("hardware")) {
      ObjectReader h(path, *hw, "hardware", &status);
      file.hardware.id = h.String("id");
      file.hardware.backend = h.String("backend");
      file.hardware.cpu_model = h.String("cpu_model");
      file.hardware.cpu_cores = h.Int("cpu_cores");
      file.hardware.memory_gib = h.Number("memory_gib");
      file.hardware.gpu_model = h.String("gpu_model");
      file.hardware.gpu_count = h.Int("gpu_count");
      file.hardware.driver_version = h.String("driver_version");
      file.hardware.library_versions = h.String("library_versions");
    }
    if (const json* res = top.Get("result")) {
      ObjectReader x(path, *res, "result", &status);
      r.provenance = ReadProvenance(x);
      r.threads = x.Int("threads");
      r.warmup_steps = x.Int("warmup_steps");
      r.steps_per_repeat = x.Int("steps_per_repeat");
      r.tokens_per_step = x.Int("tokens_per_step");
      r.tokens_per_s = x.Numbers("tokens_per_s");
      r.cpu_tokens_per_s = x.Numbers("cpu_tokens_per_s");
      r.tokens_per_s_median = x.Number("tokens_per_s_median");
      r.tokens_per_s_spread = x.Number("tokens_per_s_spread");
      r.cpu_tokens_per_s_median = x.Number("cpu_tokens_per_s_median");
      r.cpu_tokens_per_s_spread = x.Number("cpu_tokens_per_s_spread");
      r.losses = x.Numbers("losses");
      if (status.ok() && r.tokens_per_s.size() != r.cpu_tokens_per_s.size()) {
        x.Fail("'result.tokens_per_s' and 'result.cpu_tokens_per_s'",
               "differ in length");
      }
      if (status.ok() &&
          (!Close(r.tokens_per_s_median, Median(r.tokens_per_s)) ||
           !Close(r.tokens_per_s_spread,
                  MedianAbsoluteDeviation(r.tokens_per_s)) ||
           !Close(r.cpu_tokens_per_s_median, Median(r.cpu_tokens_per_s)) ||
           !Close(r.cpu_tokens_per_s_spread,
                  MedianAbsoluteDeviation(r.cpu_tokens_per_s)))) {
        x.Fail("the medians and spreads in 'result'",
               "do not match its repeats");
      }
    }
    if (const json* set = top.Get("set")) {
      ObjectReader s(path, *set, "set", &status);
      b.provenance = ReadProvenance(s);
    }
  }
  if (!status.ok()) return status;

  StatusOr<const RegressBenchmark*> bench = FindRegressBenchmark(r.benchmark);
  if (!bench.ok()) {
    return Status::InvalidArgument(path + ": " + bench.status().message(),
                                   bench.status().hint());
  }
  if (r.spec != bench.value()->Spec()) {
    return Status::InvalidArgument(
        path + ": the baseline's definition of " + r.benchmark + " ('" +
            r.spec + "') differs from this tune's ('" + bench.value()->Spec() +
            "')",
        "export a new baseline with this tune; a changed benchmark needs a "
        "new version suffix");
  }
  if (file.hardware.id != results::ComputeHardwareId(file.hardware)) {
    return Status::InvalidArgument(
        path + ": 'hardware.id' " + file.hardware.id +
            " does not match the fingerprint's fields (" +
            results::ComputeHardwareId(file.hardware) + ")",
        kHint);
  }
  r.hardware_id = file.hardware.id;
  return file;
}

}  // namespace meshtune::tuner
