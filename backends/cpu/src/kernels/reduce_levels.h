// Instantiates a family's hot loops once per instruction-set level: include
// it inside namespace chipdock_cpu::red with CD_RED_OPS_HEADER naming the
// family's loop header (reduce_ops.h, reduce_softmax_ops.h, norm_ops.h).
// Each level gets its own namespace (isa_avx512, isa_avx2, isa_base) with
// internal linkage, compiled for that level's target; active_isa() picks one
// at run time (reduce_common.h: dispatch).
//
// No include guard: each including file instantiates its own copies.

#ifndef CD_RED_OPS_HEADER
#error "define CD_RED_OPS_HEADER before including reduce_levels.h"
#endif

namespace {
#if CD_RED_X86
CD_RED_BEGIN_AVX512
namespace isa_avx512 {
#define CD_ISA_LEVEL 2
#include "reduce_simd.h"
#include CD_RED_OPS_HEADER
#undef CD_ISA_LEVEL
}  // namespace isa_avx512
CD_RED_END

CD_RED_BEGIN_AVX2
namespace isa_avx2 {
#define CD_ISA_LEVEL 1
#include "reduce_simd.h"
#include CD_RED_OPS_HEADER
#undef CD_ISA_LEVEL
}  // namespace isa_avx2
CD_RED_END
#endif

namespace isa_base {
#define CD_ISA_LEVEL 0
#include "reduce_simd.h"
#include CD_RED_OPS_HEADER
#undef CD_ISA_LEVEL
}  // namespace isa_base
}  // namespace
