// plan_frames: which registers of each function hold one constant in every
// invocation (Frame, vm_impl.h), loaded once here so that invocations skip them.
#include "vm_impl.h"

namespace stowage::vm {

void VirtualMachine::Impl::plan_frames() {
  frames.resize(exe->functions.size());
  for (uint32_t f = 0; f < exe->functions.size(); ++f) {
    const Function& fn = exe->functions[f];
    Frame& frame = frames[f];
    frame.regs.assign(fn.num_registers, Value());
    frame.preloaded.assign(fn.code.size(), false);
    // Per register: how often it is written (parameters once on entry), whether an
    // instruction empties it, and which constant load wrote it.
    std::vector<uint32_t> writes(fn.num_registers, 0);
    std::vector<bool> emptied(fn.num_registers, false);
    std::vector<uint32_t> loaded_by(fn.num_registers, UINT32_MAX);
    for (size_t i = 0; i < fn.params.size() && i < writes.size(); ++i) writes[i] = 1;
    for (uint32_t pc = 0; pc < fn.code.size(); ++pc) {
      const Instruction& ins = fn.code[pc];
      const OpcodeInfo& info = opcode_info(ins.op);
      size_t slot = 0;
      for (size_t i = 0; i < info.num_operands; ++i) {
        if (info.operands[i] == OperandKind::kRegList) continue;
        if (info.operands[i] == OperandKind::kDef) {
          auto dst = static_cast<uint32_t>(ins.ops[slot]);
          ++writes[dst];
          if (ins.op == Opcode::kLoadConst || ins.op == Opcode::kLoadTensorConstant) loaded_by[dst] = pc;
        }
        ++slot;
      }
      switch (ins.op) {
        case Opcode::kKill: emptied[ins.ops[operands::Kill::kReg]] = true; break;
        case Opcode::kRet: emptied[ins.ops[operands::Ret::kReg]] = true; break;
        case Opcode::kRetTuple:
          for (uint32_t r : ins.list) emptied[r] = true;
          break;
        default: break;
      }
    }
    Value unused;
    bool returned = false;
    for (uint32_t r = 0; r < fn.num_registers; ++r) {
      const uint32_t pc = loaded_by[r];
      if (writes[r] != 1 || emptied[r] || pc == UINT32_MAX) {
        frame.transient.push_back(r);
        continue;
      }
      execute(f, pc, fn.code[pc], frame.regs, unused, returned);
      frame.preloaded[pc] = true;
    }
  }
}

}  // namespace stowage::vm
