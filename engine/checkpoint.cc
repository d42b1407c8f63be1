#include "engine/checkpoint.h"

#include <fcntl.h>   // AT_FDCWD
#include <signal.h>  // kill
#include <stdio.h>   // renameat2, RENAME_EXCHANGE (glibc ≥ 2.28)
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <map>
#include <utility>
#include <vector>

#include "engine/checkpoint_format.h"

namespace meshtune::engine {
namespace {

namespace fs = std::filesystem;

// Floats of the buffer that carries a failing rank's Status to all ranks:
// code, message length, hint length, then the characters.
constexpr int64_t kStatusChars = 2048;

const char kCorruptHint[] = "load an older checkpoint or save again";

std::string ShapeText(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) {
    s += (i ? ", " : "") + std::to_string(shape[i]);
  }
  return s + "]";
}

Status MakeStatus(Status::Code code, std::string msg, std::string hint) {
  switch (code) {
    case Status::Code::kInvalidArgument:
      return Status::InvalidArgument(std::move(msg), std::move(hint));
    case Status::Code::kNotFound:
      return Status::NotFound(std::move(msg), std::move(hint));
    case Status::Code::kInfeasible:
      return Status::Infeasible(std::move(msg), std::move(hint));
    case Status::Code::kIoError:
      return Status::IoError(std::move(msg), std::move(hint));
    case Status::Code::kUnimplemented:
      return Status::Unimplemented(std::move(msg), std::move(hint));
    case Status::Code::kOk:
    case Status::Code::kInternal:
      break;
  }
  return Status::Internal(std::move(msg));
}

// Collective over `world`: OK when every rank's `local` is OK, otherwise the
// Status of the lowest failing rank on every rank. Without this a rank that
// fails (say, cannot read a shard) would return while the others wait in the
// next collective forever.
Status AgreeOnStatus(const Status& local, Communicator& world) {
  // Ranks are small integers, exact in float32.
  float failing =
      local.ok() ? 0.0f : static_cast<float>(world.size() - world.rank());
  world.AllReduceMax(&failing, 1);
  if (failing == 0.0f) return Status::Ok();
  const int root = world.size() - static_cast<int>(failing);
  std::vector<float> buf(3 + kStatusChars, 0.0f);
  if (world.rank() == root) {
    const std::string msg = local.message().substr(0, kStatusChars);
    const std::string hint = local.hint().substr(0, kStatusChars - msg.size());
    buf[0] = static_cast<float>(static_cast<int>(local.code()));
    buf[1] = static_cast<float>(msg.size());
    buf[2] = static_cast<float>(hint.size());
    const std::string both = msg + hint;
    for (size_t i = 0; i < both.size(); ++i) {
      buf[3 + i] = static_cast<unsigned char>(both[i]);
    }
  }
  world.Broadcast(buf.data(), static_cast<int64_t>(buf.size()), root);
  const auto msg_len = static_cast<size_t>(buf[1]);
  const auto hint_len = static_cast<size_t>(buf[2]);
  std::string both(msg_len + hint_len, '\0');
  for (size_t i = 0; i < both.size(); ++i) {
    both[i] = static_cast<char>(static_cast<unsigned char>(buf[3 + i]));
  }
  return MakeStatus(static_cast<Status::Code>(static_cast<int>(buf[0])),
                    both.substr(0, msg_len), both.substr(msg_len));
}

// Local row stride of a parameter (1 for 1-D tensors).
int64_t LocalCols(const ParamInfo& info) {
  return info.local_shape.size() > 1 ? info.local_shape[1] : 1;
}

// ---------------------------------------------------------------- saving

// Copies the elements of this rank's blocks of parameter `info` out of a
// flat buffer (indexed like the ParamStore's), blocks in order, row-major.
void GatherBlocks(const ParamInfo& info, const float* flat,
                  std::vector<float>* out) {
  const int64_t stride = LocalCols(info);
  out->clear();
  for (const ParamInfo::Block& b : info.Blocks()) {
    for (int64_t r = 0; r < b.rows; ++r) {
      const float* src =
          flat + info.offset + (b.local_row0 + r) * stride + b.local_col0;
      out->insert(out->end(), src, src + b.cols);
    }
  }
}

// Which of a rank's parameters a shard file holds.
enum class ShardPart { kAll, kDense, kExpert };

bool InPart(const ParamInfo& info, ShardPart part) {
  switch (part) {
    case ShardPart::kAll:
      return true;
    case ShardPart::kDense:
      return !info.expert;
    case ShardPart::kExpert:
      return info.expert;
  }
  return false;
}

// Writes one shard: this rank's parameters of `part` with their AdamW
// state. `m` and `v` are indexed like the flat parameter buffer.
Status WriteShard(const std::string& path, const ParamStore& store,
                  ShardPart part, const float* m, const float* v) {
  uint32_t count = 0;
  for (const ParamInfo& info : store.infos()) count += InPart(info, part);
  ShardWriter writer;
  MESHTUNE_RETURN_IF_ERROR(writer.Open(path, count));
  std::vector<float> p_data, m_data, v_data;
  for (const ParamInfo& info : store.infos()) {
    if (!InPart(info, part)) continue;
    TensorRecord record;
    record.name = info.name;
    record.global_shape = info.global_shape;
    record.tied_embedding = info.tied_embedding;
    for (const ParamInfo::Block& b : info.Blocks()) {
      record.blocks.push_back({b.global_row0, b.rows, b.global_col0, b.cols});
      record.numel += b.rows * b.cols;
    }
    GatherBlocks(info, store.flat_params().data(), &p_data);
    GatherBlocks(info, m, &m_data);
    GatherBlocks(info, v, &v_data);
    MESHTUNE_RETURN_IF_ERROR(
        writer.Append(&record, p_data.data(), m_data.data(), v_data.data()));
  }
  return writer.Finish();
}

// World rank 0, after every shard is on disk: indexes the shards and writes
// metadata.json into `tmp_dir`.
Status WriteMetadata(const std::string& tmp_dir, const TrainConfig& config,
                     const CheckpointState& state, const Optimizer& optimizer,
                     const ProcessGroups& groups) {
  const search_spaces::ModelSpec& model = config.model;
  CheckpointMetadata m;
  m.iteration = state.iteration;
  m.consumed_samples = state.consumed_samples;
  m.steps_taken = optimizer.steps_taken();
  m.model_name = model.name;
  m.num_layers = model.num_layers;
  m.hidden_size = model.hidden_size;
  m.num_attention_heads = model.num_attention_heads;
  m.num_query_groups = model.num_query_groups;
  m.ffn_hidden_size = model.ffn_hidden_size;
  m.vocab_size = model.vocab_size;
  m.tp = groups.tp->size();
  m.pp = groups.pp->size();
  m.vpp = config.parallel.vpp;
  m.dp = groups.dp->size();
  // The run's setting (the CUDA engine writes through a host optimizer that
  // holds the full moments whatever the setting).
  m.dist_opt = config.parallel.dist_opt;
  m.ep = groups.ep->size();
  m.etp = groups.etp->size();
  auto add = [&](ShardIndex shard) {
    StatusOr<std::vector<TensorRecord>> index =
        ReadShardIndex(tmp_dir + "/" + shard.file);
    if (!index.ok()) return index.status();
    shard.tensors = std::move(index.value());
    m.shards.push_back(std::move(shard));
    return Status::Ok();
  };
  for (int p = 0; p < groups.pp->size(); ++p) {
    for (int t = 0; t < groups.tp->size(); ++t) {
      ShardIndex shard;
      shard.file = ShardFileName(t, p);
      shard.tp_rank = t;
      shard.pp_rank = p;
      MESHTUNE_RETURN_IF_ERROR(add(std::move(shard)));
    }
  }
  if (optimizer.expert_region()) {
    for (int p = 0; p < groups.pp->size(); ++p) {
      for (int e = 0; e < groups.ep->size(); ++e) {
        for (int x = 0; x < groups.etp->size(); ++x) {
          ShardIndex shard;
          shard.expert = true;
          shard.file = ExpertShardFileName(e, x, p);
          shard.ep_rank = e;
          shard.etp_rank = x;
          shard.pp_rank = p;
          MESHTUNE_RETURN_IF_ERROR(add(std::move(shard)));
        }
      }
    }
  }
  return WriteFileDurably(tmp_dir + "/" + kMetadataFileName, EncodeMetadata(m));
}

Status RenameError(const std::string& from, const std::string& to) {
  return Status::IoError(
      "cannot rename " + from + " to " + to + ": " + std::strerror(errno),
      "check permissions of the checkpoint directory");
}

// World rank 0: moves the finished `tmp_dir` to `final_dir`, replacing an
// older checkpoint of the same iteration without ever leaving the name
// empty where the file system allows (renameat2 RENAME_EXCHANGE).
Status MoveIntoPlace(const std::string& tmp_dir, const std::string& final_dir) {
  std::error_code ec;
  const fs::file_status st = fs::symlink_status(final_dir, ec);
  if (!fs::exists(st)) {
    if (std::rename(tmp_dir.c_str(), final_dir.c_str()) != 0) {
      return RenameError(tmp_dir, final_dir);
    }
    return Status::Ok();
  }
  if (!fs::is_directory(st)) {
    return Status::IoError(final_dir + " exists and is not a directory",
                           "remove or rename it, then save again");
  }
  if (renameat2(AT_FDCWD, tmp_dir.c_str(), AT_FDCWD, final_dir.c_str(),
                RENAME_EXCHANGE) != 0) {
    if (errno != EINVAL && errno != ENOSYS) {
      return RenameError(tmp_dir, final_dir);
    }
    // No atomic exchange on this file system: move the old one aside under
    // a *.tmp-* name (cleaned up like any stale save) and move ours in.
    const std::string aside = tmp_dir + "-old";
    if (std::rename(final_dir.c_str(), aside.c_str()) != 0) {
      return RenameError(final_dir, aside);
    }
    if (std::rename(tmp_dir.c_str(), final_dir.c_str()) != 0) {
      return RenameError(tmp_dir, final_dir);
    }
    fs::remove_all(aside, ec);
    return Status::Ok();
  }
  fs::remove_all(tmp_dir, ec);  // now holds the replaced checkpoint
  return Status::Ok();
}

// The pid that names a save's temporary entry, or -1 when `name` is not
// one: iter_N.tmp-<pid>, iter_N.tmp-<pid>-old (moved aside by MoveIntoPlace)
// and latest_checkpointed_iteration.txt.tmp-<pid>.
long TempEntryPid(const std::string& name) {
  const std::string tracker_tmp = std::string(kTrackerFileName) + ".tmp-";
  size_t at = std::string::npos;
  if (name.rfind(tracker_tmp, 0) == 0) {
    at = tracker_tmp.size();
  } else if (name.rfind("iter_", 0) == 0) {
    at = name.find(".tmp-");
    if (at != std::string::npos) at += 5;
  }
  if (at == std::string::npos) return -1;
  std::string digits = name.substr(at);
  if (digits.size() > 4 && digits.compare(digits.size() - 4, 4, "-old") == 0) {
    digits.resize(digits.size() - 4);
  }
  if (digits.empty() || digits.size() > 9 ||
      digits.find_first_not_of("0123456789") != std::string::npos) {
    return -1;
  }
  return std::stol(digits);
}

// Whether the save that named an entry with `pid` cannot still be running.
// Our own pid: this process's saves run one at a time and never leave an
// entry between calls, so it is a leftover of an earlier process that had
// the same pid (common in containers).
bool SaveIsOver(long pid) {
  if (pid == static_cast<long>(::getpid())) return true;
  if (pid <= 0) return false;
  // EPERM: alive under another user; only ESRCH says it is gone.
  return ::kill(static_cast<pid_t>(pid), 0) != 0 && errno == ESRCH;
}

// World rank 0: removes what saves killed part-way left behind in `dir`
// (iter_*.tmp-<pid> directories, tracker temp files) when process <pid> is
// gone; a live process's entries are its save in progress and stay. Best
// effort: a leftover is harmless, and `dir` may be read-only (--load of
// someone else's checkpoint).
void RemoveStaleTemps(const std::string& dir) {
  std::error_code ec;
  for (const fs::directory_entry& e : fs::directory_iterator(dir, ec)) {
    const long pid = TempEntryPid(e.path().filename().string());
    if (pid >= 0 && SaveIsOver(pid)) {
      std::error_code ignored;
      fs::remove_all(e.path(), ignored);
    }
  }
}

// World rank 0: renames the checkpoint into place, then points the tracker
// at it (temp file + rename), fsyncing the directory after each step.
Status Publish(const std::string& dir, const std::string& tmp_dir,
               int64_t iteration, long pid) {
  const std::string final_dir = dir + "/" + IterDirName(iteration);
  MESHTUNE_RETURN_IF_ERROR(SyncDirectory(tmp_dir));
  MESHTUNE_RETURN_IF_ERROR(MoveIntoPlace(tmp_dir, final_dir));
  MESHTUNE_RETURN_IF_ERROR(SyncDirectory(dir));
  const std::string tracker = dir + "/" + kTrackerFileName;
  const std::string tracker_tmp = tracker + ".tmp-" + std::to_string(pid);
  MESHTUNE_RETURN_IF_ERROR(
      WriteFileDurably(tracker_tmp, std::to_string(iteration) + "\n"));
  if (std::rename(tracker_tmp.c_str(), tracker.c_str()) != 0) {
    return RenameError(tracker_tmp, tracker);
  }
  MESHTUNE_RETURN_IF_ERROR(SyncDirectory(dir));
  RemoveStaleTemps(dir);
  return Status::Ok();
}

// World rank 0: creates an empty dir/iter_N.tmp-<pid>.
Status MakeTempDir(const std::string& dir, const std::string& tmp_dir) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) {
    return Status::IoError(
        "cannot create checkpoint directory " + dir + ": " + ec.message(),
        "choose a writable --save directory");
  }
  // Leftovers of killed saves, among them a directory of this very name
  // left by an earlier process with the same pid.
  RemoveStaleTemps(dir);
  fs::remove_all(tmp_dir, ec);
  if (!fs::create_directory(tmp_dir, ec) || ec) {
    return Status::IoError("cannot create " + tmp_dir + ": " +
                               (ec ? ec.message() : "it already exists"),
                           "choose a writable --save directory");
  }
  return Status::Ok();
}

}  // namespace

