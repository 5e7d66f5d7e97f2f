// The CPU expert server of a hybrid decoder: one thread that, while a forward
// is in flight, spins on the host-mapped mailbox, runs the CPU's share of each
// MoE layer the GPU posts (options.cpu.run) and answers; between forwards it
// sleeps. The GPU side (hybrid_post / hybrid_wait) is in moe_block.
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <mutex>

#include "cuda/decoder_impl.h"

namespace guild::cuda {

void CudaDecoder::Impl::server_loop() {
  uint32_t last = 0;
  for (;;) {
    {
      std::unique_lock<std::mutex> lk(server_mu);
      server_cv.wait(lk, [&] { return server_stop || serving.load(); });
      if (server_stop) return;
    }
    while (serving.load(std::memory_order_acquire)) {
      const uint32_t s = __atomic_load_n(&mailbox->req_seq, __ATOMIC_ACQUIRE);
      if (s == last) {
        __builtin_ia32_pause();
        continue;
      }
      last = s;
      const int layer = mailbox->layer, n = mailbox->n;
      if (layer >= 0 && layer < static_cast<int>(layers.size()) && n >= 1 && n <= L.T)
        opt.cpu.run(opt.cpu.ctx, layer, n, h_xn, h_ids, h_w, layers[layer].owner_of.data(), h_out);
      __atomic_store_n(&mailbox->done_seq, s, __ATOMIC_RELEASE);
    }
  }
}

void CudaDecoder::Impl::start_serving() {
  if (!L.hybrid) return;
  {
    std::lock_guard<std::mutex> lk(server_mu);
    serving.store(true);
  }
  server_cv.notify_one();
}

void CudaDecoder::Impl::stop_serving() { serving.store(false); }

}  // namespace guild::cuda
