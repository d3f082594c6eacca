// Static memory planning of tensor-level functions.
//
// What the pass guarantees, for every function with `empty` bindings:
//  * Every `empty` tensor gets bytes of its own for as long as it lives: it is
//    placed by `alloc_tensor(storage, offset, ...)` into one storage per memory
//    scope, at an offset aligned to the scope's alignment, and no two tensors
//    alive at the same time share a byte. The result is checked again by the
//    verifier (the compiler runs it after this pass).
//  * A tensor lives from its `empty` to its last use (an operand of copy_tensor,
//    call_kernel, call or kill_object). A `kill_object` is inserted right after
//    the last use unless the program already kills it, so the bytes can be reused
//    by tensors allocated later.
//  * A tensor passed to `call` lives as long as the call's result (the callee may
//    return it); one that may leave through the returned result is not packed.
//  * Parameters are not touched. The returned tensor is not packed: it gets a
//    storage of its own, so that holding the result keeps nothing else alive.
//  * Storages are allocated at the function's entry, one per scope in use.
//  * On-chip scopes (a capacity in the target) keep what fits: if the packing
//    does not fit the capacity, tensors move to the scope's fallback, largest
//    byte-lifetime product first, until the rest fits.
//  * Hand-written storage-level bindings stay as written; their storages are
//    separate from the planned ones (and do not count against on-chip capacity
//    here: the runtime enforces capacity on everything).
//
// How: liveness is one pass over the bindings; offsets come from the packer
// (include/stowage/ir/packing.h), which searches for the lowest height under a
// step budget and so is deterministic. Texture scopes are pooled in 2D instead
// (pool_images): a tensor takes a free image of its scope and pixel type, the
// smallest that fits, else the one whose growth adds the least area; a tensor
// always sits at the image's origin, so tensors alive together never share one.
#include "stowage/ir/planner.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <map>
#include <optional>
#include <set>

#include "stowage/ir/packing.h"

namespace stowage::ir {
namespace {

struct PlannedTensor {
  size_t binding = 0;  // index of its `empty`
  std::string name;
  uint64_t nbytes = 0;
  int64_t first = 0;     // its `empty`
  int64_t last = 0;      // its last use
  bool user_killed = false;
  bool returned = false;
  const ScopeDesc* scope = nullptr;
  std::string scope_name;  // as requested
  uint64_t offset = 0;
  std::string storage;  // the storage it is placed in
  DType dtype = DType::kFloat32;
  std::optional<ImageExtent> image;  // texture scopes: the pixels it covers
};

// An image of a texture pool: its extent grows to hold every tensor placed in it.
struct PooledImage {
  std::string name;
  std::string scope_name;
  const ScopeDesc* scope = nullptr;
  DType dtype = DType::kFloat32;
  ImageExtent extent;
  int64_t busy_until = -1;  // the last use of the tensor it holds now
};

Error plan_error(const Function& f, const Binding& b, const std::string& what) {
  std::string where = b.loc.line > 0 ? fmt::format("{}:{}: ", b.loc.line, b.loc.col) : "";
  return Error(ErrorKind::kVerify, fmt::format("{}error: planning function '{}', tensor '{}': {}", where, f.name,
                                               b.result, what));
}

uint64_t round_up(uint64_t value, uint64_t alignment) { return (value + alignment - 1) / alignment * alignment; }

class FunctionPlanner {
 public:
  FunctionPlanner(Function& f, const TargetDesc& target, const PlanOptions& options, MemoryReport& report)
      : f_(f), target_(target), options_(options), report_(report) {}

  Status run() {
    if (auto status = collect(); !status) return status;
    if (tensors_.empty()) return {};
    if (auto status = place(); !status) return status;
    emit();
    return {};
  }