Status SaveCheckpoint(const std::string& dir, const TrainConfig& config,
                      const CheckpointState& state, const ParamStore& store,
                      const Optimizer& optimizer, ProcessGroups& groups) {
  Communicator& world = *groups.world;
  if (state.iteration < 0) {
    return Status::InvalidArgument(
        "cannot save a checkpoint for negative iteration " +
            std::to_string(state.iteration),
        "pass the number of completed steps");
  }
  const std::string name = IterDirName(state.iteration);

  // 1. World rank 0 makes the temp directory; its pid names it on all ranks
  // (pids are < 2^22 on Linux, exact in float32).
  float pid_f = 0;
  Status local;
  if (world.rank() == 0) {
    pid_f = static_cast<float>(::getpid());
    local = MakeTempDir(dir, dir + "/" + name + ".tmp-" +
                                 std::to_string(static_cast<long>(pid_f)));
  }
  MESHTUNE_RETURN_IF_ERROR(AgreeOnStatus(local, world));
  world.Broadcast(&pid_f, 1, 0);
  const long pid = static_cast<long>(pid_f);
  const std::string tmp_dir = dir + "/" + name + ".tmp-" + std::to_string(pid);

  // 2. Full per-parameter m, v (with the distributed optimizer each rank
  // holds a slice of each region's padded state: gathered).
  std::vector<float> m, v;
  optimizer.GatherFlatState(&m, &v);

  // 3. One shard per model-parallel position, from dp rank 0; with expert
  // parallelism the dense parameters only, and one expert shard per (ep,
  // etp, pp) position from edp rank 0.
  const bool split = optimizer.expert_region();
  local = Status::Ok();
  if (groups.dp_rank() == 0) {
    local = WriteShard(
        tmp_dir + "/" + ShardFileName(groups.tp_rank(), groups.pp_rank()),
        store, split ? ShardPart::kDense : ShardPart::kAll, m.data(), v.data());
  }
  if (split && local.ok() && groups.edp->rank() == 0) {
    local = WriteShard(
        tmp_dir + "/" +
            ExpertShardFileName(groups.ep->rank(), groups.etp->rank(),
                                groups.pp_rank()),
        store, ShardPart::kExpert, m.data(), v.data());
  }
  Status st = AgreeOnStatus(local, world);

  // 4. Metadata, rename into place, tracker.
  if (st.ok() && world.rank() == 0) {
    local = WriteMetadata(tmp_dir, config, state, optimizer, groups);
    if (local.ok()) local = Publish(dir, tmp_dir, state.iteration, pid);
  }
  if (st.ok()) st = AgreeOnStatus(local, world);
  if (!st.ok() && world.rank() == 0) {
    // The previous checkpoint and tracker are untouched; drop the partial
    // one (a kill before this point leaves it for the next save to remove).
    std::error_code ec;
    fs::remove_all(tmp_dir, ec);
  }
  return st;
}

