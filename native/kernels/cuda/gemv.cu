// Matrix-vector products for decode (public entry points). The kernels are in
// gemv_impl.cuh, instantiated per type group in gemv_kquants.cu,
// gemv_legacy.cu, gemv_float.cu, gemv_small_blocks.cu, gemv_lowbit.cu,
// gemv_iq2.cu and gemv_iq13.cu (parallel compilation).
#include "gemv_impl.cuh"
#include "quant_tables.h"

namespace guild::cuda {
using namespace gemv_detail;
namespace {

template <bool MOE, bool GLU, bool COMBINE = false>
cudaError_t launch_any(uint32_t type, const GemvParams& p, int max_cols, unsigned grid_y, cudaStream_t s) {
  if (const cudaError_t e = grids_ready_for(type); e != cudaSuccess) return e;
  switch (type) {
    case kQ4_K: case kQ5_K: case kQ6_K: return launch_kquant(type, MOE, GLU, COMBINE, p, max_cols, grid_y, s);
    case kQ4_0: case kQ5_0: case kQ8_0: return launch_legacy(type, MOE, GLU, COMBINE, p, max_cols, grid_y, s);
    case kF32: case kF16: case kBF16: return launch_float(type, MOE, GLU, COMBINE, p, max_cols, grid_y, s);
    case kQ4_1: case kQ5_1: case kIQ4_NL: case kMXFP4:
      return launch_small_blocks(type, MOE, GLU, COMBINE, p, max_cols, grid_y, s);
    case kQ2_K: case kQ3_K: case kIQ4_XS: case kTQ1_0: case kTQ2_0:
      return launch_lowbit(type, MOE, GLU, COMBINE, p, max_cols, grid_y, s);
    case kIQ2_XXS: case kIQ2_XS: case kIQ2_S: return launch_iq2(type, MOE, GLU, COMBINE, p, max_cols, grid_y, s);
    case kIQ1_S: case kIQ1_M: case kIQ3_XXS: case kIQ3_S:
      return launch_iq13(type, MOE, GLU, COMBINE, p, max_cols, grid_y, s);
    default: return cudaErrorNotSupported;
  }
}

bool matrix_ok(const DevMatrix& w) {
  if (!w.data || !matrix_type_supported(w.type) || w.n_in <= 0 || w.n_out <= 0) return false;
  // 16-byte aligned rows and expert stacks: staged copies move 16-byte chunks.
  if (w.row_stride % 16 != 0 || w.expert_stride % 16 != 0 || reinterpret_cast<uintptr_t>(w.data) % 16 != 0) return false;
  if (w.n_out > INT32_MAX || w.n_in > INT32_MAX) return false;
  const TensorTypeInfo& ti = tensor_type_info(w.type);
  if (w.n_in % ti.block_elems != 0) return false;
  if (w.row_stride < static_cast<size_t>(w.n_in / ti.block_elems) * ti.block_bytes) return false;
  return true;
}

bool fill_act(const DevMatrix& w, const ActView& act, GemvParams& p) {
  if (is_float_type(w.type)) {
    if (!act.f32 || act.f32_stride % 4 != 0 || reinterpret_cast<uintptr_t>(act.f32) % 16 != 0) return false;
    p.af = act.f32;
    p.af_stride = act.f32_stride;
  } else {
    if (!act.q8.qs || !act.q8.ds || act.q8.qs_stride % 16 != 0 || w.n_in % 32 != 0) return false;
    p.aq = act.q8.qs;
    p.ads = reinterpret_cast<const half2*>(act.q8.ds);
    p.aq_stride = act.q8.qs_stride;
    p.ads_stride = act.q8.ds_stride;
  }
  return true;
}

GemvParams base_params(const DevMatrix& w, float* y, int64_t y_stride) {
  GemvParams p{};
  p.w = static_cast<const uint8_t*>(w.data);
  p.row_stride = w.row_stride;
  p.expert_stride = w.expert_stride;
  p.n_in = static_cast<int>(w.n_in);
  p.n_out = static_cast<int>(w.n_out);
  p.y = y;
  p.y_stride = y_stride;
  p.act_div = 1;
  return p;
}

bool same_shape(const DevMatrix& a, const DevMatrix& b) {
  return a.type == b.type && a.n_in == b.n_in && a.n_out == b.n_out && a.row_stride == b.row_stride &&
         a.expert_stride == b.expert_stride;
}

}  // namespace

bool matrix_type_supported(uint32_t type) {
  switch (type) {
    case kF32: case kF16: case kBF16: case kQ4_0: case kQ4_1: case kQ5_0: case kQ5_1: case kQ8_0: case kIQ4_NL:
    case kMXFP4: case kQ2_K: case kQ3_K: case kQ4_K: case kQ5_K: case kQ6_K: case kIQ4_XS: case kIQ2_XXS:
    case kIQ2_XS: case kIQ2_S: case kIQ3_XXS: case kIQ3_S: case kIQ1_S: case kIQ1_M: case kTQ1_0: case kTQ2_0:
      return true;
    default:
      return false;
  }
}

ActFormat act_format_gemv(uint32_t type) { return is_float_type(type) ? ActFormat::F32 : ActFormat::Q8_1; }

cudaError_t gemv(const DevMatrix& w, const ActView& act, int n_cols, float* y, int64_t y_stride, bool accumulate,
                 cudaStream_t s) {
  GUILD_CUDA_RETURN_IF(!matrix_ok(w) || !y || n_cols < 1 || n_cols > kGemvMaxCols, cudaErrorInvalidValue);
  GemvParams p = base_params(w, y, y_stride);
  GUILD_CUDA_RETURN_IF(!fill_act(w, act, p), cudaErrorInvalidValue);
  p.n_cols = n_cols;
  p.accumulate = accumulate;
  return launch_any<false, false>(w.type, p, n_cols, 1, s);
}

cudaError_t gemv_glu(const DevMatrix& gate, const DevMatrix& up, const ActView& act, int n_cols, float* y,
                     int64_t y_stride, cudaStream_t s) {
  GUILD_CUDA_RETURN_IF(!matrix_ok(gate) || !matrix_ok(up) || !same_shape(gate, up) || !y || n_cols < 1 ||
                           n_cols > kGemvMaxCols,
                       cudaErrorInvalidValue);
  GemvParams p = base_params(gate, y, y_stride);
  p.w2 = static_cast<const uint8_t*>(up.data);
  GUILD_CUDA_RETURN_IF(!fill_act(gate, act, p), cudaErrorInvalidValue);
  p.n_cols = n_cols;
  return launch_any<false, true>(gate.type, p, n_cols, 1, s);
}

cudaError_t gemv_multi(const DevMatrix* ws, int n_w, const ActView& act, int n_cols, float* const* ys,
                       const int64_t* y_strides, cudaStream_t s) {
  GUILD_CUDA_RETURN_IF(!ws || !ys || !y_strides || n_w < 1 || n_w > kGemvMaxSegments || n_cols < 1 ||
                           n_cols > kGemvMaxCols,
                       cudaErrorInvalidValue);
  for (int i = 0; i < n_w; ++i) {
    GUILD_CUDA_RETURN_IF(!matrix_ok(ws[i]) || !ys[i] || ws[i].expert_stride != 0, cudaErrorInvalidValue);
    GUILD_CUDA_RETURN_IF(ws[i].type != ws[0].type || ws[i].n_in != ws[0].n_in || ws[i].row_stride != ws[0].row_stride,
                         cudaErrorInvalidValue);
  }
  GUILD_CUDA_RETURN_IF(is_float_type(ws[0].type), cudaErrorNotSupported);
  GemvParams p = base_params(ws[0], ys[0], y_strides[0]);
  GUILD_CUDA_RETURN_IF(!fill_act(ws[0], act, p), cudaErrorInvalidValue);
  p.n_cols = n_cols;
  p.n_seg = n_w;
  for (int i = 0; i < n_w; ++i) {
    p.seg_w[i] = static_cast<const uint8_t*>(ws[i].data);
    p.seg_y[i] = ys[i];
    p.seg_y_stride[i] = y_strides[i];
    p.seg_n_out[i] = static_cast<int>(ws[i].n_out);
  }
  return launch_any<false, false>(ws[0].type, p, n_cols, 1, s);
}

static cudaError_t moe_gemv_direct_impl(const DevMatrix& w, const DevMatrix* up, const ActView& act,
                                        const int32_t* ids, int k, int act_div, float* y, int64_t y_stride,
                                        cudaStream_t s) {
  GUILD_CUDA_RETURN_IF(!matrix_ok(w) || !ids || !y || k < 1 || k > 65535 || act_div < 1, cudaErrorInvalidValue);
  GemvParams p = base_params(w, y, y_stride);
  if (up) {
    GUILD_CUDA_RETURN_IF(!matrix_ok(*up) || !same_shape(w, *up), cudaErrorInvalidValue);
    p.w2 = static_cast<const uint8_t*>(up->data);
  }
  GUILD_CUDA_RETURN_IF(!fill_act(w, act, p), cudaErrorInvalidValue);
  p.direct = ids;
  p.act_div = act_div;
  if (up) return launch_any<true, true>(w.type, p, 1, static_cast<unsigned>(k), s);
  return launch_any<true, false>(w.type, p, 1, static_cast<unsigned>(k), s);
}

cudaError_t moe_gemv_direct(const DevMatrix& w, const ActView& act, const int32_t* ids, int k, int act_div, float* y,
                            int64_t y_stride, cudaStream_t s) {
  return moe_gemv_direct_impl(w, nullptr, act, ids, k, act_div, y, y_stride, s);
}

cudaError_t moe_gemv_glu_direct(const DevMatrix& gate, const DevMatrix& up, const ActView& act, const int32_t* ids,
                                int k, int act_div, float* y, int64_t y_stride, cudaStream_t s) {
  return moe_gemv_direct_impl(gate, &up, act, ids, k, act_div, y, y_stride, s);
}

cudaError_t moe_gemv_combine(const DevMatrix& w, const ActView& act, const int32_t* ids, const float* weights, int k,
                             float* x, cudaStream_t s) {
  GUILD_CUDA_RETURN_IF(!matrix_ok(w) || !ids || !weights || !x || k < 1, cudaErrorInvalidValue);
  GemvParams p = base_params(w, x, 0);
  GUILD_CUDA_RETURN_IF(!fill_act(w, act, p), cudaErrorInvalidValue);
  p.direct = ids;
  p.combine_w = weights;
  p.k = k;
  p.n_expert = w.n_expert;
  return launch_any<true, false, true>(w.type, p, 1, 1, s);
}

static cudaError_t moe_gemv_impl(const DevMatrix& w, const DevMatrix* up, const ActView& act, const MoeGroups& g,
                                 int act_div, int max_active, int max_cols, float* y, int64_t y_stride,
                                 cudaStream_t s) {
  GUILD_CUDA_RETURN_IF(!matrix_ok(w) || !y || act_div < 1 || max_active < 1 || max_cols < 1, cudaErrorInvalidValue);
  GUILD_CUDA_RETURN_IF(!g.offsets || !g.slots || !g.active || !g.counters, cudaErrorInvalidValue);
  GUILD_CUDA_RETURN_IF(max_active > 65535, cudaErrorInvalidValue);
  GemvParams p = base_params(w, y, y_stride);
  if (up) {
    GUILD_CUDA_RETURN_IF(!matrix_ok(*up) || !same_shape(w, *up), cudaErrorInvalidValue);
    p.w2 = static_cast<const uint8_t*>(up->data);
  }
  GUILD_CUDA_RETURN_IF(!fill_act(w, act, p), cudaErrorInvalidValue);
  p.offsets = g.offsets;
  p.slots = g.slots;
  p.active = g.active;
  p.counters = g.counters;
  p.act_div = act_div;
  const int nc = max_cols > kGemvMaxCols ? kGemvMaxCols : max_cols;
  if (up) return launch_any<true, true>(w.type, p, nc, static_cast<unsigned>(max_active), s);
  return launch_any<true, false>(w.type, p, nc, static_cast<unsigned>(max_active), s);
}

cudaError_t moe_gemv(const DevMatrix& w, const ActView& act, const MoeGroups& g, int act_div, int max_active,
                     int max_cols, float* y, int64_t y_stride, cudaStream_t s) {
  return moe_gemv_impl(w, nullptr, act, g, act_div, max_active, max_cols, y, y_stride, s);
}

cudaError_t moe_gemv_glu(const DevMatrix& gate, const DevMatrix& up, const ActView& act, const MoeGroups& g,
                         int act_div, int max_active, int max_cols, float* y, int64_t y_stride, cudaStream_t s) {
  return moe_gemv_impl(gate, &up, act, g, act_div, max_active, max_cols, y, y_stride, s);
}

}  // namespace guild::cuda
