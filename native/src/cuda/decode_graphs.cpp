// Decode graphs: a single-token step is captured once per range of positions
// (decode attention's grid follows the range's end, its head split the
// start) and replayed by forward(); drop_graph forgets them when something
// they hold as a kernel argument changes. The graph switches and counters of
// the public interface too.
#include <string>

#include "cuda/cuda_error.h"
#include "cuda/decoder_impl.h"

namespace guild::cuda {

// The captured decode steps are recaptured at the next single-token steps
// (after a change to something they have as a kernel argument).
void CudaDecoder::Impl::drop_graph() {
  for (cudaGraphExec_t& g : graph_execs) {
    if (g) cudaGraphExecDestroy(g);
    g = nullptr;
  }
}

// The single-token step for positions below decode_range_end(range).
bool CudaDecoder::Impl::capture_decode_graph(int range) {
  decode_range = range;
  cudaError_t e = cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal);
  if (e != cudaSuccess) return fail("cudaStreamBeginCapture", e);
  const bool ok = enqueue_body(1) && enqueue_head(0, 1);
  cudaGraph_t g = nullptr;
  e = cudaStreamEndCapture(stream, &g);
  if (!ok) {
    if (g) cudaGraphDestroy(g);
    return false;
  }
  if (e != cudaSuccess) return fail("cudaStreamEndCapture", e);
  e = cudaGraphInstantiate(&graph_execs[range], g, 0);
  cudaGraphDestroy(g);  // the executable graph is independent of it
  if (e != cudaSuccess) {
    graph_execs[range] = nullptr;
    return fail("cudaGraphInstantiate", e);
  }
  ++captures;
  return true;
}

void CudaDecoder::set_use_graphs(bool on) { impl_->opt.use_graphs = on; }
bool CudaDecoder::use_graphs() const { return impl_->opt.use_graphs; }
int CudaDecoder::graph_replays() const { return impl_->replays; }
int CudaDecoder::graph_captures() const { return impl_->captures; }

bool CudaDecoder::prepare_graphs(int first, int last, std::string* error) {
  Impl& I = *impl_;
  if (first < 0 || last < first || last >= I.opt.n_ctx) {
    *error = "CUDA decoder: prepare_graphs: positions " + std::to_string(first) + ".." + std::to_string(last) +
             " outside the context of " + std::to_string(I.opt.n_ctx);
    return false;
  }
  if (!I.opt.use_graphs) return true;
  cudaError_t e = cudaSetDevice(I.opt.device);
  if (e != cudaSuccess) { *error = cuda_msg("cudaSetDevice", e); return false; }
  for (int k = I.decode_range_of(first); k <= I.decode_range_of(last); ++k) {
    if (!I.ensure_graph(k)) {
      *error = "CUDA decoder: " + I.err;
      return false;
    }
  }
  return true;
}

}  // namespace guild::cuda
