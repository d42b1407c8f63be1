// The on-disk format of one checkpoint shard file (shard_tp{t}_pp{p}.bin)
// and the small POSIX file helpers that make a save durable.
//
// A shard file is a header followed by one record per parameter of the
// (tp, pp) position that wrote it:
//
//   file header   "MSHCKPT\0" (8 bytes), u32 format version (1),
//                 u32 number of records
//   record        u32 "TENS" tag, u32 name length, name bytes,
//                 u32 flags (bit 0: tied word embedding),
//                 u32 ndim, i64 global_shape[ndim],
//                 u32 nblocks, nblocks × i64 {global_row0, rows,
//                 global_col0, cols},
//                 i64 numel (Σ rows·cols),
//                 f32 param[numel], f32 exp_avg[numel], f32 exp_avg_sq[numel]
//                 (each block row-major, blocks in order),
//                 u64 FNV-1a 64 of every preceding byte of the record
//
// Integers and floats are little-endian (the engine only targets
// little-endian hosts; checked at compile time). Only rows that exist in
// the global tensor are stored: the padding rows of a kVocab tensor are
// never written, so a checkpoint does not depend on tp.
//
// The checksum is per record so that a loader reading only the tensors it
// needs still verifies everything it reads (the same idea as the per-tensor
// checks of torch.distributed.checkpoint's storage metadata, with our own
// layout).
#ifndef MESHTUNE_ENGINE_CHECKPOINT_FORMAT_H_
#define MESHTUNE_ENGINE_CHECKPOINT_FORMAT_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "search_spaces/status.h"

namespace meshtune::engine {

inline constexpr uint32_t kShardFormatVersion = 1;
// Bytes of the file header (magic, version, record count).
inline constexpr int64_t kShardHeaderBytes = 16;

// FNV-1a, 64 bit (Fowler, Noll, Vo); `seed` continues a previous hash.
uint64_t Fnv1a64(const void* data, size_t bytes,
                 uint64_t seed = 0xcbf29ce484222325ull);

// A rectangle of the global tensor: rows [global_row0, +rows), columns
// [global_col0, +cols). 1-D tensors have one column.
struct SavedBlock {
  int64_t global_row0 = 0, rows = 0;
  int64_t global_col0 = 0, cols = 0;
};

// What a record describes (its header) and where it lies in the file.
struct TensorRecord {
  std::string name;
  std::vector<int64_t> global_shape;
  std::vector<SavedBlock> blocks;
  bool tied_embedding = false;
  int64_t numel = 0;      // Σ rows·cols over blocks
  int64_t offset = 0;     // byte offset of the record in the file
  int64_t bytes = 0;      // record size including the checksum
  uint64_t checksum = 0;  // the record's trailing FNV-1a 64
};

// A record read back: header plus data, each numel floats, blocks in order.
struct TensorData {
  TensorRecord record;
  std::vector<float> param, exp_avg, exp_avg_sq;
};

// Writes one shard file record by record, then fsyncs it so the data is on
// disk before the checkpoint directory is renamed into place.
class ShardWriter {
 public:
  ShardWriter() = default;
  ShardWriter(const ShardWriter&) = delete;
  ShardWriter& operator=(const ShardWriter&) = delete;
  ~ShardWriter();  // closes (without fsync) if Finish was not reached

  // Creates (or truncates) `path` and writes the file header.
  Status Open(const std::string& path, uint32_t num_records);
  // Appends a record; `param`, `exp_avg`, `exp_avg_sq` hold record->numel
  // floats each. Fills record->offset, bytes and checksum.
  Status Append(TensorRecord* record, const float* param, const float* exp_avg,
                const float* exp_avg_sq);
  // fsync and close.
  Status Finish();

