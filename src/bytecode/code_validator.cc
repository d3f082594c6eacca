#include "code_validator.h"

#include <fmt/format.h>

#include <algorithm>
#include <optional>
#include <string>
#include <unordered_map>

#include "section_cursor.h"
#include "stowage/bytecode/format.h"
#include "stowage/bytecode/discontiguous.h"
#include "stowage/bytecode/instruction_codec.h"
#include "stowage/bytecode/storage_rules.h"

namespace stowage::bytecode {
namespace {

// Where a register stands at one point of the (straight-line) code. One byte per
// register: a frame may declare 65536 registers, and a small file may hold many
// functions, so the per-function cost must stay small.
enum class Life : uint8_t { kUnwritten, kLive, kKilled };

// A storage whose alloc_storage this function ran, while a register holds it.
struct KnownStorage {
  const ScopeRequirement* scope = nullptr;
  uint64_t nbytes = 0;  // buffer scopes
  ImageExtent image;    // image2d scopes
  size_t instruction = 0;
};

class FunctionValidator {
 public:
  FunctionValidator(const Executable& exe, const Function& fn, const CodeSection& code, CodeRange range)
      : exe_(exe), fn_(fn), code_(code), range_(range), life_(fn.num_registers, Life::kUnwritten) {
    std::fill_n(life_.begin(), fn.params.size(), Life::kLive);
  }

  Status run(std::vector<Instruction>& out);

 private:
  Status check(const Instruction& ins);
  Status check_indices(const Instruction& ins) const;
  Status check_index(const Instruction& ins, OperandKind kind, size_t word, uint64_t value) const;
  Status check_reads(const Instruction& ins) const;
  Status check_read(size_t word, uint32_t reg) const;
  Status check_semantics(const Instruction& ins) const;
  Status check_alloc_storage(const Instruction& ins) const;
  Status check_alloc_tensor(const Instruction& ins) const;
  Status check_alloc_discontiguous(const Instruction& ins) const;
  Status check_discontiguous_storage(const Instruction& ins, size_t storage_slot, size_t offsets_slot,
                                     std::span<const uint64_t> sizes, uint64_t alignment,
                                     std::string_view what) const;
  Status check_call_kernel(const Instruction& ins) const;
  Status check_call(const Instruction& ins) const;
  Status check_view(const Instruction& ins) const;
  Status check_ret_tuple(const Instruction& ins) const;
  // The constant at scalar slot `slot`, which must be a shape of extents >= 0.
  Status check_shape_constant(const Instruction& ins, size_t slot, std::string_view role,
                              uint32_t max_rank = kMaxShapeRank) const;
  void apply_effects(const Instruction& ins);

  // Word (relative to this instruction) of scalar slot `slot`, and of list entry `k`.
  size_t slot_word(const Instruction& ins, size_t slot) const;
  size_t list_word(const Instruction& ins, size_t k) const;
  // Whether list entry `k` is call_kernel's null (kNullRegister), not a register.
  static bool is_null_arg(const Instruction& ins, size_t k) {
    return ins.op == Opcode::kCallKernel && ins.list[k] == kNullRegister;
  }
  const ScopeRequirement* find_scope(std::string_view name) const;

  Error error_at(size_t word_in_instruction, std::string_view message) const;
  Error error_at_function_word(size_t word, std::string_view prefix, std::string_view message) const;