 private:
  Status collect() {
    std::map<std::string, size_t> index;
    // A `call` may return one of its tensor arguments: its result keeps every
    // planned tensor passed to it alive (transitively through further calls).
    std::map<std::string, std::set<size_t>> aliases;
    for (size_t i = 0; i < f_.bindings.size(); ++i) {
      const Binding& b = f_.bindings[i];
      auto note_use = [&](const std::string& v) {
        if (auto it = index.find(v); it != index.end()) tensors_[it->second].last = static_cast<int64_t>(i);
        if (auto it = aliases.find(v); it != aliases.end()) {
          for (size_t t : it->second) tensors_[t].last = static_cast<int64_t>(i);
        }
      };
      for (const auto& v : b.vars) note_use(v);
      for (const auto& a : b.args) {
        if (a.kind == Arg::Kind::kVar) note_use(a.var);
      }
      if (b.op == Op::kCall && !b.result.empty()) {
        std::set<size_t> passed;
        for (const auto& a : b.args) {
          if (a.kind != Arg::Kind::kVar) continue;
          if (auto it = index.find(a.var); it != index.end()) passed.insert(it->second);
          if (auto it = aliases.find(a.var); it != aliases.end()) passed.insert(it->second.begin(), it->second.end());
        }
        if (!passed.empty()) aliases[b.result] = std::move(passed);
      }
      if (b.op == Op::kKillObject) {
        if (auto it = index.find(b.vars[0]); it != index.end()) tensors_[it->second].user_killed = true;
      }
      names_.insert(b.result);
      if (b.op != Op::kEmpty) continue;
      PlannedTensor t;
      t.binding = i;
      t.name = b.result;
      t.first = t.last = static_cast<int64_t>(i);
      auto nbytes = checked_nbytes(b.shape, b.dtype);
      if (!nbytes) return plan_error(f_, b, "its size overflows");
      t.nbytes = *nbytes;
      t.scope = target_.find_scope(b.scope);
      if (t.scope == nullptr) return plan_error(f_, b, fmt::format("scope '{}' is not offered by the target", b.scope));
      t.dtype = b.dtype;
      if (t.scope->kind == ScopeKind::kImage2d) {
        t.image = image_extent(b.shape, t.scope->image_layout());
        if (!t.image) {
          return plan_error(f_, b, fmt::format("a tensor in texture scope '{}' needs a last extent of 4 and at most 5 "
                                               "dimensions", b.scope));
        }
        if (b.dtype != DType::kFloat32 && b.dtype != DType::kFloat16) {
          return plan_error(f_, b, "texture pixels are float32 or float16");
        }
      }
      t.scope_name = b.scope;
      t.returned = b.result == f_.ret;
      index[t.name] = tensors_.size();
      tensors_.push_back(std::move(t));
    }
    for (const auto& p : f_.params) names_.insert(p.name);
    // Tensors that may leave through the returned call result get storage of their own.
    if (auto it = aliases.find(f_.ret); it != aliases.end()) {
      for (size_t t : it->second) tensors_[t].returned = true;
    }
    return {};
  }

  // Groups tensors per scope, spills what an on-chip scope cannot hold, packs.
  Status place() {
    std::map<std::string, std::vector<size_t>> by_scope;  // resolved scope name -> tensors
    for (size_t i = 0; i < tensors_.size(); ++i) {
      if (tensors_[i].returned || tensors_[i].image) continue;
      by_scope[tensors_[i].scope->name].push_back(i);
    }
    pool_images();
    // On-chip scopes first: what spills joins its fallback before that is packed.
    std::vector<std::string> order;
    for (const auto& [name, members] : by_scope) {
      if (target_.find_scope(name)->capacity != 0) order.push_back(name);
    }
    for (const auto& [name, members] : by_scope) {
      if (target_.find_scope(name)->capacity == 0) order.push_back(name);
    }
    std::map<std::string, uint64_t> spilled_into;
    for (size_t next = 0; next < order.size(); ++next) {
      const std::string name = order[next];  // a copy: spills may append to `order`
      const ScopeDesc& scope = *target_.find_scope(name);
      std::vector<size_t>& members = by_scope[name];
      if (members.empty()) continue;
      auto start = std::chrono::steady_clock::now();
      auto packed = pack_scope(scope, members);
      if (!packed) return packed.error();
      PackResult result = packed.take();
      if (scope.capacity != 0 && options_.strategy == PlanStrategy::kPacked) {
        while (!result.fits || result.height > scope.capacity) {
          if (scope.fallback.empty()) {
            return Error(ErrorKind::kVerify,
                         fmt::format("error: planning function '{}': scope '{}' needs {} bytes, its capacity is {} "
                                     "and it has no fallback scope",
                                     f_.name, name, result.height, scope.capacity));
          }
          // Spill the tensor that holds the most bytes for the longest time.
          auto victim = std::max_element(members.begin(), members.end(), [&](size_t a, size_t b) {
            auto weight = [&](size_t i) { return tensors_[i].nbytes * static_cast<uint64_t>(tensors_[i].last - tensors_[i].first + 1); };
            return weight(a) < weight(b);
          });
          size_t moved = *victim;
          members.erase(victim);
          const ScopeDesc* fallback = target_.find_scope(scope.fallback);
          tensors_[moved].scope = fallback;
          tensors_[moved].scope_name = fallback->name;
          by_scope[fallback->name].push_back(moved);
          ++spilled_into[fallback->name];
          if (std::find(order.begin(), order.end(), fallback->name) == order.end()) order.push_back(fallback->name);
          if (members.empty()) break;
          packed = pack_scope(scope, members);
          if (!packed) return packed.error();
          result = packed.take();
        }
        if (members.empty()) continue;
      }
      std::chrono::duration<double> took = std::chrono::steady_clock::now() - start;
      record(scope, members, result, spilled_into[name], took.count());
    }
    return {};
  }

