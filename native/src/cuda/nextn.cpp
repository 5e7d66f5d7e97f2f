// The MTP ("nextn") block on the device (DecoderOptions::nextn): a drafter
// for speculative windows beside the trunk (runtime/mtp_drafter.h has the
// protocol, models/decoder_forward.h nextn_forward the CPU's same math).
// Its weights and experts are resident in every placement; its KV follows
// the trunk's layers; the trunk's forward leaves its h rows in the h table.
#include <cstring>
#include <string>

#include "cuda/cuda_error.h"
#include "cuda/decoder_impl.h"

namespace guild::cuda {

bool CudaDecoder::Impl::enqueue_nextn(const float* h_src, int n, bool head) {
  const int d = hp.n_embd;
  float* h_in = const_cast<float*>(h_src);  // read only (rms_norm adds nothing into it)
  // concat(enorm(embed(t)), hnorm(h)) -> eh_proj -> the block's residual rows.
  cudaError_t e = get_rows(nextn.embed, d_tokens, n, x, d, stream);
  if (e == cudaSuccess) e = rms_norm(x, nullptr, nextn.enorm, hp.rms_eps, n, d, xn, nullptr, nullptr, 0, stream);
  if (e == cudaSuccess) e = rms_norm(h_in, nullptr, nextn.hnorm, hp.rms_eps, n, d, ffn_down, nullptr, nullptr, 0, stream);
  if (e == cudaSuccess) e = concat_rows(xn, ffn_down, n, d, nextn.cat, stream);
  if (e != cudaSuccess) return fail("MTP block input", e);
  Src cs{nextn.cat, n, 2 * d};
  if (!matmul(nextn.eh_proj, cs, x, d, false)) return false;
  if (rope.n_rot > 0 && (e = rope_table(rope, d_pos0, n, rope_cs, stream)) != cudaSuccess) return fail("rope_table", e);
  const Layer& ly = nextn.block;
  if (!attention_block(ly, n)) return false;
  if (ly.moe ? !moe_block(ly, hp.n_layer, n) : !dense_block(ly, n)) return false;
  if (!head) return true;
  // The last row's output after shared_head_norm (the next step's h), its logits, argmax and top-1 probability.
  float* last = x + static_cast<int64_t>(n - 1) * d;
  e = rms_norm(last, nullptr, nextn.shared_head_norm, hp.rms_eps, 1, d, nextn.h_step, nullptr, nullptr, 0, stream);
  if (e != cudaSuccess) return fail("rms_norm (MTP head)", e);
  Src hs{nextn.h_step, 1, d};
  if (!matmul(nextn.head, hs, logits, hp.n_vocab, false)) return false;
  if ((e = argmax_rows(logits, 1, hp.n_vocab, d_argmax, argmax_work, stream)) != cudaSuccess) return fail("argmax_rows", e);
  e = top1_probability(logits, hp.n_vocab, nextn.p_top1, stream);
  return e == cudaSuccess || fail("top1_probability", e);
}

bool CudaDecoder::has_nextn() const { return impl_->nextn.on; }

namespace {

bool check_rows(const CudaDecoder::Impl& I, const int32_t* tokens, int n, int pos0, std::string* error) {
  if (!I.nextn.on) {
    *error = "CUDA decoder: the decoder has no MTP block (DecoderOptions::nextn)";
    return false;
  }
  if (!tokens || n < 1 || n > I.L.T || pos0 < 0 || pos0 + n > I.opt.n_ctx) {
    *error = "CUDA decoder: bad MTP rows (n=" + std::to_string(n) + ", pos0=" + std::to_string(pos0) + ")";
    return false;
  }
  return I.tokens_in_vocab(tokens, n, error);
}

bool finish(CudaDecoder::Impl& I, bool ok, std::string* error) {
  const cudaError_t e = cudaStreamSynchronize(I.stream);
  if (ok && e == cudaSuccess) return true;
  *error = "CUDA decoder: " + (ok ? cuda_msg("MTP block", e) : I.err);
  cudaGetLastError();
  return false;
}

}  // namespace

bool CudaDecoder::nextn_feed(const int32_t* tokens, int h_row, int n, int pos0, std::string* error) {
  Impl& I = *impl_;
  if (!check_rows(I, tokens, n, pos0, error)) return false;
  if (h_row < 0 || h_row + n > I.L.T + 1) {
    *error = "CUDA decoder: MTP h rows " + std::to_string(h_row) + ".." + std::to_string(h_row + n - 1) +
             " outside the h table of " + std::to_string(I.L.T + 1);
    return false;
  }
  cudaError_t e = cudaSetDevice(I.opt.device);
  if (e != cudaSuccess) { *error = cuda_msg("cudaSetDevice", e); return false; }
  if (!I.stage_inputs(tokens, n, pos0, error)) return false;
  I.decode_range = I.decode_range_of(pos0);
  return finish(I, I.enqueue_nextn(I.nextn.h_table + static_cast<int64_t>(h_row) * I.hp.n_embd, n, false), error);
}

bool CudaDecoder::nextn_hold(int row, std::string* error) {
  Impl& I = *impl_;
  if (!I.nextn.on || row > I.L.T) {
    *error = "CUDA decoder: nextn_hold: no MTP block, or row " + std::to_string(row) + " outside the h table";
    return false;
  }
  cudaError_t e = cudaSetDevice(I.opt.device);
  const size_t bytes = static_cast<size_t>(I.hp.n_embd) * 4;
  if (e == cudaSuccess)
    e = row < 0 ? cudaMemsetAsync(I.nextn.h_table, 0, bytes, I.stream)
        : row > 0 ? cudaMemcpyAsync(I.nextn.h_table, I.nextn.h_table + static_cast<int64_t>(row) * I.hp.n_embd, bytes,
                                    cudaMemcpyDeviceToDevice, I.stream)
                  : cudaSuccess;
  if (e == cudaSuccess) return true;
  *error = "CUDA decoder: " + cuda_msg("nextn_hold", e);
  return false;
}

bool CudaDecoder::nextn_step(int32_t token, bool from_step, int pos, int32_t* top1, float* p_top1, std::string* error) {
  Impl& I = *impl_;
  if (!check_rows(I, &token, 1, pos, error)) return false;
  cudaError_t e = cudaSetDevice(I.opt.device);
  if (e != cudaSuccess) { *error = cuda_msg("cudaSetDevice", e); return false; }
  if (!I.stage_inputs(&token, 1, pos, error)) return false;
  I.decode_range = I.decode_range_of(pos);
  int32_t* out = I.h_pinned + 2 * I.L.T + 2;  // [argmax][p bits]
  bool ok = I.enqueue_nextn(from_step ? I.nextn.h_step : I.nextn.h_table, 1, true);
  if (ok) {
    ok = (e = cudaMemcpyAsync(out, I.d_argmax, 4, cudaMemcpyDeviceToHost, I.stream)) == cudaSuccess &&
         (e = cudaMemcpyAsync(out + 1, I.nextn.p_top1, 4, cudaMemcpyDeviceToHost, I.stream)) == cudaSuccess;
    if (!ok) I.err = cuda_msg("cudaMemcpyAsync (MTP result)", e);
  }
  if (!finish(I, ok, error)) return false;
  *top1 = out[0];
  std::memcpy(p_top1, out + 1, sizeof(float));
  return true;
}

}  // namespace guild::cuda
