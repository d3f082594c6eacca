#include "stowage/bytecode/executable.h"

#include <algorithm>
#include <cstring>

namespace stowage {

ByteView ByteView::copy_of(std::span<const uint8_t> bytes) {
  auto copy = std::make_shared<std::vector<uint8_t>>(bytes.begin(), bytes.end());
  std::span<const uint8_t> view(copy->data(), copy->size());
  return ByteView(std::move(copy), view);
}

bool operator==(const ByteView& a, const ByteView& b) {
  return a.size() == b.size() && (a.size() == 0 || std::memcmp(a.data(), b.data(), a.size()) == 0);
}

namespace {

// The bytes of a constant storage from `offset` up to the next change of segment:
// a run of a segment's bytes, or of zeros (data == nullptr).
struct Run {
  const uint8_t* data = nullptr;
  uint64_t size = 0;
};

Run run_at(const ConstantStorage& s, uint64_t offset) {
  for (const DataSegment& seg : s.segments) {
    if (offset < seg.offset) return Run{nullptr, seg.offset - offset};
    if (offset < seg.offset + seg.bytes.size()) {
      return Run{seg.bytes.data() + (offset - seg.offset), seg.offset + seg.bytes.size() - offset};
    }
  }
  return Run{nullptr, s.nbytes - offset};
}

bool same_contents(const ConstantStorage& a, const ConstantStorage& b) {
  for (uint64_t at = 0; at < a.nbytes;) {
    Run x = run_at(a, at), y = run_at(b, at);
    uint64_t n = std::min({x.size, y.size, a.nbytes - at});
    if (n == 0) return false;  // a segment past the storage's end
    if (x.data != nullptr && y.data != nullptr) {
      if (std::memcmp(x.data, y.data, n) != 0) return false;
    } else if (x.data != nullptr || y.data != nullptr) {
      const uint8_t* bytes = x.data != nullptr ? x.data : y.data;
      if (std::any_of(bytes, bytes + n, [](uint8_t c) { return c != 0; })) return false;
    }
    at += n;
  }
  return true;
}

}  // namespace

bool operator==(const ConstantStorage& a, const ConstantStorage& b) {
  return a.scope == b.scope && a.kind == b.kind && a.pixel_dtype == b.pixel_dtype && a.nbytes == b.nbytes &&
         a.image == b.image && same_contents(a, b);
}

uint64_t LayoutScope::storage_bytes() const {
  uint64_t total = 0;
  for (const LayoutStorage& s : storages) total += s.nbytes;
  return total;
}

uint64_t LayoutScope::tensor_bytes() const {
  uint64_t total = 0;
  for (const LayoutStorage& s : storages) {
    for (const LayoutTensor& t : s.tensors) total += t.nbytes;
  }
  return total;
}

const std::vector<NodeOrigin>* Executable::origin_of(uint32_t function, uint32_t pc) const {
  if (function >= functions.size()) return nullptr;
  for (const FunctionOrigins& f : origins) {
    if (f.function != functions[function].name) continue;
    auto site = std::lower_bound(f.sites.begin(), f.sites.end(), pc,
                                 [](const SiteOrigin& s, uint32_t p) { return s.pc < p; });
    return site != f.sites.end() && site->pc == pc ? &site->nodes : nullptr;
  }
  return nullptr;
}

namespace {

// Whether `f` places a tensor in an image storage it allocates away from the
// image's origin (code is straight-line: registers are followed in order).
bool places_off_origin(const Executable& exe, const Function& f) {
  std::vector<bool> image(f.num_registers, false);
  for (const Instruction& ins : f.code) {
    switch (ins.op) {
      case Opcode::kAllocStorage: {
        using Op = operands::AllocStorage;
        bool is_image = false;
        if (ins.ops[Op::kScope] < exe.strings.size()) {
          for (const ScopeRequirement& r : exe.requirements.scopes) {
            is_image |= r.scope == exe.strings[ins.ops[Op::kScope]] && r.kind == ScopeKind::kImage2d;
          }
        }
        if (ins.ops[Op::kDst] < image.size()) image[ins.ops[Op::kDst]] = is_image;
        break;
      }
      case Opcode::kMove: {
        using Op = operands::Move;
        if (ins.ops[Op::kDst] < image.size() && ins.ops[Op::kSrc] < image.size()) {
          image[ins.ops[Op::kDst]] = image[ins.ops[Op::kSrc]];
        }
        break;
      }
      case Opcode::kAllocTensor: {
        using Op = operands::AllocTensor;
        if (ins.ops[Op::kStorage] < image.size() && image[ins.ops[Op::kStorage]] && ins.ops[Op::kOffset] != 0) {
          return true;
        }
        break;
      }
      default: break;
    }
  }
  return false;
}

}  // namespace

uint16_t Executable::required_minor_version() const {
  for (const Function& f : functions) {
    for (const Instruction& ins : f.code) {
      if (ins.op != Opcode::kCallKernel) continue;
      for (uint32_t r : ins.list) {
        if (r == kNullRegister) return 7;
      }
    }
  }
  for (const KernelSignature& k : kernels) {
    for (const KernelParam& p : k.params) {
      if (p.is_image_offset()) return 6;
    }
  }
  for (const Function& f : functions) {
    if (places_off_origin(*this, f)) return 6;
  }
  if (!memory_plans.empty() || !origins.empty()) return 5;
  for (const Function& f : functions) {
    if (f.result.kind == ValueKind::kTuple) return 4;
    for (const Instruction& ins : f.code) {
      if (ins.op == Opcode::kRetTuple) return 4;
    }
  }
  if (!memory_layouts.empty()) return 3;
  if (!constant_storages.empty() || !tensor_constants.empty()) return 2;
  for (const Function& f : functions) {
    for (const Instruction& ins : f.code) {
      if (ins.op == Opcode::kLoadTensorConstant || ins.op == Opcode::kView) return 2;
    }
  }
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