namespace {

// ---------------------------------------------------------------- loading

struct SavedTensor {
  std::string path;  // shard file
  TensorRecord record;
};

// Every saved tensor by name.
using SavedByName = std::map<std::string, std::vector<SavedTensor>>;

SavedByName IndexByName(const std::string& iter_dir,
                        const CheckpointMetadata& meta) {
  SavedByName out;
  for (const ShardIndex& shard : meta.shards) {
    for (const TensorRecord& r : shard.tensors) {
      out[r.name].push_back({iter_dir + "/" + shard.file, r});
    }
  }
  return out;
}

// New contents of the flat parameters and of the rank's AdamW state range,
// built aside so that a failed load leaves store and optimizer untouched.
struct LoadBuffers {
  std::vector<float> params, m, v;  // [numel] each, flat-indexed
  std::vector<uint8_t> covered;     // per flat parameter element
};

// Calls fn(dst, src, count) for every run of `count` elements where a local
// block of `info` overlaps a saved block: dst indexes the flat parameter
// buffer, src the saved tensor's data.
template <typename Fn>
void ForEachOverlap(const ParamInfo& info, const std::vector<SavedBlock>& saved,
                    Fn fn) {
  const int64_t stride = LocalCols(info);
  for (const ParamInfo::Block& b : info.Blocks()) {
    int64_t src_base = 0;
    for (const SavedBlock& s : saved) {
      const int64_t r0 = std::max(b.global_row0, s.global_row0);
      const int64_t r1 =
          std::min(b.global_row0 + b.rows, s.global_row0 + s.rows);
      const int64_t c0 = std::max(b.global_col0, s.global_col0);
      const int64_t c1 =
          std::min(b.global_col0 + b.cols, s.global_col0 + s.cols);
      for (int64_t r = r0; r < r1 && c0 < c1; ++r) {
        const int64_t dst = info.offset +
                            (b.local_row0 + r - b.global_row0) * stride +
                            b.local_col0 + (c0 - b.global_col0);
        const int64_t src =
            src_base + (r - s.global_row0) * s.cols + (c0 - s.global_col0);
        fn(dst, src, c1 - c0);
      }
      src_base += s.rows * s.cols;
    }
  }
}

// Fills the elements of parameter `info` from the saved tensors `saved`
// (all copies of it in the checkpoint), reading only those that add
// elements not yet covered.
// `hint` explains a tensor the checkpoint lacks or shapes differently.
Status LoadParam(const ParamInfo& info, const std::vector<SavedTensor>& saved,
                 const std::string& hint, LoadBuffers* out) {
  for (const SavedTensor& s : saved) {
    bool adds = false;
    ForEachOverlap(info, s.record.blocks, [&](int64_t dst, int64_t, int64_t n) {
      for (int64_t k = 0; k < n && !adds; ++k) {
        adds = !out->covered[dst + k];
      }
    });
    if (!adds) continue;
    StatusOr<TensorData> data =
        ReadTensor(s.path, s.record.offset, s.record.bytes, info.name);
    if (!data.ok()) return data.status();
    const TensorRecord& r = data->record;
    bool same = r.name == s.record.name &&
                r.global_shape == s.record.global_shape &&
                r.checksum == s.record.checksum &&
                r.blocks.size() == s.record.blocks.size();
    for (size_t k = 0; same && k < r.blocks.size(); ++k) {
      const SavedBlock &a = r.blocks[k], &b = s.record.blocks[k];
      same = a.global_row0 == b.global_row0 && a.rows == b.rows &&
             a.global_col0 == b.global_col0 && a.cols == b.cols;
    }
    if (!same) {
      return Status::IoError(s.path + ": tensor " + info.name +
                                 " does not match metadata.json; the "
                                 "checkpoint is corrupt",
                             kCorruptHint);
    }
    ForEachOverlap(info, r.blocks, [&](int64_t dst, int64_t src, int64_t n) {
      std::copy_n(data->param.begin() + src, n, out->params.begin() + dst);
      std::copy_n(data->exp_avg.begin() + src, n, out->m.begin() + dst);
      std::copy_n(data->exp_avg_sq.begin() + src, n, out->v.begin() + dst);
      std::fill_n(out->covered.begin() + dst, n, uint8_t{1});
    });
  }
  // Every element of every block must have come from somewhere; kVocab
  // padding rows lie outside the blocks and stay 0.
  const int64_t stride = LocalCols(info);
  for (const ParamInfo::Block& b : info.Blocks()) {
    for (int64_t r = 0; r < b.rows; ++r) {
      const int64_t at =
          info.offset + (b.local_row0 + r) * stride + b.local_col0;
      for (int64_t c = 0; c < b.cols; ++c) {
        if (!out->covered[at + c]) {
          return Status::InvalidArgument("the checkpoint lacks element (" +
                                             std::to_string(b.global_row0 + r) +
                                             ", " +
                                             std::to_string(b.global_col0 + c) +
                                             ") of tensor " + info.name,
                                         hint);
        }
      }
    }
  }
  return Status::Ok();
}

// Loads every local parameter into `out`. `model_name` is this run's.
Status LoadAll(const std::string& iter_dir, const CheckpointMetadata& meta,
               const std::string& model_name, const ParamStore& store,
               LoadBuffers* out) {
  const std::string hint = "the checkpoint was saved from model '" +
                           meta.model_name + "' (this run: '" + model_name +
                           "'); load it with the same model and sizes";
  const SavedByName by_name = IndexByName(iter_dir, meta);
  for (const ParamInfo& info : store.infos()) {
    auto it = by_name.find(info.name);
    std::vector<SavedTensor> candidates;
    if (it != by_name.end()) {
      candidates = it->second;
    } else if (info.tied_embedding) {
      // The output-layer copy of a tied word embedding exists under its own
      // name only when the saving run had pp > 1; it always equals the word
      // embedding (Megatron initializes it from the first stage's copy,
      // megatron/core/models/common/language_module.py), so load that.
      for (const auto& [name, saved] : by_name) {
        for (const SavedTensor& s : saved) {
          if (s.record.tied_embedding &&
              s.record.global_shape == info.global_shape) {
            candidates.push_back(s);
          }
        }
      }
    }
    if (candidates.empty()) {
      return Status::InvalidArgument(
          "tensor " + info.name + " is missing from checkpoint " + iter_dir,
          hint);
    }
    for (const SavedTensor& s : candidates) {
      if (s.record.global_shape != info.global_shape) {
        return Status::InvalidArgument(
            "tensor " + info.name + " has shape " +
                ShapeText(s.record.global_shape) + " in checkpoint " +
                iter_dir + " but " + ShapeText(info.global_shape) +
                " in the model",
            hint);
      }
    }
    MESHTUNE_RETURN_IF_ERROR(LoadParam(info, candidates, hint, out));
  }
  return Status::Ok();
}

// The metadata of the newest checkpoint under `dir` (per the tracker
// file); `iter_dir` receives its directory.
StatusOr<CheckpointMetadata> ReadNewestMetadata(const std::string& dir,
                                                std::string* iter_dir) {
  StatusOr<int64_t> iteration = ReadTracker(dir);
  if (!iteration.ok()) return iteration.status();
  *iter_dir = dir + "/" + IterDirName(*iteration);
  StatusOr<CheckpointMetadata> meta =
      ReadMetadata(*iter_dir + "/" + kMetadataFileName);
  if (!meta.ok()) return meta.status();
  if (meta->iteration != *iteration) {
    return Status::IoError(
        *iter_dir + "/" + kMetadataFileName + " is for iteration " +
            std::to_string(meta->iteration) + "; the checkpoint is corrupt",
        kCorruptHint);
  }
  return meta;
}

}  // namespace

