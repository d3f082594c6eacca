#include "stowage/ir/constant_plan.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <set>

namespace stowage::ir {
namespace {

// Names the module's functions read: operands, arguments and returned values.
std::set<std::string_view> names_read(const Module& module) {
  std::set<std::string_view> read;
  for (const Function& f : module.functions) {
    for (const Binding& b : f.bindings) {
      for (const std::string& v : b.vars) read.insert(v);
      for (const Arg& a : b.args) {
        if (a.kind == Arg::Kind::kVar) read.insert(a.var);
      }
    }
    for (const std::string& v : f.returns) read.insert(v);
  }
  return read;
}

uint64_t round_up(uint64_t value, uint64_t alignment) { return (value + alignment - 1) / alignment * alignment; }

}  // namespace

Expected<ConstantPlan> plan_constants(const Module& module, const TargetDesc& target) {
  ConstantPlan plan;
  std::set<std::string_view> read = names_read(module);
  std::map<std::string, uint32_t> buffer_storage;  // scope -> its storage
  for (size_t i = 0; i < module.constants.size(); ++i) {
    const ConstantTensor& c = module.constants[i];
    if (read.count(c.name) == 0) continue;
    const ScopeDesc* scope = target.find_scope(c.scope);
    if (scope == nullptr) return Error(ErrorKind::kVerify, fmt::format("constant '{}': unknown scope '{}'", c.name, c.scope));
    const uint64_t nbytes = c.data->size();  // the verifier checked it against the type
    if (scope->kind == ScopeKind::kImage2d) {
      ConstantStoragePlan storage;
      storage.scope = c.scope;
      storage.kind = ScopeKind::kImage2d;
      storage.pixel_dtype = c.type.dtype;
      storage.image = *image_extent(c.type.shape, scope->image_layout());
      storage.nbytes = nbytes;  // a layout is a reshape: the pixels are the tensor's bytes
      plan.slots.push_back({i, static_cast<uint32_t>(plan.storages.size()), 0});
      plan.storages.push_back(std::move(storage));
      continue;
    }
    auto [it, added] = buffer_storage.emplace(c.scope, static_cast<uint32_t>(plan.storages.size()));
    if (added) {
      ConstantStoragePlan storage;
      storage.scope = c.scope;
      plan.storages.push_back(std::move(storage));
    }
    ConstantStoragePlan& storage = plan.storages[it->second];
    const uint64_t alignment = std::max<uint64_t>(scope->alignment, kConstantAlignment);
    const uint64_t offset = round_up(storage.nbytes, alignment);
    std::optional<uint64_t> end = checked_add(offset, nbytes);
    if (!end) {
      return Error(ErrorKind::kVerify, fmt::format("the constants of scope '{}' exceed 2^64 bytes", c.scope));
    }
    storage.nbytes = *end;
    plan.slots.push_back({i, it->second, offset});
  }
  for (ConstantStoragePlan& storage : plan.storages) storage.nbytes = std::max<uint64_t>(storage.nbytes, 1);
  return plan;
}

}  // namespace stowage::ir
