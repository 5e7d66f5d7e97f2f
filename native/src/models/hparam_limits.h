// Upper bounds on the hyper-parameters read from a model file. Model files
// are untrusted and these numbers size allocations (scratch, KV cache, logits,
// GPU workspaces), so each is refused at load beyond its bound; every
// dimension a tensor also has is then cross-checked against that tensor
// (models/shape_checks.cpp). The bounds are generous: several times the
// largest published models (DeepSeek-V3: 61 layers, n_embd 7168, 256 experts
// of width 2048, 8 used, n_ff 18432, 128 heads; Qwen3-235B-A22B: 94 layers,
// 128 experts; gpt-oss-120b: 36 layers, 128 experts, 64 heads of 64; Llama-3.1
// -405B: 126 layers, n_embd 16384, n_ff 53248, 128k vocab; Llama-4-Scout:
// 10M-token context; Kimi-K2: 384 experts; Gemma: 262k vocab).
// docs/GGUF.md, "Model limits".
#pragma once

namespace guild::hparam_limits {

inline constexpr int kMaxLayers = 4096;          // block_count
inline constexpr int kMaxEmbd = 1 << 17;         // embedding_length (131072)
inline constexpr int kMaxHeads = 2048;           // attention.head_count, head_count_kv
inline constexpr int kMaxHeadDim = 4096;         // attention.key_length / value_length
inline constexpr int kMaxFfn = 1 << 18;          // feed_forward_length, expert_feed_forward_length (262144)
inline constexpr int kMaxExperts = 4096;         // expert_count
inline constexpr int kMaxExpertsUsed = 256;      // expert_used_count
inline constexpr int kMaxContext = 1 << 24;      // context_length, rope.scaling.original_context_length,
                                                 // and any session context asked (16,777,216 tokens)
inline constexpr int kMaxVocab = 1 << 24;        // token_embd.weight rows (16,777,216)

}  // namespace guild::hparam_limits