StatusOr<CheckpointState> ReadCheckpointState(const std::string& dir) {
  std::string iter_dir;
  StatusOr<CheckpointMetadata> meta = ReadNewestMetadata(dir, &iter_dir);
  if (!meta.ok()) return meta.status();
  return CheckpointState{meta->iteration, meta->consumed_samples};
}

StatusOr<int64_t> ResumeSamples(const std::string& dir,
                                const CheckpointState& state,
                                const TrainConfig& config) {
  const int64_t gbs = config.global_batch_size;
  const int64_t steps = config.train_iters;
  if (state.iteration >= steps) {
    // Run would return at once, and the report would show a loss of 0
    // for a run that trained nothing.
    return Status::InvalidArgument(
        "the checkpoint in " + dir + " is at iteration " +
            std::to_string(state.iteration) + " >= --steps " +
            std::to_string(steps) + ": nothing to train",
        "pass --steps greater than " + std::to_string(state.iteration) +
            " (--steps counts the checkpoint's iterations), or leave out "
            "--load");
  }
  int64_t straight = 0, resumed = 0;
  if (gbs < 1 || __builtin_mul_overflow(gbs, steps, &straight) ||
      __builtin_mul_overflow(gbs, steps - state.iteration, &resumed) ||
      __builtin_add_overflow(resumed, state.consumed_samples, &resumed)) {
    return Status::InvalidArgument(
        "resuming from the checkpoint in " + dir + " (" +
            std::to_string(state.consumed_samples) + " samples consumed) for " +
            std::to_string(steps) + " iterations of " + std::to_string(gbs) +
            " samples needs more samples than can be counted",
        "check the checkpoint's consumed_samples, --steps and --gbs");
  }
  return std::max(straight, resumed);
}