 private:
  std::string path_;
  int fd_ = -1;
  int64_t offset_ = 0;
};

// Parses the header of a shard file and the headers of all its records
// (skipping their data; checksums are read, not verified). `path` names the
// file in messages. Shards are read only if they are regular files
// (InvalidArgument otherwise, here and in ReadTensor), opened without
// blocking.
StatusOr<std::vector<TensorRecord>> ReadShardIndex(const std::string& path);

// Reads the record at [offset, offset + bytes) of `path`, verifies its
// checksum and parses it. A mismatch is an IoError "PATH: checksum mismatch
// in tensor NAME; the checkpoint is corrupt" (`expected_name` names it).
StatusOr<TensorData> ReadTensor(const std::string& path, int64_t offset,
                                int64_t bytes,
                                const std::string& expected_name);

// ------------------------------------------------------- directory layout

// Megatron's tracker file and directory names (megatron/training/
// checkpointing.py: get_checkpoint_tracker_filename, iter_%07d).
inline constexpr char kTrackerFileName[] = "latest_checkpointed_iteration.txt";
inline constexpr char kMetadataFileName[] = "metadata.json";
std::string IterDirName(int64_t iteration);           // "iter_0000050"
std::string ShardFileName(int tp_rank, int pp_rank);  // "shard_tp0_pp1.bin"
// An expert shard (expert parallelism): "shard_ep1_etp0_pp0.bin".
std::string ExpertShardFileName(int ep_rank, int etp_rank, int pp_rank);

// The iteration named by dir/latest_checkpointed_iteration.txt; NotFound
// when there is none, InvalidArgument when it holds no iteration number or
// is not a regular file.
StatusOr<int64_t> ReadTracker(const std::string& dir);

// ---------------------------------------------------------- metadata.json

// One shard file and the records in it: the dense parameters of one (tp,
// pp) position, or (expert) the expert parameters of one (ep, etp, pp)
// position.
struct ShardIndex {
  std::string file;  // name inside the iteration directory
  int tp_rank = 0, pp_rank = 0;
  bool expert = false;
  int ep_rank = 0, etp_rank = 0;  // expert shards
  std::vector<TensorRecord> tensors;
};

struct CheckpointMetadata {
  int64_t iteration = 0;         // optimizer steps completed
  int64_t consumed_samples = 0;  // Megatron consumed_train_samples
  int64_t steps_taken = 0;       // Optimizer::steps_taken()
  // The model, for people and messages: tensors are matched by name and
  // global shape, never by these.
  std::string model_name;
  int64_t num_layers = 0, hidden_size = 0, num_attention_heads = 0;
  int64_t num_query_groups = 0, ffn_hidden_size = 0, vocab_size = 0;
  // The parallel layout of the run that saved it.
  int64_t tp = 1, pp = 1, vpp = 1, dp = 1;
  int64_t ep = 1, etp = 1;  // absent in older metadata: 1 and tp
  bool dist_opt = false;
  std::vector<ShardIndex> shards;
};

// metadata.json text (format name, version, then the fields above).
std::string EncodeMetadata(const CheckpointMetadata& meta);
// Parses the metadata.json at `path`: NotFound when it is missing (an
// incomplete checkpoint), IoError when it is malformed (not JSON, a field
// missing or of the wrong type), InvalidArgument for another format or
// version, for a path that is not a regular file (never opened, so a FIFO
// cannot block the reader), and for values that break the format's
// invariants (ValidateMetadata in the .cc: consumed_samples >= iteration >=
// 0, tp·pp shards each named shard_tp{t}_pp{p}.bin plus none or ep·etp·pp
// expert shards each named shard_ep{e}_etp{x}_pp{p}.bin, every block inside its
// tensor's shape, numel and record size consistent). Every message is one
// line naming the path.
StatusOr<CheckpointMetadata> ReadMetadata(const std::string& path);

// ------------------------------------------------------------ durable I/O

// Writes `contents` to `path` (created or truncated) and fsyncs it.
Status WriteFileDurably(const std::string& path, const std::string& contents);
// fsync of a directory, so renames and new entries in it are durable.
Status SyncDirectory(const std::string& path);

}  // namespace meshtune::engine

#endif  // MESHTUNE_ENGINE_CHECKPOINT_FORMAT_H_
