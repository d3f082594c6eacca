#include "stowage/bytecode/executable.h"

namespace stowage {

uint16_t Executable::required_minor_version() const {
  for (const Function& f : functions) {
    for (const Instruction& ins : f.code) {
      if (ins.op == Opcode::kAllocDiscontiguous) return 1;
    }
  }
  return 0;
}

int64_t Executable::find_function(std::string_view name) const {
  for (size_t i = 0; i < functions.size(); ++i) {
    if (functions[i].name == name) return static_cast<int64_t>(i);
  }
  return -1;
}

std::optional<ImageExtent> image_extent(std::span<const int64_t> shape, ImageLayout layout) {
  if (shape.empty() || shape.size() > 5 || shape.back() != 4) return std::nullopt;
  int64_t dims[4] = {1, 1, 1, 1};  // A, B, C, D
  size_t lead = shape.size() - 1;
  for (size_t i = 0; i < lead; ++i) {
    if (shape[i] < 0) return std::nullopt;
    dims[4 - lead + i] = shape[i];
  }
  auto mul = [](std::initializer_list<int64_t> xs) -> std::optional<uint64_t> {
    uint64_t r = 1;
    for (int64_t x : xs) {
      auto next = checked_mul(r, static_cast<uint64_t>(x));
      if (!next) return std::nullopt;
      r = *next;
    }
    return r;
  };
  std::optional<uint64_t> h, w;
  switch (layout) {
    case ImageLayout::kActivation: h = mul({dims[0], dims[1], dims[2]}); w = mul({dims[3]}); break;
    case ImageLayout::kWeight: h = mul({dims[0]}); w = mul({dims[1], dims[2], dims[3]}); break;
    case ImageLayout::kNhwc: h = mul({dims[0], dims[1]}); w = mul({dims[2], dims[3]}); break;
    case ImageLayout::kNone: return std::nullopt;
  }
  if (!h || !w) return std::nullopt;
  return ImageExtent{*h, *w};
}

}  // namespace stowage