Status CheckResume(const std::string& dir, const CheckpointState& state,
                   const TrainConfig& config, int64_t available_samples) {
  StatusOr<int64_t> needed = ResumeSamples(dir, state, config);
  if (!needed.ok()) return needed.status();
  if (*needed > available_samples) {
    return Status::InvalidArgument(
        "resuming from the checkpoint in " + dir + " at iteration " +
            std::to_string(state.iteration) + " (" +
            std::to_string(state.consumed_samples) +
            " samples consumed) needs " + std::to_string(*needed) +
            " training samples, but the data holds " +
            std::to_string(available_samples),
        "start the run again: the checkpoint changed after the data was "
        "sized for it (tune train sizes it with ResumeSamples)");
  }
  return Status::Ok();
}

namespace {

// Reads the newest checkpoint under `dir` into `buffers` for every
// parameter of `store`, agreed over `world` (one rank's error fails all).
Status ReadAllParams(const std::string& dir, const std::string& model_name,
                     const ParamStore& store, Communicator& world,
                     LoadBuffers* buffers, CheckpointMetadata* meta) {
  // Leftovers of killed saves go on load too: a run that only ever loads
  // from a directory would otherwise keep them for ever.
  if (world.rank() == 0) RemoveStaleTemps(dir);
  Status local = [&]() -> Status {
    std::string iter_dir;
    StatusOr<CheckpointMetadata> m = ReadNewestMetadata(dir, &iter_dir);
    if (!m.ok()) return m.status();
    *meta = std::move(m.value());
    buffers->params.assign(store.numel(), 0.0f);
    buffers->covered.assign(store.numel(), 0);
    buffers->m.assign(store.numel(), 0.0f);
    buffers->v.assign(store.numel(), 0.0f);
    // Tensors are matched by name and shape; the model name only helps
    // explain a mismatch.
    return LoadAll(iter_dir, *meta, model_name, store, buffers);
  }();
  return AgreeOnStatus(local, world);
}

}  // namespace

