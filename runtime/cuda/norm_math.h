//===- norm_math.h - Per-row arithmetic of the norm and softmax kernels -*- C++ -*-===//
//
// What the kernels of norm.cu compute per element and per row, as TESSEL_HD
// functions, so that the host tests (runtime/test/cuda/CudaNormTest.cpp)
// run the device's arithmetic against the CPU backend without a GPU: the
// element loads and stores (core/storage.h's, bit for bit cpu/internal.h's),
// the row statistics, the normalised value, the softmax's online max and sum,
// the gradient formulas, the residual adds fused into layer norm and its
// gradient, and how a row is split over the threads that reduce it
// (RowConfig, slotStart) and how column sums are split into chunks.
//
// Plain C++ with no CUDA header: g++ compiles it for the tests.
//
//===----------------------------------------------------------------------===//

#ifndef TESSEL_RUNTIME_CUDA_NORM_MATH_H
#define TESSEL_RUNTIME_CUDA_NORM_MATH_H

#include "core/storage.h"

#include <cmath>
#include <cstdint>
#include <limits>
#include <type_traits>

namespace tessel {
namespace cuda {
namespace norm_detail {

//===--- Stored floats (core/storage.h) -----------------------------------===//

using stored::addRn;
using stored::bf16ToFloat;
using stored::BFloat;
using stored::bitsFloat;
using stored::doubleToFloatOdd;
using stored::Elem;
using stored::floatBits;
using stored::floatToBf16;
using stored::floatToHalf;
using stored::fromDouble;
using stored::Half;
using stored::halfToFloat;
using stored::mulRn;
using stored::subRn;

//===--- Row arithmetic ---------------------------------------------------===//

TESSEL_HD float expOf(float x) {
#ifdef __CUDA_ARCH__
  return expf(x);
#else
  return std::exp(x);
#endif
}
TESSEL_HD double expOf(double x) {
#ifdef __CUDA_ARCH__
  return exp(x);
#else
  return std::exp(x);
#endif
}


/// A row's mean from its sum and 1 / n (the host's division, so that no
/// f64 division runs per row on the device), rounded once from f64.
template <class C> TESSEL_HD C meanOf(C sum, double invN) {
  return C(double(sum) * invN);
}

/// 1 / sqrt(var + eps) with var = Σ(x − mean)² / n, the biased variance.
template <class C>
TESSEL_HD C rstdOf(double squareSum, double invN, double eps) {
#ifdef __CUDA_ARCH__
  return C(rsqrt(squareSum * invN + eps));
#else
  return C(1.0 / std::sqrt(squareSum * invN + eps));
#endif
}

// The row arithmetic below rounds every operation (storage.h's *Rn): left
// to itself nvcc contracts a product into the add after it in one
// instantiation and not in another, so a fused kernel (a residual add, a
// 128-bit row) would differ from the unfused one in the last bit.

/// x̂ = (x − mean)·rstd.
template <class C> TESSEL_HD C normalized(C x, C mean, C rstd) {
  return mulRn(subRn(x, mean), rstd);
}

/// y = (x − mean)·rstd, times gamma, plus beta, in the CPU's order.
template <class C>
TESSEL_HD C layerNormValue(C x, C mean, C rstd, bool hasGamma, C gamma,
                           bool hasBeta, C beta) {
  C v = normalized(x, mean, rstd);
  if (hasGamma)
    v = mulRn(v, gamma);
  if (hasBeta)
    v = addRn(v, beta);
  return v;
}

/// sum + a·b, the product rounded before the add (a dot product's step).
template <class C> TESSEL_HD C addProduct(C sum, C a, C b) {
  return addRn(sum, mulRn(a, b));
}

/// Layer norm's dx with d = dy·γ, x̂ = (x − mean)·rstd:
/// rstd · (d − mean(d) − x̂ · mean(d·x̂)); mean(d) is 0 for RMS norm. Batch
/// norm's dx has the same form with k = γ·rstd in place of rstd and dy in
/// place of d.
template <class C>
TESSEL_HD C normDx(C scale, C d, C meanD, C xhat, C meanDX) {
  return mulRn(scale, subRn(subRn(d, meanD), mulRn(xhat, meanDX)));
}

/// The softmax gradient of one element: y·(dy − Σ y·dy).
template <class C> TESSEL_HD C softmaxDx(C y, C dy, C dot) {
  return y * (dy - dot);
}

/// One pass of max and Σ e^(x − max): adds x to (max, sum). -inf adds
/// nothing (e^-inf = 0), so a partial row of -inf merges cleanly; a row of
/// only -inf keeps sum 0 and its outputs are NaN, as on the CPU.
template <class C> TESSEL_HD void onlineAdd(C &max, C &sum, C x) {
  if (x > max) {
    sum = sum * expOf(max - x) + C(1);
    max = x;
  } else if (!(x == max && x == -std::numeric_limits<C>::infinity())) {
    sum += expOf(x - max); // NaN x makes the sum NaN
  }
}

/// A partial (max, sum) rescaled to the row's max.
template <class C> TESSEL_HD C onlineRescale(C max, C sum, C rowMax) {
  if (max == -std::numeric_limits<C>::infinity())
    return C(0);
  return sum * expOf(max - rowMax);
}

//===--- Residual adds fused into layer norm ------------------------------===//
//
// The fused kernels compute what a kernel that stores to T and a later one
// that loads it back compute, rounding in between. addRn keeps the device
// from contracting the add with the multiply before it (an FMA would skip
// the rounding the unfused kernels do).

/// v stored as T and loaded back (the identity for f32 and f64).
template <class T, class C> TESSEL_HD C roundedTo(C v) {
  return C(Elem<T>::load(Elem<T>::store(v)));
}

/// tessel_binary's TESSEL_ADD of two loaded T, rounded to T: the sum
/// add-layer-norm stores and normalises. Storing it again gives the same
/// bits (a value of T, or a NaN already quieted, rounds to itself).
template <class T, class C> TESSEL_HD C roundedSum(C a, C b) {
  return roundedTo<T>(addRn(a, b));
}

/// Layer norm's dx rounded to T (as layerNormGrad stores it) added to the
/// loaded residual, as tessel_binary then adds them: the fused gradient's
/// dx before its store.
template <class T, class C> TESSEL_HD C residualPlusDx(C residual, C dx) {
  return addRn(residual, roundedTo<T>(dx));
}

//===--- How the kernels split their work ---------------------------------===//

/// A row reduced by `threads` threads (32: one warp per row, 8 rows per
/// block of 256; else one block per row), each holding `elems` elements in
/// registers (0: the row is too long, read again from memory each pass).
/// Thread t's k-th slot is `vec` contiguous elements from slotStart; vec is
/// the 128-bit width where every pointer and the row length allow it, else 1.
struct RowConfig {
  int threads;
  int elems;
};

/// For a row of `cols` elements computed in a type of `computeBytes`:
/// a warp up to 1024 columns (512 for f64), then a block of 512 threads
/// up to 8192 (4096), then streamed. The cached elements a thread holds
/// (twice that for the gradients) fit its registers without spilling.
inline RowConfig chooseRowConfig(int64_t cols, int computeBytes) {
  const int wide = computeBytes == 8 ? 1 : 2;
  if (cols <= 256)
    return {32, 8};
  if (cols <= 512 * wide)
    return {32, 16 * wide};
  if (cols <= int64_t(4096) * wide)
    return {512, 8 * wide};
  return {512, 0};
}

TESSEL_HD int64_t slotStart(int t, int64_t k, int threads, int vec) {
  return (int64_t(t) + k * threads) * vec;
}

/// Column sums over the rows of [rows, cols] go in `chunks` partial sums
/// of consecutive rows (then summed in order): a function of the shape
/// only, so results do not depend on the device.
inline int64_t columnChunks(int64_t rows) {
  int64_t c = (rows + 63) / 64;
  return c < 1 ? 1 : c > 128 ? 128 : c;
}

/// Per-channel sums of [outer, channels, inner] with inner > 1: each
/// channel's outer·inner values in `chunks` consecutive runs.
inline int64_t slabChunks(int64_t count) {
  int64_t c = (count + 8191) / 8192;
  return c < 1 ? 1 : c > 128 ? 128 : c;
}

} // namespace norm_detail
} // namespace cuda
} // namespace tessel

#endif // TESSEL_RUNTIME_CUDA_NORM_MATH_H
