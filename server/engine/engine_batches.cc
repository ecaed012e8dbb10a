// Batches on lanes: plan what a free lane runs next, stage it (one metadata
// upload, one gather of the calls' input blocks), launch it, and complete it
// when its stream is done.
#include <algorithm>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "server/engine/batch_planner.h"
#include "server/engine/engine.h"
#include "server/engine/engine_internal.h"

namespace gdn {
namespace {

const char* Phase(bool decode) { return decode ? "decode" : "prefill"; }

size_t AlignUp(size_t n, size_t to) { return (n + to - 1) / to * to; }

// The page the lease keeps the state at `position` in, or kZeroStatePage.
int32_t KeptPageAt(const WriteLease& lease, int64_t position) {
  for (size_t i = 0; i < lease.keep_positions.size(); ++i) {
    if (lease.keep_positions[i] == position) return lease.keep_pages[i];
  }
  return kZeroStatePage;
}

}  // namespace

bool Engine::AnyLaneBusy() const {
  for (const auto& lane : lanes_) {
    if (lane->busy) return true;
  }
  return false;
}

bool Engine::PlanBatch(bool decode, std::vector<BatchEntry>* entries) {
  std::vector<PlanItem> items;
  std::vector<std::pair<RunningCall*, int>> owners;
  for (const auto& running : running_) {
    if (!running->failure.ok()) continue;
    const ForwardCall& call = *running->call;
    for (size_t i = 0; i < call.sequences.size(); ++i) {
      const int32_t total = call.sequences[i].num_tokens;
      if (running->planned_tokens[i] >= total) continue;
      if ((total <= kMaxDecodeTokens) != decode) continue;
      items.push_back({running->slots[i], total, running->planned_tokens[i]});
      owners.emplace_back(running.get(), static_cast<int>(i));
    }
  }
  if (items.empty()) return false;
  PlannerLimits limits;
  limits.max_batch_tokens = config_.max_batch_tokens;
  const BatchPlan plan = gdn::PlanBatch(items, limits);
  for (const PlannedChunk& chunk : decode ? plan.decode : plan.prefill) {
    entries->push_back({owners[chunk.item].first, owners[chunk.item].second, chunk.offset,
                        chunk.tokens});
  }
  return !entries->empty();
}

bool Engine::LaunchBatches(absl::Time now, bool stopping) {
  bool launched = false;
  for (const auto& lane_ptr : lanes_) {
    Lane& lane = *lane_ptr;
    if (lane.busy) continue;
    std::vector<BatchEntry> entries;
    if (!PlanBatch(lane.decode, &entries)) continue;
    int64_t tokens = 0;
    absl::Time oldest = absl::InfiniteFuture();
    for (const BatchEntry& e : entries) {
      tokens += e.tokens;
      oldest = std::min(oldest, e.call->call->enqueued);
    }
    // Adaptive batching: a batch goes as soon as a lane is free. Only with
    // max_queue_delay > 0, and only while another lane of this kind is busy,
    // does a partial batch wait (until its oldest call's deadline) for more.
    if (config_.max_queue_delay > absl::ZeroDuration() && !stopping &&
        tokens < config_.max_batch_tokens && now < oldest + config_.max_queue_delay) {
      bool kind_busy = false;
      for (const auto& other : lanes_) kind_busy |= other->busy && other->decode == lane.decode;
      if (kind_busy) continue;
    }
    // The launch itself, after this step's admission and planning (`now`
    // is the step's start): the queue delay and the lane's time from here.
    const absl::Time launch = absl::Now();
    for (const BatchEntry& e : entries) {
      RunningCall& running = *e.call;
      running.planned_tokens[e.seq] = e.offset + e.tokens;
      ++running.batches_in_flight;
      if (!running.started) {
        running.started = true;
        if (metrics_ != nullptr) {
          metrics_->RecordQueueDelay(running.call->method, launch - running.call->enqueued);
        }
      }
    }
    lane.entries = std::move(entries);
    lane.tokens = tokens;
    lane.launched = launch;
    lane.busy = true;
    launched = true;
    if (metrics_ != nullptr) metrics_->RecordBatchLaunched(Phase(lane.decode));
    if (config_.diagnostic_no_compute) {
      CompleteLane(lane, absl::OkStatus());  // no kernel: done at once
      continue;
    }
    const absl::Status s = StageAndLaunch(lane);
    if (s.ok()) {
      if (metrics_ != nullptr) metrics_->RecordBatchStaged(Phase(lane.decode), absl::Now() - launch);
      continue;
    }
    (void)lane.stream->Synchronize();  // nothing of it may still run
    CompleteLane(lane, absl::Status(s.code() == absl::StatusCode::kInvalidArgument
                                        ? absl::StatusCode::kInternal
                                        : s.code(),
                                    absl::StrCat(Phase(lane.decode),
                                                 " kernel call failed: ", s.message())));
  }
  return launched;
}

absl::Status Engine::StageAndLaunch(Lane& lane) {
  const LayerShape& shape = config_.options.shape;
  const DType dtype = config_.options.input_dtype;
  const size_t n = lane.entries.size();
  const InputLayout layout = InputLayout::For(shape, dtype, lane.tokens);
  const size_t o_bytes = static_cast<size_t>(lane.tokens) * layout.v_row;

  // Whether the batch is exactly one whole call (the usual model-runner
  // call), its sequences in order.
  const RunningCall* first = lane.entries[0].call;
  const ForwardCall& first_call = *first->call;
  const std::shared_ptr<IoBlock>& first_block = first_call.inputs.block;
  bool whole_call = n == first_call.sequences.size();
  for (size_t i = 0; whole_call && i < n; ++i) {
    const BatchEntry& e = lane.entries[i];
    whole_call = e.call == first && e.seq == static_cast<int>(i) && e.offset == 0 &&
                 e.tokens == first_call.sequences[i].num_tokens;
  }
  // Such a call whose inputs all lie in device memory (CUDA regions) is read
  // by the kernel where it lies, and one whose o region is device memory
  // gets o written there by the kernel: no gather, no copy.
  const bool direct_inputs = whole_call && first_call.inputs.AllOnDevice();
  const bool direct_o = whole_call && first_call.o_region_on_device &&
                        reinterpret_cast<uintptr_t>(first_call.o_region) % 16 == 0;

  // o comes down into an I/O block that the responses are sent from, unless
  // every call of the batch named an output region.
  bool any_o_to_host = false, any_o_region = false;
  for (const BatchEntry& e : lane.entries) {
    any_o_to_host |= e.call->call->o_region == nullptr;
    any_o_region |= e.call->call->o_region != nullptr;
  }
  if (any_o_to_host) {
    absl::StatusOr<std::shared_ptr<IoBlock>> o_block = arena_->Acquire(o_bytes);
    if (!o_block.ok()) return o_block.status();
    lane.o_block = std::move(*o_block);
  }
  // --decode_o_direct: a decode kernel writes o straight into that pinned
  // block (Backend::AllocateHost memory is device-addressable; the writes
  // are posted over the bus while the kernel streams its states), sparing
  // the copy back and its latency. Not with output regions (their rows are
  // copied from device memory) nor for prefill (o is large and written in
  // chunk tiles).
  const bool o_direct = lane.decode && config_.decode_o_direct && any_o_to_host && !any_o_region;

  // The batch's inputs otherwise: one copy of the whole block when the
  // batch is one whole call sent inline, else a gather of each entry's rows
  // of each tensor from wherever it lies (its call's block or a region) in
  // pieces of at most kGatherCopyMaxBytes.
  const bool block_call = whole_call && first_call.inputs.all_in_block();
  std::vector<int32_t> cu(n + 1, 0);
  for (size_t i = 0; i < n; ++i) cu[i + 1] = cu[i] + lane.entries[i].tokens;

  // The metadata block: [cu N + 1 | initial N | final N | pad | items]. For
  // a batch of one whole call it goes into the slack of the call's own block
  // right after its inputs, and one upload carries both; otherwise it comes
  // from the lane's buffer in an upload of its own, and the gather follows.
  //
  // Drafts (decode batches only) add per-token state pages after the final
  // pages: kMaxDecodeTokens - 1 slots per sequence (GdnParams'
  // kPerTokenStates), kZeroStatePage for the sequences that are not drafts.
  // Kept states (prefill batches only; chunks start at multiples of
  // kCheckpointTokens within their call) use the same slots at
  // kCheckpointTokens: slot m of an entry is the state after (m + 1) * 64
  // tokens of its chunk, a kept page when that position is kept.
  bool any_draft = false, any_keep = false;
  int32_t keep_slots = 0;
  for (const BatchEntry& e : lane.entries) {
    any_draft |= e.call->call->sequences[e.seq].draft;
    if (!e.call->leases[e.seq].keep_pages.empty()) {
      any_keep = true;
      keep_slots = std::max(keep_slots, CheckpointCount(e.tokens, kCheckpointTokens));
    }
  }
  constexpr int32_t kDraftSlots = kMaxDecodeTokens - 1;
  const int32_t slots_per_seq = any_draft ? kDraftSlots : keep_slots;
  const size_t draft_slots = n * slots_per_seq;
  const size_t pages_at = (n + 1) * sizeof(int32_t);
  const size_t items_at = AlignUp(pages_at + (2 * n + draft_slots) * sizeof(int32_t), 16);
  const size_t meta_at = InputLayout::Align(layout.bytes);  // the one-upload form
  const bool one_upload = block_call && meta_at + items_at <= first_block->capacity;
  std::vector<GatherCopy> items;
  if (block_call && !one_upload) {
    items.push_back({first_block->data, 0, layout.bytes});
  } else if (!block_call && !direct_inputs) {
    for (size_t i = 0; i < n; ++i) {
      const BatchEntry& e = lane.entries[i];
      const PackedInputs& in = e.call->call->inputs;
      const uint64_t src_row = e.call->call->sequences[e.seq].row_offset + e.offset;
      const uint64_t dst_row = cu[i];
      const uint64_t rows = e.tokens;
      const size_t dst_at[PackedInputs::kCount] = {layout.q, layout.k, layout.v, layout.g,
                                                   layout.beta};
      for (int t = 0; t < PackedInputs::kCount; ++t) {
        const size_t row = in.row_bytes(t);
        AppendGatherCopies(in.source[t] + src_row * row, dst_at[t] + dst_row * row, rows * row,
                           &items);
      }
    }
  }
  const size_t meta_bytes = items_at + items.size() * sizeof(GatherCopy);
  const size_t input_bytes = one_upload ? meta_at + meta_bytes : direct_inputs ? 0 : layout.bytes;
  if (absl::Status s = lane.device_inputs.Reserve(input_bytes); !s.ok()) return s;
  if (!one_upload) {
    for (GrowBuffer* b : {&lane.host_meta, &lane.device_meta}) {
      if (absl::Status s = b->Reserve(meta_bytes); !s.ok()) return s;
    }
  }
  if (!o_direct) {
    if (absl::Status s = lane.device_o.Reserve(o_bytes); !s.ok()) return s;
  }
  char* meta = one_upload ? first_block->data + meta_at : lane.host_meta.data();
  std::memcpy(meta, cu.data(), pages_at);
  int32_t* initial = reinterpret_cast<int32_t*>(meta + pages_at);
  int32_t* final_pages = initial + n;
  for (size_t i = 0; i < n; ++i) {
    const BatchEntry& e = lane.entries[i];
    const WriteLease& lease = e.call->leases[e.seq];
    // A first chunk reads the stored state; later chunks continue from the
    // page the earlier chunks of this call wrote.
    initial[i] = e.offset == 0 ? lease.read_page : lease.write_page;
    final_pages[i] = lease.write_page;
    for (int32_t j = 0; any_draft && j < kDraftSlots; ++j) {
      final_pages[n + i * kDraftSlots + j] =
          j + 1 < lease.draft_tokens ? lease.draft_pages[j] : kZeroStatePage;
    }
    for (int32_t j = 0; !any_draft && j < keep_slots; ++j) {
      final_pages[n + i * keep_slots + j] = KeptPageAt(
          lease, e.call->call->sequences[e.seq].position + e.offset + (j + 1) * kCheckpointTokens);
    }
  }
  // No gather items (inputs all in one block) leaves items.data() null, and
  // memcpy from null is undefined even for 0 bytes (UBSan, test.sh --sanitize).
  if (!items.empty()) {
    std::memcpy(meta + items_at, items.data(), items.size() * sizeof(GatherCopy));
  }
  lane.cu = reinterpret_cast<const int32_t*>(meta);

  BackendStream& stream = *lane.stream;
  char* inputs = lane.device_inputs.data();
  char* device_meta = one_upload ? inputs + meta_at : lane.device_meta.data();
  if (one_upload) {
    if (absl::Status s = stream.CopyToDevice(inputs, first_block->data, input_bytes); !s.ok()) {
      return s;
    }
  } else {
    if (absl::Status s = stream.CopyToDevice(device_meta, meta, meta_bytes); !s.ok()) return s;
  }
  // Pages restored or imported by the cache, and earlier chunks of these
  // states on other lanes, come first.
  if (absl::Status s = stream.WaitForBackend(); !s.ok()) return s;
  for (const BatchEntry& e : lane.entries) {
    const int other = slots_[e.call->slots[e.seq]].lane;
    if (other >= 0 && other != lane.index) {
      if (absl::Status s = stream.WaitFor(*lanes_[other]->stream); !s.ok()) return s;
    }
  }
  if (!one_upload && !items.empty()) {
    if (absl::Status s = stream.Gather(inputs, items.data(),
                                       reinterpret_cast<const GatherCopy*>(device_meta + items_at),
                                       static_cast<int>(items.size()));
        !s.ok()) {
      return s;
    }
  }

  GdnParams p;
  p.num_seqs = static_cast<int32_t>(n);
  p.total_tokens = static_cast<int32_t>(lane.tokens);
  p.cu_seqlens = reinterpret_cast<const int32_t*>(device_meta);
  p.cu_seqlens_host = lane.cu;
  const PackedInputs& direct = first_call.inputs;
  p.q = direct_inputs ? direct.source[PackedInputs::kQ] : inputs + layout.q;
  p.k = direct_inputs ? direct.source[PackedInputs::kK] : inputs + layout.k;
  p.v = direct_inputs ? direct.source[PackedInputs::kV] : inputs + layout.v;
  p.g = reinterpret_cast<const float*>(direct_inputs ? direct.source[PackedInputs::kG]
                                                     : inputs + layout.g);
  p.beta = reinterpret_cast<const float*>(direct_inputs ? direct.source[PackedInputs::kBeta]
                                                        : inputs + layout.beta);
  p.o = direct_o ? first_call.o_region : o_direct ? lane.o_block->data : lane.device_o.data();
  p.initial_pages = reinterpret_cast<const int32_t*>(device_meta + pages_at);
  p.final_pages = p.initial_pages + n;
  if (slots_per_seq > 0) {
    p.checkpoint_interval = any_draft ? kPerTokenStates : kCheckpointTokens;
    p.checkpoints_per_seq = slots_per_seq;
    p.checkpoint_pages = p.final_pages + n;
  }
  p.pool = cache_->pool();
  absl::Status launched = lane.decode ? stream.Decode(kernel_options_, p)
                                      : stream.Prefill(kernel_options_, p);
  if (!launched.ok()) return launched;
  // A kept position at the end of a chunk that is not its call's last is in
  // the final page only until the next chunk: copied now, on this stream.
  for (size_t i = 0; any_keep && i < n; ++i) {
    const BatchEntry& e = lane.entries[i];
    const ForwardSequence& seq = e.call->call->sequences[e.seq];
    const WriteLease& lease = e.call->leases[e.seq];
    const int32_t page = KeptPageAt(lease, seq.position + e.offset + e.tokens);
    if (page == kZeroStatePage || e.offset + e.tokens == seq.num_tokens) continue;
    char* base = static_cast<char*>(p.pool.base);
    const GatherCopy item{base + int64_t{lease.write_page} * p.pool.page_bytes, 0,
                          static_cast<size_t>(p.pool.page_bytes)};
    if (absl::Status s = stream.Gather(base + int64_t{page} * p.pool.page_bytes, &item, nullptr, 1);
        !s.ok()) {
      return s;
    }
  }
  if (lane.o_block != nullptr && !o_direct) {
    if (absl::Status s = stream.CopyToHost(lane.o_block->data, p.o, o_bytes); !s.ok()) return s;
  }
  if (!direct_o) {
    if (absl::Status s = CopyOToRegions(lane, static_cast<const char*>(p.o), layout.v_row);
        !s.ok()) {
      return s;
    }
  }
  if (absl::Status s = stream.Record(); !s.ok()) return s;
  for (const BatchEntry& e : lane.entries) slots_[e.call->slots[e.seq]].lane = lane.index;
  return absl::OkStatus();
}

// o rows of calls that named an output region go there straight from the
// device: one copy per run of rows that is contiguous in both the batch and
// the call (a whole call in one batch is one copy).
absl::Status Engine::CopyOToRegions(Lane& lane, const char* device_o, size_t v_row) {
  char* run_dst = nullptr;
  const char* run_src = nullptr;
  size_t run_bytes = 0;
  auto flush = [&]() -> absl::Status {
    if (run_bytes == 0) return absl::OkStatus();
    const GatherCopy item{run_src, 0, run_bytes};
    run_bytes = 0;
    return lane.stream->Gather(run_dst, &item, nullptr, 1);
  };
  int64_t row = 0;  // the entry's first row in the batch
  for (const BatchEntry& e : lane.entries) {
    const ForwardCall& call = *e.call->call;
    const size_t bytes = static_cast<size_t>(e.tokens) * v_row;
    if (call.o_region != nullptr) {
      char* dst = call.o_region + (call.sequences[e.seq].row_offset + e.offset) * v_row;
      const char* src = device_o + row * v_row;
      if (run_bytes > 0 && run_dst + run_bytes == dst && run_src + run_bytes == src) {
        run_bytes += bytes;
      } else {
        if (absl::Status s = flush(); !s.ok()) return s;
        run_dst = dst;
        run_src = src;
        run_bytes = bytes;
      }
    }
    row += e.tokens;
  }
  return flush();
}

bool Engine::CompleteLanes() {
  bool any = false;
  for (const auto& lane : lanes_) {
    if (!lane->busy) continue;
    absl::StatusOr<bool> done = lane->stream->Query();
    if (done.ok() && !*done) continue;
    CompleteLane(*lane, done.ok() ? absl::OkStatus()
                                  : absl::Status(done.status().code(),
                                                 absl::StrCat(Phase(lane->decode),
                                                              " batch failed on the device: ",
                                                              done.status().message())));
    any = true;
  }
  return any;
}

void Engine::CompleteLane(Lane& lane, absl::Status status) {
  const absl::Time now = absl::Now();
  const size_t v_row = InputLayout::For(config_.options.shape, config_.options.input_dtype, 0).v_row;
  int64_t row = 0;  // the entry's first row in the batch
  for (const BatchEntry& e : lane.entries) {
    RunningCall& running = *e.call;
    --running.batches_in_flight;
    auto& slot = slots_[running.slots[e.seq]];
    if (slot.lane == lane.index) slot.lane = -1;
    const size_t bytes = static_cast<size_t>(e.tokens) * v_row;
    if (!status.ok()) {
      if (running.failure.ok()) running.failure = status;
    } else if (running.call->o_region != nullptr) {
      running.done_tokens[e.seq] += e.tokens;  // o is in the region already
    } else {
      // Chunks of one sequence on two lanes may be seen done in either order.
      running.done_tokens[e.seq] += e.tokens;
      const int64_t call_row = running.call->sequences[e.seq].row_offset + e.offset;
      wire::BytesRef run;
      if (config_.diagnostic_no_compute) {
        // Zeros at the call's own rows (adjacent runs merge; never past the
        // call's o, which is smaller than its request).
        run = {zeros_.get() + call_row * v_row, bytes, zeros_};
      } else {
        run = {lane.o_block->data + row * v_row, bytes, lane.o_block};
      }
      running.o.emplace_back(call_row, std::move(run));
    }
    row += e.tokens;
  }
  if (metrics_ != nullptr) {
    metrics_->RecordBatch(Phase(lane.decode), static_cast<int>(lane.entries.size()), lane.tokens,
                          now - lane.launched);
  }
  lane.busy = false;
  lane.entries.clear();
  lane.o_block.reset();
  lane.cu = nullptr;
  for (auto it = running_.begin(); it != running_.end();) {
    auto next = std::next(it);
    const RunningCall& running = **it;
    if (running.batches_in_flight == 0) {
      if (!running.failure.ok()) {
        FinishCall(it, running.failure);
      } else if (running.finished()) {
        FinishCall(it, absl::OkStatus());
      }
    }
    it = next;
  }
}

}  // namespace gdn
