// The executable of examples/add_mul.stir, built by hand as the code generator
// would, so runtime tests do not depend on the compiler.
#pragma once

#include "stowage/vm/executable.h"

namespace stowage::testing {

inline const char* kAddMulSource = R"(__kernel void compute_add_in_vtcm(__global const int* a, __global const int* b, __global int* c) {
  size_t i = get_global_id(0);
  c[i] = a[i] + b[i];
}

__kernel void compute_mul_in_vtcm(__global const int* a, __global const int* b, __global int* c) {
  size_t i = get_global_id(0);
  c[i] = a[i] * b[i];
}
)";

inline Instruction make_instruction(Opcode op, std::initializer_list<uint64_t> ops, std::vector<uint32_t> list = {}) {
  Instruction ins;
  ins.op = op;
  size_t i = 0;
  for (uint64_t v : ops) ins.ops[i++] = v;
  ins.list = std::move(list);
  return ins;
}

inline KernelSignature binary_int_kernel(const char* name) {
  KernelSignature sig;
  sig.name = name;
  sig.unit = 0;
  sig.params = {
      {"a", KernelParamKind::kGlobalBuffer, DType::kInt32, 1, true},
      {"b", KernelParamKind::kGlobalBuffer, DType::kInt32, 1, true},
      {"c", KernelParamKind::kGlobalBuffer, DType::kInt32, 1, false},
  };
  return sig;
}

// main(x, y, z) = (x + y) * z on (4, 64) int32, all in one 4096-byte vtcm storage.
inline Executable add_mul_executable() {
  Executable exe;
  exe.strings = {"global.vtcm"};
  Constant size;
  size.shape = {4096};
  Constant shape;
  shape.shape = {4, 64};
  Constant grid;
  grid.shape = {256};
  exe.constants = {size, shape, grid};
  exe.units = {KernelUnit{"vtcm_ops", kAddMulSource}};
  exe.kernels = {binary_int_kernel("compute_add_in_vtcm"), binary_int_kernel("compute_mul_in_vtcm")};
  Function f;
  f.name = "main";
  for (const char* n : {"x", "y", "z"}) f.params.push_back(ValueDesc{n, ValueKind::kTensor, DType::kInt32, {4, 64}});
  f.result = ValueDesc{"e", ValueKind::kTensor, DType::kInt32, {4, 64}};
  const uint64_t i32 = static_cast<uint64_t>(DType::kInt32);
  const uint64_t u8 = static_cast<uint64_t>(DType::kUInt8);
  // registers: x0 y1 z2 vtcm3 a4 b5 c6 d7 e8
  f.code = {
      make_instruction(Opcode::kAllocStorage, {3, 0, 0, u8, 0}),
      make_instruction(Opcode::kAllocTensor, {4, 3, 0, 1, i32}),
      make_instruction(Opcode::kCopyTensor, {0, 4}),
      make_instruction(Opcode::kAllocTensor, {5, 3, 1024, 1, i32}),
      make_instruction(Opcode::kCopyTensor, {1, 5}),
      make_instruction(Opcode::kAllocTensor, {6, 3, 2048, 1, i32}),
      make_instruction(Opcode::kCallKernel, {0, 2, kNoConstant}, {4, 5, 6}),
      make_instruction(Opcode::kKill, {4}),
      make_instruction(Opcode::kKill, {5}),
      make_instruction(Opcode::kAllocTensor, {7, 3, 0, 1, i32}),
      make_instruction(Opcode::kCopyTensor, {2, 7}),
      make_instruction(Opcode::kAllocTensor, {8, 3, 1024, 1, i32}),
      make_instruction(Opcode::kCallKernel, {1, 2, kNoConstant}, {6, 7, 8}),
      make_instruction(Opcode::kRet, {8}),
  };
  f.num_registers = 9;
  exe.functions = {f};
  ScopeRequirement vtcm;
  vtcm.scope = "global.vtcm";
  vtcm.kind = ScopeKind::kBuffer;
  vtcm.onchip = true;
  vtcm.capacity = 262144;
  vtcm.max_storage_bytes = 4096;
  vtcm.offset_alignment = 1024;
  exe.requirements.scopes = {vtcm};
  return exe;
}

}  // namespace stowage::testing