  // Texture scopes: tensors in order of allocation take an image that is free
  // (its tensor died) of the same scope and pixel type: the smallest that already
  // fits, else the one whose growth to fit adds the least area, else a new one.
  void pool_images() {
    std::vector<PooledImage> images;
    std::map<std::string, ScopeReport> reports;
    for (auto& t : tensors_) {
      if (!t.image || t.returned) continue;
      PooledImage* best = nullptr;
      uint64_t best_cost = UINT64_MAX;
      bool best_fits = false;
      for (auto& image : images) {
        if (options_.strategy == PlanStrategy::kNaive) break;  // the reference: an image each
        if (image.scope != t.scope || image.dtype != t.dtype || image.busy_until >= t.first) continue;
        bool fits = image.extent.height >= t.image->height && image.extent.width >= t.image->width;
        uint64_t area = image.extent.height * image.extent.width;
        uint64_t grown = std::max(image.extent.height, t.image->height) * std::max(image.extent.width, t.image->width);
        uint64_t cost = fits ? area : grown - area;
        if ((fits && !best_fits) || (fits == best_fits && cost < best_cost)) {
          best = &image;
          best_cost = cost;
          best_fits = fits;
        }
      }
      if (best == nullptr) {
        images.push_back(PooledImage{fresh_name("image"), t.scope_name, t.scope, t.dtype, *t.image, -1});
        best = &images.back();
      }
      best->extent.height = std::max(best->extent.height, t.image->height);
      best->extent.width = std::max(best->extent.width, t.image->width);
      best->busy_until = t.last;
      t.storage = best->name;
      t.offset = 0;
      ScopeReport& r = reports[t.scope_name];
      r.function = f_.name;
      r.scope = t.scope_name;
      r.tensors += 1;
      r.naive_pixels += t.image->height * t.image->width;
    }
    for (const auto& image : images) {
      images_.push_back(image);
      ScopeReport& r = reports[image.scope_name];
      r.images += 1;
      r.planned_pixels += image.extent.height * image.extent.width;
      r.planned_bytes += image.extent.height * image.extent.width * 4 * dtype_bytes(image.dtype);
    }
    for (auto& [name, r] : reports) {
      r.naive_bytes = 0;
      for (const auto& t : tensors_) {
        if (t.image && !t.returned && t.scope_name == name) r.naive_bytes += t.image->height * t.image->width * 4 * dtype_bytes(t.dtype);
      }
      report_.scopes.push_back(r);
    }
  }

  Expected<PackResult> pack_scope(const ScopeDesc& scope, const std::vector<size_t>& members) {
    std::vector<PackItem> items;
    for (size_t i : members) {
      const PlannedTensor& t = tensors_[i];
      items.push_back(PackItem{t.name, t.first, t.last + 1, t.nbytes, std::max<uint64_t>(scope.alignment, 1)});
    }
    if (options_.strategy == PlanStrategy::kNaive) {
      PackResult naive;
      naive.fits = true;
      naive.offsets.assign(items.size(), 0);
      naive.lower_bound = live_bytes_lower_bound(items);
      for (const auto& item : items) naive.height += round_up(item.size, items[0].alignment);
      return naive;
    }
    PackOptions options;
    if (scope.capacity != 0) options.capacity = scope.capacity;
    options.time_limit_seconds = options_.time_limit_seconds;
    return pack(items, options);
  }

  void record(const ScopeDesc& scope, const std::vector<size_t>& members, const PackResult& result, uint64_t spilled,
              double seconds) {
    std::vector<PackItem> items;
    for (size_t k = 0; k < members.size(); ++k) {
      PlannedTensor& t = tensors_[members[k]];
      items.push_back(PackItem{t.name, t.first, t.last + 1, t.nbytes, std::max<uint64_t>(scope.alignment, 1)});
      t.offset = result.offsets[k];
    }
    ScopeReport r;
    r.function = f_.name;
    r.scope = tensors_[members[0]].scope_name;
    r.tensors = members.size();
    r.lower_bound = live_bytes_lower_bound(items);
    r.naive_bytes = naive_total(items);
    r.reuse_only_bytes = reuse_only_total(items);
    r.spilled = spilled;
    r.proven_optimal = result.proven_optimal;
    r.seconds = seconds;
    if (options_.strategy == PlanStrategy::kNaive) {
      for (size_t i : members) tensors_[i].storage = fresh_name("storage");
      r.planned_bytes = 0;
      for (size_t i : members) r.planned_bytes += round_up(std::max<uint64_t>(tensors_[i].nbytes, 1), scope.alignment);
      storages_.push_back({"", r.scope, 0});  // marker: per-tensor storages are emitted with their tensors
    } else {
      std::string storage = fresh_name("arena");
      for (size_t i : members) tensors_[i].storage = storage;
      r.planned_bytes = round_up(std::max<uint64_t>(result.height, 1), std::max<uint64_t>(scope.alignment, 1));
      storages_.push_back({storage, r.scope, r.planned_bytes});
    }
    report_.scopes.push_back(std::move(r));
  }