Status LoadCheckpoint(const std::string& dir, const TrainConfig& config,
                      CheckpointState* state, ParamStore& store,
                      Optimizer& optimizer, ProcessGroups& groups) {
  LoadBuffers buffers;
  CheckpointMetadata meta;
  MESHTUNE_RETURN_IF_ERROR(ReadAllParams(dir, config.model.name, store,
                                         *groups.world, &buffers, &meta));
  // Copy into the existing buffers: the model keeps pointers into them.
  std::copy(buffers.params.begin(), buffers.params.end(),
            store.flat_params().begin());
  // AdamW state exists only for this rank's optimizer ranges.
  optimizer.SetFlatState(buffers.m, buffers.v);
  optimizer.set_steps_taken(meta.steps_taken);
  state->iteration = meta.iteration;
  state->consumed_samples = meta.consumed_samples;
  return Status::Ok();
}

Status LoadCheckpointParams(const std::string& dir,
                            const std::string& model_name, ParamStore& store,
                            Communicator& world) {
  LoadBuffers buffers;
  CheckpointMetadata meta;
  MESHTUNE_RETURN_IF_ERROR(
      ReadAllParams(dir, model_name, store, world, &buffers, &meta));
  std::copy(buffers.params.begin(), buffers.params.end(),
            store.flat_params().begin());
  return Status::Ok();
}

StatusOr<std::string> CheckpointModelName(const std::string& dir) {
  std::string iter_dir;
  StatusOr<CheckpointMetadata> meta = ReadNewestMetadata(dir, &iter_dir);
  if (!meta.ok()) return meta.status();
  return meta->model_name;
}

}  // namespace meshtune::engine
