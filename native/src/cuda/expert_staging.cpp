// Streamed prefill: a big batch brings a hybrid layer's uncached experts to
// the GPU instead of posting their choices to the CPU. stage_layer copies them
// into the staging area (on the copy stream; through the pinned ring where
// the host stacks are pageable), ordered with the main stream by
// staging_free and join_staged. Also the public threshold and counter.
#include <algorithm>
#include <cstdint>
#include <utility>

#include "cuda/decoder_impl.h"

namespace guild::cuda {

// The layer's uncached experts, packed in the staging area at stage_of[e]
// (runs of consecutive uncached experts in one copy each); cached experts
// are read from the cache where they are.
bool CudaDecoder::Impl::stage_layer(const Layer& ly) {
  cudaError_t e = cudaSuccess;
  // Pinned host copies: DMA straight from them; otherwise through the pinned
  // ring when there is one; else the driver's pageable path.
  const bool use_ring = ring != nullptr && !ly.host_pinned;
  const bool side = copy_stream != nullptr;  // copies on the copy stream (after staging_free), joined below
  cudaStream_t cs = side ? copy_stream : stream;
  for (auto [dst, host] : {std::pair{&ly.staged.gate, &ly.host_gate}, {&ly.staged.up, &ly.host_up},
                           {&ly.staged.down, &ly.host_down}}) {
    uint8_t* base = static_cast<uint8_t*>(const_cast<void*>(dst->data));
    const size_t rows = static_cast<size_t>(host->first.n_out), rb = host->first.row_bytes;
    for (int e0 = 0; e0 < hp.n_expert && e == cudaSuccess;) {
      if (ly.slot_of[e0] >= 0) {
        ++e0;
        continue;
      }
      int e1 = e0 + 1;
      while (e1 < hp.n_expert && ly.slot_of[e1] < 0) ++e1;
      uint8_t* d = base + static_cast<size_t>(ly.stage_of[e0]) * dst->expert_stride;
      const uint8_t* h = host->first.data + static_cast<size_t>(e0) * host->expert_bytes;
      const size_t total_rows = rows * static_cast<size_t>(e1 - e0);
      if (!use_ring) {
        e = cudaMemcpy2DAsync(d, dst->row_stride, h, rb, rb, total_rows, cudaMemcpyHostToDevice, cs);
      } else {
        e = ring_copy(d, dst->row_stride, h, rb, total_rows);
      }
      e0 = e1;
    }
  }
  if (e == cudaSuccess && side && (e = cudaEventRecord(ev_staged, copy_stream)) != cudaSuccess)
    return fail("expert staging (record)", e);
  return e == cudaSuccess || fail("expert staging copy", e);
}

// The copy stream may overwrite the staging area only once the main stream
// is done with the previous layer's staged experts: called where that is
// so, before the main stream gets more work (the cached pass), so the
// copies overlap it.
bool CudaDecoder::Impl::staging_free() {
  cudaError_t e = cudaSuccess;
  if (copy_stream && ((e = cudaEventRecord(ev_main_ready, stream)) != cudaSuccess ||
                      (e = cudaStreamWaitEvent(copy_stream, ev_main_ready, 0)) != cudaSuccess))
    return fail("expert staging (order)", e);
  return true;
}

// The main stream waits for stage_layer's copies (issued on the copy stream,
// so they overlap whatever the main stream does in between).
bool CudaDecoder::Impl::join_staged() {
  cudaError_t e = cudaSuccess;
  return !copy_stream || (e = cudaStreamWaitEvent(stream, ev_staged, 0)) == cudaSuccess || fail("expert staging (join)", e);
}

// rows x rb bytes from host h (rows rb apart) to device d (rows pitch
// apart), through the pinned ring: whole rows per slot; the host copy of a
// slot waits until that slot's previous DMA is done, so filling slot i+1
// overlaps the DMA of slot i.
cudaError_t CudaDecoder::Impl::ring_copy(uint8_t* d, size_t pitch, const uint8_t* h, size_t rb, size_t rows) {
  const size_t rows_per_slot = std::max<size_t>(1, ring_slot_bytes / rb);
  cudaError_t e = cudaSuccess;
  for (size_t r0 = 0; r0 < rows && e == cudaSuccess; r0 += rows_per_slot) {
    const size_t n = std::min(rows_per_slot, rows - r0);
    const int s = ring_next;
    ring_next = (ring_next + 1) % kRingSlots;
    if ((e = cudaEventSynchronize(slot_free[s])) != cudaSuccess) break;
    uint8_t* slot = ring + static_cast<size_t>(s) * ring_slot_bytes;
    opt.host_copy.copy(opt.host_copy.ctx, slot, h + r0 * rb, n * rb);
    if ((e = cudaMemcpy2DAsync(d + r0 * pitch, pitch, slot, rb, rb, n, cudaMemcpyHostToDevice, copy_stream)) != cudaSuccess)
      break;
    e = cudaEventRecord(slot_free[s], copy_stream);
  }
  return e;
}

void CudaDecoder::set_stream_min_tokens(int n) { impl_->stream_min = impl_->staging_mem ? std::max(0, n) : 0; }
int CudaDecoder::stream_min_tokens() const { return impl_->stream_min; }
uint64_t CudaDecoder::streamed_layers() const { return impl_->streamed; }

}  // namespace guild::cuda