  std::string fresh_name(const std::string& stem) {
    for (int n = 0;; ++n) {
      std::string name = fmt::format("{}{}", stem, n);
      if (names_.insert(name).second) return name;
    }
  }

  static Binding alloc_storage(const std::string& name, uint64_t nbytes, const std::string& scope) {
    Binding b;
    b.result = name;
    b.op = Op::kAllocStorage;
    b.shape = {static_cast<int64_t>(std::max<uint64_t>(nbytes, 1))};
    b.device = 0;
    b.dtype = DType::kUInt8;
    b.scope = scope;
    return b;
  }

  static Binding alloc_image(const std::string& name, ImageExtent extent, DType dtype, const std::string& scope) {
    Binding b;
    b.result = name;
    b.op = Op::kAllocStorage;
    b.shape = {static_cast<int64_t>(extent.height), static_cast<int64_t>(extent.width)};
    b.device = 0;
    b.dtype = dtype;
    b.scope = scope;
    return b;
  }

  void emit() {
    std::vector<Binding> out;
    for (const auto& s : storages_) {
      if (!s.name.empty()) out.push_back(alloc_storage(s.name, s.nbytes, s.scope));
    }
    for (const auto& image : images_) out.push_back(alloc_image(image.name, image.extent, image.dtype, image.scope_name));
    // Kills due after each binding.
    std::map<int64_t, std::vector<std::string>> kills;
    for (const auto& t : tensors_) {
      if (t.returned) continue;
      if (!t.user_killed) kills[t.last].push_back(t.name);
      // A storage of its own (the naive reference) ends with its tensor.
      if (options_.strategy == PlanStrategy::kNaive && !t.image) kills[t.last].push_back(t.storage);
    }
    std::map<size_t, const PlannedTensor*> planned;
    for (const auto& t : tensors_) planned[t.binding] = &t;
    for (size_t i = 0; i < f_.bindings.size(); ++i) {
      Binding b = f_.bindings[i];
      if (auto it = planned.find(i); it != planned.end()) {
        const PlannedTensor& t = *it->second;
        uint64_t alignment = std::max<uint64_t>(t.scope->alignment, 1);
        std::string storage = t.storage;
        if (t.returned && t.image) {
          storage = fresh_name("result");
          out.push_back(alloc_image(storage, *t.image, t.dtype, t.scope_name));
        } else if (t.returned || (options_.strategy == PlanStrategy::kNaive && !t.image)) {
          storage = t.returned ? fresh_name("result") : t.storage;
          out.push_back(alloc_storage(storage, round_up(std::max<uint64_t>(t.nbytes, 1), alignment), t.scope_name));
        }
        Binding a;
        a.result = b.result;
        a.op = Op::kAllocTensor;
        a.vars = {storage};
        a.offset = static_cast<int64_t>(t.returned || (options_.strategy == PlanStrategy::kNaive && !t.image) ? 0 : t.offset);
        a.shape = b.shape;
        a.dtype = b.dtype;
        a.loc = b.loc;
        out.push_back(std::move(a));
      } else {
        out.push_back(std::move(b));
      }
      for (const auto& name : kills[static_cast<int64_t>(i)]) {
        Binding k;
        k.op = Op::kKillObject;
        k.vars = {name};
        out.push_back(std::move(k));
      }
    }
    f_.bindings = std::move(out);
  }

  struct StorageToEmit {
    std::string name;
    std::string scope;
    uint64_t nbytes;
  };

  Function& f_;
  const TargetDesc& target_;
  const PlanOptions& options_;
  MemoryReport& report_;
  std::vector<PlannedTensor> tensors_;
  std::vector<StorageToEmit> storages_;
  std::vector<PooledImage> images_;
  std::set<std::string> names_;
};

}  // namespace

bool has_tensor_level_bindings(const Module& module) {
  for (const auto& f : module.functions) {
    for (const auto& b : f.bindings) {
      if (b.op == Op::kEmpty) return true;
    }
  }
  return false;
}

Expected<MemoryReport> plan_memory(Module& module, const TargetDesc& target, const PlanOptions& options) {
  MemoryReport report;
  for (auto& f : module.functions) {
    if (auto status = FunctionPlanner(f, target, options, report).run(); !status) return status.error();
  }
  return report;
}

}  // namespace stowage::ir
