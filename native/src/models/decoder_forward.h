// The CPU executor of a model's recipe (models/recipe.h): embed → for each
// layer, its steps in order (norm, attention, routed experts or dense FFN,
// residual) → final norm → lm_head. It knows no architecture: what differs
// between them is a parameter of a step. Every intermediate has a named
// buffer in DecoderScratch, sized once.
#pragma once
#include <cstdint>
#include <vector>

#include "core/kernel_table.h"
#include "core/thread_pool.h"
#include "models/hparams.h"
#include "models/recipe.h"
#include "models/weights.h"
#include "ops/moe.h"
#include "runtime/kv_cache.h"

namespace guild {

// How many elements each DecoderScratch buffer gets: computed in one place
// for init() and for the memory a session will need before it is created
// (runtime/session_memory.h), so the estimate is what is allocated.
struct DecoderScratchSizes {
  size_t x = 0, xn = 0, q = 0, k = 0, v = 0, attn = 0, block_out = 0, rope_cs = 0;  // floats
  size_t nextn_in = 0;  // floats: [T][2 n_embd] concat(e, h) of the MTP block (0 without one)
  size_t scores = 0;                  // floats, n_threads slices (the per-thread part)
  int attn_tile_rows = 0;
  size_t router_logits = 0, ffn_gate = 0, ffn_up = 0, ffn_down = 0, norm_out = 0;  // floats
  size_t act_in = 0, act_in2 = 0, act_ffn = 0;                                     // bytes
  size_t rows_in = 0, rows_in2 = 0, rows_ffn = 0;                                  // pointers
  // ExpertRouting::reserve(max_tokens, k, n_expert): int32/float elements.
  size_t routing_elems = 0;

  uint64_t per_thread_bytes() const { return uint64_t{scores} * sizeof(float); }
  uint64_t bytes() const;  // everything, per-thread part included
};

struct DecoderScratch {
  int max_tokens = 0;
  std::vector<float> x;          // [T][n_embd] residual stream
  std::vector<float> xn;         // [T][n_embd] normed input of a block
  std::vector<float> q;          // [T][n_head * head_dim_k]
  std::vector<float> k;          // [T][n_head_kv * head_dim_k]
  std::vector<float> v;          // [T][n_head_kv * head_dim_v]
  std::vector<float> attn;       // [T][n_head * head_dim_v]
  std::vector<float> block_out;  // [T][n_embd] attention or FFN output before the residual add
  std::vector<float> rope_cs;    // [T][n_rot] cos/sin per position
  std::vector<float> scores;     // [threads][attn_tile_rows][n_ctx] attention scores
  int attn_tile_rows = 0;        // query rows per attention task (scores rows per thread)
  std::vector<float> router_logits;  // [T][n_expert]
  ExpertRouting routing;
  std::vector<float> ffn_gate;   // [T*k][n_ff] (dense: [T][n_ff])
  std::vector<float> ffn_up;     // [T*k][n_ff]
  std::vector<float> ffn_down;   // [T*k][n_embd]
  std::vector<float> norm_out;   // [T][n_embd] final-norm rows for the lm_head
  std::vector<float> nextn_in;   // [T][2 n_embd] the MTP block's eh_proj input
  // Activations converted to the weights' vec_dot types.
  std::vector<uint8_t> act_in;   // block input (xn / attn), T rows
  std::vector<uint8_t> act_in2;  // same input in a second type when matrices differ
  std::vector<uint8_t> act_ffn;  // FFN hidden rows, T*k rows
  std::vector<const uint8_t*> rows_in, rows_in2, rows_ffn;

  static DecoderScratchSizes sizes(const ModelHparams& hp, int max_tokens, int n_ctx, int n_threads);
  // Sizes every buffer; false on allocation failure.
  bool init(const ModelHparams& hp, int max_tokens, int n_ctx, int n_threads);
  // Bytes held by the buffers (their capacities): what sizes().bytes() promised.
  uint64_t allocated_bytes() const;
};

struct DecoderContext {
  const ModelHparams& hp;
  const ModelWeights& w;
  const ModelRecipe& recipe;
  const CpuKernelTable& kernels;
  ThreadPool& pool;
  KvCache& kv;
  DecoderScratch& s;
};

// Runs tokens[0..n) at positions pos0.. (n <= s.max_tokens, ids already
// validated) and writes logits: all n rows when all_rows, else only the last.
// hidden (if not null) gets every row's output_norm(final residual)
// ([n][n_embd]: the h an MTP drafter is fed).
void decoder_forward(const DecoderContext& c, const int32_t* tokens, int n, int pos0, float* logits,
                     bool all_rows, float* hidden = nullptr);

// The model's first MTP ("nextn") block over n rows: row i is token
// tokens[i] at position pos0 + i with the trunk's output row h_prev[i] (after
// output_norm; zeros where there is none) of the position before. c.kv is the
// block's own cache (one layer). Writes the head's logits for every row
// ([n][n_vocab], each predicting the token after tokens[i]) and, when
// block_out is not null, the block's output after shared_head_norm
// ([n][n_embd]: the h of a further draft step). logits null: no head (rows
// fed only for the block's KV). Needs hp.n_nextn > 0.
void nextn_forward(const DecoderContext& c, const int32_t* tokens, const float* h_prev, int n, int pos0, float* logits,
                   float* block_out);

}  // namespace guild
