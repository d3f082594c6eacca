// Host arrays vm-run makes itself (--input NAME=random, NAME=zeros) and the short
// summary it prints of each result. Bytes on the host only; no device.
#pragma once

#include <cstddef>
#include <cstdint>
#include <random>
#include <span>
#include <string>
#include <vector>

#include "stowage/support/dtype.h"
#include "stowage/support/error.h"

namespace stowage::host_arrays {

// The most bytes one generated input may take (that of the largest .npy file read).
inline constexpr uint64_t kMaxGeneratedBytes = uint64_t{16} << 30;

// Zeros for a tensor of `shape` and `dtype`; refused (kInvalidInput) when an extent
// is negative (a shape the file leaves open) or the bytes exceed kMaxGeneratedBytes.
Expected<std::vector<std::byte>> zeros(std::span<const int64_t> shape, DType dtype, const std::string& what);

// Uniform values drawn from `engine`: floats in [-1, 1), integers in [0, 10), bools
// 0 or 1. The engine's sequence is fixed by the C++ standard and the values are
// made from it here, not by the library's distributions (which differ between
// standard libraries), so a seed gives the same inputs everywhere.
Expected<std::vector<std::byte>> random(std::span<const int64_t> shape, DType dtype, std::mt19937_64& engine,
                                        const std::string& what);

// "min -0.99, max 0.98, mean 0.0012; first 8 of 256: [...]": integers exactly,
// floats with 6 significant digits, NaNs left out of min, max and mean and counted
// instead; a bool's mean is the share of true.
std::string summarize(DType dtype, std::span<const std::byte> bytes, size_t first = 8);

}  // namespace stowage::host_arrays