  const Executable& exe_;
  const Function& fn_;
  const CodeSection& code_;
  CodeRange range_;
  std::vector<Life> life_;
  std::unordered_map<uint32_t, KnownStorage> storages_;  // by register
  size_t index_ = 0;                                     // instruction being checked
  size_t start_word_ = 0;                                // its first word, relative to the function
  Opcode op_ = Opcode::kRet;
};

Error FunctionValidator::error_at_function_word(size_t word, std::string_view prefix, std::string_view message) const {
  uint64_t offset = code_.file_offset + 4 * (uint64_t{range_.first_word} + word);
  return file_error("section 'code'", offset, fmt::format("function '{}' {}: {}", fn_.name, prefix, message));
}

Error FunctionValidator::error_at(size_t word_in_instruction, std::string_view message) const {
  return error_at_function_word(start_word_ + word_in_instruction,
                                fmt::format("instruction {} ({})", index_, opcode_info(op_).name), message);
}

Status FunctionValidator::run(std::vector<Instruction>& out) {
  std::span<const uint32_t> words = code_.words.subspan(range_.first_word, range_.num_words);
  size_t pos = 0;
  while (pos < words.size()) {
    if (index_ == kMaxInstructionsPerFunction) {
      return error_at_function_word(pos, fmt::format("instruction {}", index_),
                                    fmt::format("more than {} instructions", kMaxInstructionsPerFunction));
    }
    Instruction ins;
    DecodeFailure failure;
    size_t used = decode_instruction(words.subspan(pos), ins, failure);
    if (used == 0) {
      std::string prefix = failure.known_opcode ? fmt::format("instruction {} ({})", index_, opcode_info(ins.op).name)
                                                : fmt::format("instruction {}", index_);
      return error_at_function_word(pos + failure.word, prefix, failure.message);
    }
    start_word_ = pos;
    op_ = ins.op;
    STOWAGE_TRY(check(ins));
    out.push_back(std::move(ins));
    pos += used;
    ++index_;
  }
  if (out.empty()) return error_at_function_word(0, "code", "the function has no code");
  const Opcode last = fn_.result.kind == ValueKind::kTuple ? Opcode::kRetTuple : Opcode::kRet;
  if (out.back().op != last) {
    --index_;  // report the last instruction, whose fields start_word_ and op_ still hold
    return error_at(0, fmt::format("the function's code does not end with {}", opcode_info(last).name));
  }
  return Status::ok();
}

Status FunctionValidator::check(const Instruction& ins) {
  STOWAGE_TRY(check_indices(ins));
  STOWAGE_TRY(check_reads(ins));
  STOWAGE_TRY(check_semantics(ins));
  apply_effects(ins);
  return Status::ok();
}

size_t FunctionValidator::slot_word(const Instruction& ins, size_t slot) const {
  const OpcodeInfo& info = opcode_info(ins.op);
  size_t word = 1;
  size_t seen = 0;
  for (size_t i = 0; i < info.num_operands; ++i) {
    OperandKind kind = info.operands[i];
    if (kind == OperandKind::kRegList) {
      word += 1 + ins.list.size();
      continue;
    }
    if (seen++ == slot) return word;
    word += operand_kind_words(kind);
  }
  return 0;
}

size_t FunctionValidator::list_word(const Instruction& ins, size_t k) const {
  const OpcodeInfo& info = opcode_info(ins.op);
  size_t word = 1;
  for (size_t i = 0; i < info.num_operands; ++i) {
    OperandKind kind = info.operands[i];
    if (kind == OperandKind::kRegList) return word + 1 + k;
    word += operand_kind_words(kind);
  }
  return 0;
}

Status FunctionValidator::check_index(const Instruction& ins, OperandKind kind, size_t word, uint64_t value) const {
  auto out_of_range = [&](std::string_view what, size_t count, std::string_view owner) {
    return error_at(word, fmt::format("{} {} out of range ({} has {} {}s)", what, value, owner, count, what));
  };
  switch (kind) {
    case OperandKind::kDef:
    case OperandKind::kReg:
    case OperandKind::kRegList:
      if (value >= fn_.num_registers) {
        return error_at(word,
                        fmt::format("register {} out of range (function has {} registers)", value, fn_.num_registers));
      }
      return Status::ok();
    case OperandKind::kOptConst:
      if (value == kNoConstant) return Status::ok();
      [[fallthrough]];
    case OperandKind::kConst:
      if (value >= exe_.constants.size()) return out_of_range("constant", exe_.constants.size(), "executable");
      return Status::ok();
    case OperandKind::kString:
      if (value >= exe_.strings.size()) return out_of_range("string", exe_.strings.size(), "executable");
      return Status::ok();
    case OperandKind::kKernel:
      if (value >= exe_.kernels.size()) return out_of_range("kernel", exe_.kernels.size(), "executable");
      return Status::ok();
    case OperandKind::kFunc:
      if (value >= exe_.functions.size()) return out_of_range("function", exe_.functions.size(), "executable");
      return Status::ok();
    case OperandKind::kTensorConst:
      if (value >= exe_.tensor_constants.size()) {
        return out_of_range("tensor constant", exe_.tensor_constants.size(), "executable");
      }
      return Status::ok();
    case OperandKind::kU32:
    case OperandKind::kU64:
    case OperandKind::kDType:  // the decoder checked the code
      return Status::ok();
  }
  return Status::ok();
}

Status FunctionValidator::check_indices(const Instruction& ins) const {
  const OpcodeInfo& info = opcode_info(ins.op);
  size_t slot = 0;
  for (size_t i = 0; i < info.num_operands; ++i) {
    OperandKind kind = info.operands[i];
    if (kind == OperandKind::kRegList) {
      for (size_t k = 0; k < ins.list.size(); ++k) {
        if (is_null_arg(ins, k)) continue;  // check_call_kernel checks its parameter
        STOWAGE_TRY(check_index(ins, kind, list_word(ins, k), ins.list[k]));
      }
      continue;
    }
    STOWAGE_TRY(check_index(ins, kind, slot_word(ins, slot), ins.ops[slot]));
    ++slot;
  }
  return Status::ok();
}

Status FunctionValidator::check_read(size_t word, uint32_t reg) const {
  switch (life_[reg]) {
    case Life::kUnwritten: return error_at(word, fmt::format("register {} is read before it is written", reg));
    case Life::kKilled: return error_at(word, fmt::format("register {} is read after it was killed", reg));
    case Life::kLive: return Status::ok();
  }
  return Status::ok();
}

Status FunctionValidator::check_reads(const Instruction& ins) const {
  const OpcodeInfo& info = opcode_info(ins.op);
  size_t slot = 0;
  for (size_t i = 0; i < info.num_operands; ++i) {
    OperandKind kind = info.operands[i];
    if (kind == OperandKind::kRegList) {
      for (size_t k = 0; k < ins.list.size(); ++k) {
        if (!is_null_arg(ins, k)) STOWAGE_TRY(check_read(list_word(ins, k), ins.list[k]));
      }
      continue;
    }
    if (kind == OperandKind::kReg) {
      STOWAGE_TRY(check_read(slot_word(ins, slot), static_cast<uint32_t>(ins.ops[slot])));
    }
    ++slot;
  }
  return Status::ok();
}

Status FunctionValidator::check_semantics(const Instruction& ins) const {
  switch (ins.op) {
    case Opcode::kAllocStorage: return check_alloc_storage(ins);
    case Opcode::kAllocTensor: return check_alloc_tensor(ins);
    case Opcode::kCallKernel: return check_call_kernel(ins);
    case Opcode::kCall: return check_call(ins);
    case Opcode::kAllocDiscontiguous: return check_alloc_discontiguous(ins);
    case Opcode::kRet:
      if (fn_.result.kind == ValueKind::kTuple) {
        return error_at(0, "the function's result is a tuple; it returns with ret_tuple");
      }
      return Status::ok();
    case Opcode::kKill:
    case Opcode::kCopyTensor:
    case Opcode::kMove:
    case Opcode::kLoadConst:
    case Opcode::kLoadTensorConstant: return Status::ok();
    case Opcode::kView: return check_view(ins);
    case Opcode::kRetTuple: return check_ret_tuple(ins);
  }
  return Status::ok();
}

// One distinct register per field of the function's tuple result, which only
// ret_tuple returns: the VM hands the caller a tuple exactly when the result is one.
Status FunctionValidator::check_ret_tuple(const Instruction& ins) const {
  if (exe_.minor_version < 4) {
    return error_at(0, fmt::format("ret_tuple needs version 1.4; the file declares 1.{}", exe_.minor_version));
  }
  const size_t count_word = list_word(ins, 0) - 1;
  if (fn_.result.kind != ValueKind::kTuple) {
    return error_at(count_word, "the function's result is not a tuple; it returns with ret");
  }
  if (ins.list.size() != fn_.result.fields.size()) {
    return error_at(count_word, fmt::format("{} registers returned, the function's tuple result has {} fields",
                                            ins.list.size(), fn_.result.fields.size()));
  }
  std::unordered_map<uint32_t, size_t> field_of;  // register -> the first field returning it
  for (size_t k = 0; k < ins.list.size(); ++k) {
    auto [first, inserted] = field_of.emplace(ins.list[k], k);
    if (!inserted) {
      return error_at(list_word(ins, k), fmt::format("register {} is returned twice (fields {} and {})", ins.list[k],
                                                     first->second, k));
    }
  }
  return Status::ok();
}

// The viewed tensor's size is known only at run time: the VM checks the range.
Status FunctionValidator::check_view(const Instruction& ins) const {
  using Op = operands::View;
  STOWAGE_TRY(check_shape_constant(ins, Op::kShape, "shape"));
  if (exe_.minor_version < 2) {
    return error_at(0, fmt::format("view needs version 1.2; the file declares 1.{}", exe_.minor_version));
  }
  const std::vector<int64_t>& shape = exe_.constants[ins.ops[Op::kShape]].shape;
  if (!checked_nbytes(shape, static_cast<DType>(ins.ops[Op::kDType]))) {
    return error_at(slot_word(ins, Op::kShape), "the view's size overflows 64 bits");
  }
  return Status::ok();
}

Status FunctionValidator::check_shape_constant(const Instruction& ins, size_t slot, std::string_view role,
                                               uint32_t max_rank) const {
  const Constant& c = exe_.constants[ins.ops[slot]];
  size_t word = slot_word(ins, slot);
  if (c.kind != ConstantKind::kShape) {
    return error_at(word, fmt::format("{} constant {} is not a shape", role, ins.ops[slot]));
  }
  if (c.shape.size() > max_rank) {
    return error_at(word, fmt::format("{} constant {} has rank {}, more than {}", role, ins.ops[slot], c.shape.size(),
                                      max_rank));
  }
  for (int64_t extent : c.shape) {
    if (extent < 0) {
      return error_at(word, fmt::format("{} constant {} has a negative extent {}", role, ins.ops[slot], extent));
    }
  }
  return Status::ok();
}

const ScopeRequirement* FunctionValidator::find_scope(std::string_view name) const {
  for (const ScopeRequirement& scope : exe_.requirements.scopes) {
    if (scope.scope == name) return &scope;
  }
  return nullptr;
}

Status FunctionValidator::check_alloc_storage(const Instruction& ins) const {
  using Op = operands::AllocStorage;
  STOWAGE_TRY(check_shape_constant(ins, Op::kSize, "size"));
  const std::string& scope_name = exe_.strings[ins.ops[Op::kScope]];
  const ScopeRequirement* scope = find_scope(scope_name);
  if (!scope) {
    return error_at(slot_word(ins, Op::kScope),
                    fmt::format("scope '{}' is not listed in the requirements", scope_name));
  }
  const std::vector<int64_t>& size = exe_.constants[ins.ops[Op::kSize]].shape;
  size_t size_word = slot_word(ins, Op::kSize);
  if (scope->kind == ScopeKind::kImage2d) {
    if (Status s = is_image_pixel_type(static_cast<DType>(ins.ops[Op::kDType])); !s) {
      return error_at(slot_word(ins, Op::kDType), s.error().message());
    }
    if (size.size() != 2) {
      return error_at(size_word,
                      fmt::format("size of an image2d storage must be [height, width], has rank {}", size.size()));
    }
    uint64_t height = static_cast<uint64_t>(size[0]), width = static_cast<uint64_t>(size[1]);
    if (height == 0 || width == 0 || height > scope->max_image_height || width > scope->max_image_width) {
      return error_at(size_word, fmt::format("image of {}x{} pixels is empty or exceeds the {}x{} of scope '{}'", height,
                                             width, scope->max_image_height, scope->max_image_width, scope->scope));
    }
    return Status::ok();
  }
  if (size.size() != 1) {
    return error_at(size_word, fmt::format("size of a buffer storage must be [nbytes], has rank {}", size.size()));
  }
  uint64_t nbytes = static_cast<uint64_t>(size[0]);
  if (nbytes > scope->max_storage_bytes) {
    return error_at(size_word, fmt::format("storage of {} bytes exceeds max_storage_bytes {} of scope '{}'", nbytes,
                                           scope->max_storage_bytes, scope->scope));
  }
  return Status::ok();
}

Status FunctionValidator::check_alloc_tensor(const Instruction& ins) const {
  using Op = operands::AllocTensor;
  STOWAGE_TRY(check_shape_constant(ins, Op::kShape, "shape"));
  auto known = storages_.find(static_cast<uint32_t>(ins.ops[Op::kStorage]));
  if (known == storages_.end()) return Status::ok();  // not allocated here: the VM checks at run time
  const KnownStorage* storage = &known->second;

  uint64_t offset = ins.ops[Op::kOffset];
  size_t offset_word = slot_word(ins, Op::kOffset);
  const ScopeRequirement& scope = *storage->scope;
  if (scope.kind == ScopeKind::kImage2d) {
    // The offset of a tensor in an image is its top-left pixel, y << 32 | x (1.6).
    const ImageOffset at = unpack_image_offset(offset);
    if (offset != 0 && exe_.minor_version < 6) {
      return error_at(offset_word, fmt::format("offset {} in image2d storage of scope '{}': an image offset needs "
                                               "version 1.6; the file declares 1.{}",
                                               offset, scope.scope, exe_.minor_version));
    }
    if (Status s = image_offset_in_range(at); !s) {
      return error_at(offset_word, fmt::format("tensor in scope '{}': {} (offset {} packs y << 32 | x)", scope.scope,
                                               s.error().message(), offset));
    }
    const std::vector<int64_t>& shape = exe_.constants[ins.ops[Op::kShape]].shape;
    auto extent = image_extent(shape, scope.layout);
    if (!extent) {
      return error_at(slot_word(ins, Op::kShape),
                      fmt::format("shape of rank {} is not an image shape (last extent 4, rank at most 5, extent "
                                  "within 64 bits)",
                                  shape.size()));
    }
    if (Status s = tensor_fits_image(*extent, at, storage->image); !s) {
      return error_at(slot_word(ins, at == ImageOffset{} ? Op::kShape : Op::kOffset),
                      fmt::format("tensor in scope '{}' {} (instruction {})", scope.scope, s.error().message(),
                                  storage->instruction));
    }
    return Status::ok();
  }
  const std::vector<int64_t>& shape = exe_.constants[ins.ops[Op::kShape]].shape;
  DType dtype = static_cast<DType>(ins.ops[Op::kDType]);
  std::optional<uint64_t> nbytes = checked_nbytes(shape, dtype);
  if (!nbytes) return error_at(slot_word(ins, Op::kShape), "tensor size overflows 64 bits");
  if (Status s = tensor_fits_buffer(*nbytes, offset, storage->nbytes); !s) {
    return error_at(offset_word,
                    fmt::format("tensor: {} (instruction {})", s.error().message(), storage->instruction));
  }
  if (Status s = offset_is_aligned(offset, scope.offset_alignment, scope.scope); !s) {
    return error_at(offset_word, s.error().message());
  }
  return Status::ok();
}

// Counts and entry values are checked here; bounds against the storages where the
// storage was allocated in this function (the VM checks the others at run time).
Status FunctionValidator::check_alloc_discontiguous(const Instruction& ins) const {
  using Op = operands::AllocDiscontiguous;
  if (exe_.minor_version < 1) {
    return error_at(0, fmt::format("the file declares version {}.{}; this instruction needs {}.1", kMajorVersion,
                                   exe_.minor_version, kMajorVersion));
  }
  STOWAGE_TRY(check_shape_constant(ins, Op::kShape, "shape"));
  STOWAGE_TRY(check_shape_constant(ins, Op::kTableOffsets, "table offsets", kMaxShapeConstantExtents));
  STOWAGE_TRY(check_shape_constant(ins, Op::kDataOffsets, "data offsets", kMaxShapeConstantExtents));
  const std::vector<int64_t>& shape = exe_.constants[ins.ops[Op::kShape]].shape;
  auto dtype = static_cast<DType>(ins.ops[Op::kDType]);
  uint64_t entry = ins.ops[Op::kEntryBytes];
  if (!valid_table_entry_bytes(entry)) {
    return error_at(slot_word(ins, Op::kEntryBytes), fmt::format("table entry size {} is not 4 or 8", entry));
  }
  auto geometry = discontiguous_geometry(shape, dtype);
  if (!geometry || !checked_nbytes(shape, dtype)) {
    return error_at(slot_word(ins, Op::kShape), fmt::format("shape of rank {} is not a discontiguous shape (rank >= 2, "
                                                            "size within 64 bits)",
                                                            shape.size()));
  }
  const std::vector<int64_t>& tables = exe_.constants[ins.ops[Op::kTableOffsets]].shape;
  const std::vector<int64_t>& blocks = exe_.constants[ins.ops[Op::kDataOffsets]].shape;
  if (tables.size() != geometry->num_tables) {
    return error_at(slot_word(ins, Op::kTableOffsets), fmt::format("{} table offsets, the shape needs {}",
                                                                   tables.size(), geometry->num_tables));
  }
  if (blocks.size() != geometry->num_blocks) {
    return error_at(slot_word(ins, Op::kDataOffsets), fmt::format("{} data offsets, the shape has {} blocks",
                                                                  blocks.size(), geometry->num_blocks));
  }
  std::vector<uint64_t> table_sizes(tables.size());
  for (uint64_t t = 0; t < tables.size(); ++t) table_sizes[t] = geometry->entries_of(shape, t) * entry;
  std::vector<uint64_t> block_sizes(blocks.size(), geometry->block_bytes);
  STOWAGE_TRY(check_discontiguous_storage(ins, Op::kTableStorage, Op::kTableOffsets, table_sizes, entry, "table"));
  return check_discontiguous_storage(ins, Op::kDataStorage, Op::kDataOffsets, block_sizes, dtype_bytes(dtype),
                                     "block");
}

Status FunctionValidator::check_discontiguous_storage(const Instruction& ins, size_t storage_slot,
                                                      size_t offsets_slot, std::span<const uint64_t> sizes,
                                                      uint64_t align, std::string_view what) const {
  using Op = operands::AllocDiscontiguous;
  const std::vector<int64_t>& offsets = exe_.constants[ins.ops[offsets_slot]].shape;
  uint64_t entry = ins.ops[Op::kEntryBytes];
  uint64_t max_entry = entry == 8 ? UINT64_MAX : uint64_t{UINT32_MAX};
  size_t word = slot_word(ins, offsets_slot);
  for (size_t i = 0; i < offsets.size(); ++i) {
    auto offset = static_cast<uint64_t>(offsets[i]);  // >= 0: checked as a shape
    if (offset > max_entry || offset % align != 0) {
      return error_at(word, fmt::format("{} {} at offset {} is not a multiple of {} or does not fit a {}-byte entry",
                                        what, i, offset, align, entry));
    }
  }
  auto known = storages_.find(static_cast<uint32_t>(ins.ops[storage_slot]));
  if (known == storages_.end()) return Status::ok();
  const KnownStorage& storage = known->second;
  if (storage.scope->kind != ScopeKind::kBuffer) {
    return error_at(slot_word(ins, storage_slot),
                    fmt::format("{}s must be in a buffer storage; scope '{}' holds images", what, storage.scope->scope));
  }
  for (size_t i = 0; i < offsets.size(); ++i) {
    auto offset = static_cast<uint64_t>(offsets[i]);
    if (Status s = tensor_fits_buffer(sizes[i], offset, storage.nbytes); !s) {
      return error_at(word,
                      fmt::format("{} {}: {} (instruction {})", what, i, s.error().message(), storage.instruction));
    }
  }
  return Status::ok();
}

Status FunctionValidator::check_call_kernel(const Instruction& ins) const {
  using Op = operands::CallKernel;
  const KernelSignature& kernel = exe_.kernels[ins.ops[Op::kKernel]];
  STOWAGE_TRY(check_shape_constant(ins, Op::kGlobal, "grid"));
  const std::vector<int64_t>& grid = exe_.constants[ins.ops[Op::kGlobal]].shape;
  size_t grid_word = slot_word(ins, Op::kGlobal);
  if (grid.empty() || grid.size() > kMaxGridRank) {
    return error_at(grid_word, fmt::format("grid has rank {} (must be 1 to {})", grid.size(), kMaxGridRank));
  }
  for (int64_t extent : grid) {
    if (extent == 0) return error_at(grid_word, "grid extent 0 (extents must be > 0)");
  }
  if (std::optional<uint64_t> items = checked_num_elements(grid); !items || *items > kMaxLaunchWorkItems) {
    return error_at(grid_word, fmt::format("grid [{}] has {} work items, more than the limit of {} (2^40)",
                                           fmt::join(grid, ", "), items ? fmt::to_string(*items) : "2^64 or more",
                                           kMaxLaunchWorkItems));
  }
  if (ins.ops[Op::kLocal] != kNoConstant) {
    STOWAGE_TRY(check_shape_constant(ins, Op::kLocal, "local size"));
    const std::vector<int64_t>& local = exe_.constants[ins.ops[Op::kLocal]].shape;
    size_t local_word = slot_word(ins, Op::kLocal);
    if (local.size() != grid.size()) {
      return error_at(local_word,
                      fmt::format("local size has rank {}, the grid has rank {}", local.size(), grid.size()));
    }
    for (size_t d = 0; d < local.size(); ++d) {
      if (local[d] == 0) return error_at(local_word, "local size extent 0 (extents must be > 0)");
      if (grid[d] % local[d] != 0) {
        return error_at(local_word, fmt::format("grid extent {} is not a multiple of local size {} (dimension {})",
                                                grid[d], local[d], d));
      }
    }
  }
  // Image offset parameters take no register: the VM sets them from the image's tensor.
  if (const size_t listed = listed_param_count(kernel); ins.list.size() != listed) {
    return error_at(list_word(ins, 0) - 1, fmt::format("{} arguments passed, kernel '{}' takes {}{}", ins.list.size(),
                                                       kernel.name, listed,
                                                       listed == kernel.params.size() ? "" : " (image offsets aside)"));
  }
  // A null argument (kNullRegister): version 1.7, and only where the parameter is a buffer.
  for (size_t i = 0, slot = 0; i < kernel.params.size(); ++i) {
    const KernelParam& param = kernel.params[i];
    if (param.is_image_offset()) continue;
    const size_t k = slot++;
    if (ins.list[k] != kNullRegister) continue;
    if (exe_.minor_version < 7) {
      return error_at(list_word(ins, k), fmt::format("argument {} is null, which needs version 1.7; the file "
                                                     "declares 1.{}",
                                                     k + 1, exe_.minor_version));
    }
    if (!param.is_buffer()) {
      return error_at(list_word(ins, k), fmt::format("argument {} is null, but parameter '{}' of kernel '{}' is a {}; "
                                                     "only a buffer parameter takes null",
                                                     k + 1, param.name, kernel.name,
                                                     kernel_param_kind_name(param.kind)));
    }
  }
  return Status::ok();
}

Status FunctionValidator::check_call(const Instruction& ins) const {
  const Function& callee = exe_.functions[ins.ops[operands::Call::kFunc]];
  if (ins.list.size() != callee.params.size()) {
    return error_at(list_word(ins, 0) - 1, fmt::format("{} arguments passed, function '{}' takes {}", ins.list.size(),
                                                       callee.name, callee.params.size()));
  }
  return Status::ok();
}

void FunctionValidator::apply_effects(const Instruction& ins) {
  switch (ins.op) {
    case Opcode::kKill: {
      auto reg = static_cast<uint32_t>(ins.ops[operands::Kill::kReg]);
      life_[reg] = Life::kKilled;
      storages_.erase(reg);
      return;
    }
    case Opcode::kAllocStorage: {
      using Op = operands::AllocStorage;
      KnownStorage storage;
      storage.scope = find_scope(exe_.strings[ins.ops[Op::kScope]]);
      const std::vector<int64_t>& size = exe_.constants[ins.ops[Op::kSize]].shape;
      if (storage.scope->kind == ScopeKind::kBuffer) {
        storage.nbytes = static_cast<uint64_t>(size[0]);
      } else {
        storage.image = ImageExtent{static_cast<uint64_t>(size[0]), static_cast<uint64_t>(size[1])};
      }
      storage.instruction = index_;
      auto dst = static_cast<uint32_t>(ins.ops[Op::kDst]);
      life_[dst] = Life::kLive;
      storages_[dst] = storage;
      return;
    }
    case Opcode::kMove: {
      auto src = static_cast<uint32_t>(ins.ops[operands::Move::kSrc]);
      auto dst = static_cast<uint32_t>(ins.ops[operands::Move::kDst]);
      life_[dst] = life_[src];
      if (auto known = storages_.find(src); known != storages_.end()) {
        KnownStorage copy = known->second;
        storages_[dst] = copy;
      } else {
        storages_.erase(dst);
      }
      return;
    }
    default: break;
  }
  // Any other definition leaves a live register the validator knows nothing about.
  const OpcodeInfo& info = opcode_info(ins.op);
  size_t slot = 0;
  for (size_t i = 0; i < info.num_operands; ++i) {
    OperandKind kind = info.operands[i];
    if (kind == OperandKind::kRegList) continue;
    if (kind == OperandKind::kDef) {
      auto dst = static_cast<uint32_t>(ins.ops[slot]);
      life_[dst] = Life::kLive;
      storages_.erase(dst);
    }
    ++slot;
  }
}

}  // namespace

Status decode_and_validate_code(Executable& exe, const CodeSection& code, std::span<const CodeRange> ranges) {
  for (size_t i = 0; i < exe.functions.size(); ++i) {
    std::vector<Instruction> instructions;
    STOWAGE_TRY(FunctionValidator(exe, exe.functions[i], code, ranges[i]).run(instructions));
    exe.functions[i].code = std::move(instructions);
  }
  return Status::ok();
}

}  // namespace stowage::bytecode
