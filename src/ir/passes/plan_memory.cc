// Static memory planning of tensor-level functions.
//
// What the pass guarantees, for every function with `empty` or
// `empty_discontiguous` bindings:
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
//  * A `view` shares the bytes of the tensor it views: that tensor lives as long
//    as its views, and is not packed when a view of it is returned.
//  * Parameters are not touched. A returned tensor (the returned variable, or
//    each field of a returned tuple) is not packed: it gets a storage of its
//    own, so that holding one result keeps nothing else alive.
//  * Storages are allocated at the function's entry, one per scope in use.
//  * On-chip scopes (a capacity in the target) keep what fits: if the packing
//    does not fit the capacity, tensors move to the scope's fallback, largest
//    byte-lifetime product first, until the rest fits.
//  * Hand-written storage-level bindings stay as written; their storages are
//    separate from the planned ones (and do not count against on-chip capacity
//    here: the runtime enforces capacity on everything).
//  * `empty_discontiguous` becomes `alloc_discontiguous_tensor`, alive like an
//    `empty` tensor (never returned nor passed to `call`: the verifier forbids
//    it). Its tables, back to back breadth-first, are one item of the storage
//    of `table_scope`, packed with the other tensors there, so each table lies
//    at a multiple of the table entry size. Its blocks go to the storage of
//    `scope`, each at a multiple of the element size (all a kernel reading the
//    block needs; a coarser alignment would waste the holes blocks are for),
//    sharing no byte with anything alive at the same time there, its own
//    tables and blocks included. On-chip, the end of everything (items and
//    blocks) is within the capacity. Every offset fits a table entry, else
//    planning fails. For spilling, its tables and its blocks are two separate
//    tensors, each weighed by its own bytes.
//
// How: liveness is one pass over the bindings; offsets come from the packer
// (include/stowage/ir/packing.h), which searches for the lowest height under a
// step budget and so is deterministic. Blocks are placed after the packer has
// placed the scope's contiguous items (place_blocks): tensor by tensor in
// order of allocation, block by block, at the lowest offset free during the
// tensor's life, so holes too small for a whole tensor take blocks; with
// blocks of one size and nothing else in the scope, this meets the live-bytes
// lower bound. With blocks in a scope, the packer minimises the contiguous
// items' height even under a capacity, to leave the most room above them; the
// capacity is then checked against the end of everything, and spills follow
// the rule above. PlanOptions::split_discontiguous = false packs all blocks of
// a tensor back to back as one item instead: the contiguous baseline.
//
// Texture scopes (plan_textures.cc) are planned in 2D, per scope and pixel type:
//  * Every texture tensor gets an image storage (an atlas) and a rectangle of
//    pixels in it, `alloc_tensor(atlas, [y, x], ...)`; tensors alive at the same
//    time never share a pixel of one atlas. The verifier checks it again.
//  * Within one call_kernel, no atlas holds both a tensor bound to a write_only
//    image parameter and one bound to a read_only image parameter (OpenCL
//    forbids reading and writing one image object in a kernel; views count as
//    the tensor they view). So a scope usually has two to four atlases.
//  * A tensor bound to an image parameter with no `stowage_image_offset`
//    parameter after it sits at the origin of an image of its own while alive:
//    such tensors take whole images, reused over time (a free image that fits,
//    the smallest; else the free one whose growth adds the least area; else a
//    new one). PlanStrategy::kNaive gives every texture tensor its own image.
//  * Returned texture tensors get an image of their own, like returned buffers.
// How: the rectangle packer (include/stowage/ir/packing_rectangles.h): greedy
// bottom-left placement over time in several orders, then ruin and recreate
// under a step budget, so the plan is the same on every machine. The report
// counts pixel bytes: the storages, each tensor in an image of its own
// (naive), whole images reused without offsets (reuse-only), and as the lower
// bound the most pixel bytes alive at one moment. Shapes and the read/write
// rule can keep every plan above that bound (docs/planning.md).
#include "stowage/ir/planner.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <map>
#include <numeric>
#include <optional>
#include <set>

#include "plan_textures.h"
#include "stowage/bytecode/discontiguous.h"
#include "stowage/ir/lifetimes.h"
#include "stowage/ir/packing.h"

namespace stowage::ir {
namespace {

// A discontiguous tensor is planned as two parts that share its name and life:
// its tables (one contiguous item) and its blocks.
enum class Part { kWhole, kBlocks, kTables };

struct PlannedTensor {
  size_t binding = 0;  // index of its `empty` / `empty_discontiguous`
  std::string name;
  Part part = Part::kWhole;
  uint64_t nbytes = 0;  // kBlocks: all its blocks
  uint64_t block_bytes = 0;  // kBlocks
  uint64_t num_blocks = 0;   // kBlocks
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
  ImageOffset image_offset;          // texture scopes: where in its storage, once placed
  bool at_origin = false;            // bound to an image parameter that takes no offset
  std::vector<uint64_t> block_offsets;  // kBlocks, once placed
};

// Where the members of one scope go: offsets of the contiguous ones (packed),
// block offsets of the blocks parts, and the bytes it all needs.
struct Arrangement {
  std::vector<uint64_t> offsets;               // per member
  std::vector<std::vector<uint64_t>> blocks;   // per member; kBlocks parts only
  uint64_t height = 0;
  bool fits = true;
  bool proven_optimal = false;
};

Error plan_error(const Function& f, const Binding& b, const std::string& what) {
  std::string where = b.loc.line > 0 ? fmt::format("{}:{}: ", b.loc.line, b.loc.col) : "";
  return Error(ErrorKind::kVerify, fmt::format("{}error: planning function '{}', tensor '{}': {}", where, f.name,
                                               b.result, what));
}

uint64_t round_up(uint64_t value, uint64_t alignment) { return (value + alignment - 1) / alignment * alignment; }

// The bytes of a storage holding `nbytes` (at least 1) in whole units of
// `alignment`, if a storage can be that large (its size is an int64 in the IR).
std::optional<uint64_t> storage_bytes(uint64_t nbytes, uint64_t alignment) {
  alignment = std::max<uint64_t>(alignment, 1);
  auto padded = checked_add(std::max<uint64_t>(nbytes, 1), alignment - 1);
  if (!padded || *padded / alignment * alignment > uint64_t(INT64_MAX)) return std::nullopt;
  return *padded / alignment * alignment;
}

using Clock = std::chrono::steady_clock;

class FunctionPlanner {
 public:
  FunctionPlanner(const Module& module, Function& f, const TargetDesc& target, const PlanOptions& options,
                  Clock::time_point deadline, MemoryReport& report, const std::set<std::string>& taken_names)
      : module_(module), f_(f), target_(target), options_(options), deadline_(deadline), report_(report),
        names_(taken_names) {}

  Status run() {
    if (auto status = collect(); !status) return status;
    if (tensors_.empty()) return {};
    if (auto status = place(); !status) return status;
    return emit();
  }

 private:
  Status collect() {
    std::map<std::string, std::vector<size_t>> index;  // name -> its parts
    // A `call` may return one of its tensor arguments: its result keeps every
    // planned tensor passed to it alive (transitively through further calls).
    std::map<std::string, std::set<size_t>> aliases;
    for (size_t i = 0; i < f_.bindings.size(); ++i) {
      const Binding& b = f_.bindings[i];
      auto note_use = [&](const std::string& v) {
        if (auto it = index.find(v); it != index.end()) {
          for (size_t t : it->second) tensors_[t].last = static_cast<int64_t>(i);
        }
        if (auto it = aliases.find(v); it != aliases.end()) {
          for (size_t t : it->second) tensors_[t].last = static_cast<int64_t>(i);
        }
      };
      for (const auto& v : b.vars) note_use(v);
      for (const auto& a : b.args) {
        if (a.kind == Arg::Kind::kVar) note_use(a.var);
      }
      // A view shares the bytes of what it views: its uses are that tensor's uses.
      if (b.op == Op::kView) {
        std::set<size_t> viewed;
        if (auto it = index.find(b.vars[0]); it != index.end()) viewed.insert(it->second.begin(), it->second.end());
        if (auto it = aliases.find(b.vars[0]); it != aliases.end()) viewed.insert(it->second.begin(), it->second.end());
        if (!viewed.empty()) aliases[b.result] = std::move(viewed);
      }
      if (b.op == Op::kCall && !b.result.empty()) {
        std::set<size_t> passed;
        for (const auto& a : b.args) {
          if (a.kind != Arg::Kind::kVar) continue;
          if (auto it = index.find(a.var); it != index.end()) passed.insert(it->second.begin(), it->second.end());
          if (auto it = aliases.find(a.var); it != aliases.end()) passed.insert(it->second.begin(), it->second.end());
        }
        if (!passed.empty()) aliases[b.result] = std::move(passed);
      }
      if (b.op == Op::kKillObject) {
        if (auto it = index.find(b.vars[0]); it != index.end()) {
          for (size_t t : it->second) tensors_[t].user_killed = true;
        }
      }
      if (b.op == Op::kCallKernel) note_images(b, index, aliases);
      if (b.op == Op::kEmptyDiscontiguous || b.op == Op::kAllocDiscontiguousTensor) discontiguous_.insert(b.result);
      names_.insert(b.result);
      if (b.op == Op::kEmptyDiscontiguous) {
        if (auto status = collect_discontiguous(b, i, index); !status) return status;
        continue;
      }
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
      t.returned = is_returned(b.result);
      index[t.name] = {tensors_.size()};
      tensors_.push_back(std::move(t));
    }
    for (const auto& p : f_.params) names_.insert(p.name);
    // Tensors that may leave through a returned call result or view get storage of their own.
    for (const std::string& name : f_.returns) {
      if (auto it = aliases.find(name); it != aliases.end()) {
        for (size_t t : it->second) tensors_[t].returned = true;
      }
    }
    return {};
  }

  // The texture tensors a launch binds to image parameters (through views too):
  // those it writes go apart from those it reads (OpenCL forbids reading and
  // writing one image in a kernel), and those bound to a parameter without an
  // offset parameter after it must sit at their image's origin.
  void note_images(const Binding& b, const std::map<std::string, std::vector<size_t>>& index,
                   const std::map<std::string, std::set<size_t>>& aliases) {
    const KernelSignature* kernel = module_.find_kernel(b.callee);
    if (kernel == nullptr) return;  // the verifier refused it already
    std::vector<size_t> reads, writes;
    size_t param = 0;
    for (const Arg& a : b.args) {
      if (param >= kernel->params.size()) break;
      if (a.kind == Arg::Kind::kVar && discontiguous_.count(a.var)) {
        param += 3;  // tables, root offset, data
        continue;
      }
      const KernelParam& p = kernel->params[param];
      const bool offset = p.is_image() && has_image_offset(*kernel, param);
      if (p.is_image() && a.kind == Arg::Kind::kVar) {
        std::set<size_t> bound;
        if (auto it = index.find(a.var); it != index.end()) bound.insert(it->second.begin(), it->second.end());
        if (auto it = aliases.find(a.var); it != aliases.end()) bound.insert(it->second.begin(), it->second.end());
        for (size_t t : bound) {
          if (!tensors_[t].image) continue;
          (p.writes() ? writes : reads).push_back(t);
          if (!offset) tensors_[t].at_origin = true;
        }
      }
      param += offset ? 2 : 1;
    }
    for (size_t w : writes) {
      for (size_t r : reads) {
        if (w != r) apart_.push_back({std::min(w, r), std::max(w, r)});
      }
    }
  }

  // Whether `name` leaves the function: the returned variable, or a field of the returned tuple.
  bool is_returned(const std::string& name) const {
    return std::find(f_.returns.begin(), f_.returns.end(), name) != f_.returns.end();
  }

  // Its blocks, then its tables, as two tensors of the same name and life.
  Status collect_discontiguous(const Binding& b, size_t i, std::map<std::string, std::vector<size_t>>& index) {
    auto geometry = discontiguous_geometry(b.shape, b.dtype);
    auto nbytes = checked_nbytes(b.shape, b.dtype);
    if (!geometry || !nbytes) return plan_error(f_, b, "its shape is not that of a discontiguous tensor, or overflows");
    // Every block's offset is listed: the count is capped for the function's discontiguous tensors together.
    if (geometry->num_blocks > kMaxBlocks - blocks_) {
      return plan_error(f_, b, fmt::format("its {} blocks make more than {} in the function's discontiguous tensors, "
                                           "the most the planner places", geometry->num_blocks, kMaxBlocks));
    }
    blocks_ += geometry->num_blocks;
    // Entries over all levels: d0 + d0*d1 + ... + d0*...*d(n-1).
    std::optional<uint64_t> entries = 0, product = 1;
    for (size_t k = 0; k + 1 < b.shape.size() && entries && product; ++k) {
      product = checked_mul(*product, static_cast<uint64_t>(b.shape[k]));
      if (product) entries = checked_add(*entries, *product);
    }
    std::optional<uint64_t> table_bytes = entries && product ? checked_mul(*entries, target_.table_entry_bytes)
                                                             : std::nullopt;
    if (!table_bytes) return plan_error(f_, b, "its tables' size overflows");
    PlannedTensor blocks;
    blocks.binding = i;
    blocks.name = b.result;
    blocks.part = Part::kBlocks;
    blocks.first = blocks.last = static_cast<int64_t>(i);
    blocks.dtype = b.dtype;
    blocks.nbytes = *nbytes;
    blocks.block_bytes = geometry->block_bytes;
    blocks.num_blocks = geometry->num_blocks;
    PlannedTensor tables = blocks;
    tables.part = Part::kTables;
    tables.nbytes = *table_bytes;
    tables.block_bytes = tables.num_blocks = 0;
    for (auto [part, scope] : {std::pair{&blocks, &b.scope}, std::pair{&tables, &b.table_scope}}) {
      part->scope = target_.find_scope(*scope);
      if (part->scope == nullptr) {
        return plan_error(f_, b, fmt::format("scope '{}' is not offered by the target", *scope));
      }
      if (part->scope->kind != ScopeKind::kBuffer) {
        return plan_error(f_, b,
                          fmt::format("scope '{}' holds images; discontiguous tensors need buffer scopes", *scope));
      }
      part->scope_name = *scope;
    }
    index[b.result] = {tensors_.size(), tensors_.size() + 1};
    tensors_.push_back(std::move(blocks));
    tensors_.push_back(std::move(tables));
    return {};
  }

  // Groups tensors per scope, spills what an on-chip scope cannot hold, packs.
  Status place() {
    std::map<std::string, std::vector<size_t>> by_scope;  // resolved scope name -> tensors
    for (size_t i = 0; i < tensors_.size(); ++i) {
      if (tensors_[i].returned || tensors_[i].image) continue;
      by_scope[tensors_[i].scope->name].push_back(i);
    }
    if (auto status = place_textures(); !status) return status;
    if (options_.strategy == PlanStrategy::kPacked) {
      if (auto status = reserve_capacity(); !status) return status;
    }
    // On-chip scopes first: what spills joins its fallback before that is packed.
    std::vector<std::string> order;
    for (const auto& [name, members] : by_scope) {
      if (target_.find_scope(name)->capacity != 0) order.push_back(name);
    }
    for (const auto& [name, members] : by_scope) {
      if (target_.find_scope(name)->capacity == 0) order.push_back(name);
    }
    std::map<std::string, uint64_t> spilled_into, spilled_bytes_into;
    for (size_t next = 0; next < order.size(); ++next) {
      const std::string name = order[next];  // a copy: spills may append to `order`
      const ScopeDesc& scope = *target_.find_scope(name);
      std::vector<size_t>& members = by_scope[name];
      if (members.empty()) continue;
      auto start = std::chrono::steady_clock::now();
      auto arranged = arrange(scope, members);
      if (!arranged) return arranged.error();
      Arrangement result = arranged.take();
      if (scope.capacity != 0 && options_.strategy == PlanStrategy::kPacked) {
        while (!result.fits) {
          if (scope.fallback.empty()) {
            const uint64_t taken = reserved_[&scope];
            return Error(ErrorKind::kVerify,
                         fmt::format("error: planning function '{}': scope '{}' needs {} bytes, its capacity is {}{} "
                                     "and it has no fallback scope",
                                     f_.name, name, result.height, scope.capacity,
                                     taken == 0 ? "" : fmt::format(" ({} taken by storages the function allocates "
                                                                   "itself or returns)", taken)));
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
          spilled_bytes_into[fallback->name] += tensors_[moved].nbytes;
          if (std::find(order.begin(), order.end(), fallback->name) == order.end()) order.push_back(fallback->name);
          if (members.empty()) break;
          arranged = arrange(scope, members);
          if (!arranged) return arranged.error();
          result = arranged.take();
        }
        if (members.empty()) continue;
      }
      if (options_.strategy == PlanStrategy::kPacked && !storage_bytes(result.height, scope.alignment)) {
        return scope_error(scope, fmt::format("its tensors need {} bytes at once, more than one storage can hold "
                                              "({} bytes)", result.height, INT64_MAX));
      }
      std::chrono::duration<double> took = std::chrono::steady_clock::now() - start;
      record(scope, members, result, spilled_into[name], spilled_bytes_into[name], took.count());
    }
    return {};
  }

  // A scope with a capacity holds, beside its planned storage (alive from the
  // function's entry to its end), the storages the function allocates itself
  // and those of its returned tensors. A returned tensor that does not fit
  // beside the function's own storages moves to the fallback scope; the
  // planned storage gets what is left at the fullest moment (reserved_).
  Status reserve_capacity() {
    std::map<const ScopeDesc*, std::vector<uint64_t>> own;  // per scope: bytes alive after each binding
    std::map<std::string, std::pair<const ScopeDesc*, uint64_t>> live;
    std::map<const ScopeDesc*, uint64_t> total;
    const size_t n = f_.bindings.size();
    for (size_t i = 0; i < n; ++i) {
      const Binding& b = f_.bindings[i];
      if (b.op == Op::kAllocStorage && b.shape.size() == 1 && b.shape[0] > 0) {
        const ScopeDesc* scope = target_.find_scope(b.scope);
        if (scope != nullptr && scope->capacity != 0 && scope->kind == ScopeKind::kBuffer) {
          live[b.result] = {scope, static_cast<uint64_t>(b.shape[0])};
          total[scope] += static_cast<uint64_t>(b.shape[0]);  // at most the capacity each: the verifier checked
        }
      } else if (b.op == Op::kKillObject) {
        if (auto it = live.find(b.vars[0]); it != live.end()) {
          total[it->second.first] -= it->second.second;
          live.erase(it);
        }
      }
      for (const auto& [scope, bytes] : total) {
        std::vector<uint64_t>& row = own[scope];
        row.resize(n, 0);
        row[i] = bytes;
      }
    }
    // The most the function's own storages hold from each binding on.
    for (auto& [scope, row] : own) {
      for (size_t i = n; i-- > 1;) row[i - 1] = std::max(row[i - 1], row[i]);
    }
    std::map<const ScopeDesc*, std::vector<std::pair<size_t, uint64_t>>> kept;  // returned storages staying
    for (PlannedTensor& t : tensors_) {
      if (!t.returned || t.image || t.scope->capacity == 0) continue;
      const ScopeDesc* scope = t.scope;
      auto bytes = storage_bytes(t.nbytes, scope->alignment);
      uint64_t need = bytes ? *bytes : UINT64_MAX;
      for (const auto& [at, other] : kept[scope]) need = checked_add(need, other).value_or(UINT64_MAX);
      if (auto it = own.find(scope); it != own.end())
        need = checked_add(need, it->second[t.binding]).value_or(UINT64_MAX);
      if (need <= scope->capacity) {
        kept[scope].push_back({t.binding, *bytes});
        continue;
      }
      if (scope->fallback.empty()) {
        return plan_error(f_, f_.bindings[t.binding],
                          fmt::format("the returned tensor needs {} bytes of scope '{}', beside the storages the "
                                      "function allocates there itself; its capacity is {} and it has no fallback "
                                      "scope", need, scope->name, scope->capacity));
      }
      t.scope = target_.find_scope(scope->fallback);
      t.scope_name = t.scope->name;
    }
    for (auto& [scope, row] : own) reserved_[scope] = row.empty() ? 0 : row[0];
    for (const auto& [scope, storages] : kept) {
      // Returned storages live from their binding to the end: the fullest moment is at one of their births or
      // at the peak of the function's own storages.
      uint64_t peak = reserved_[scope];
      for (const auto& [at, bytes] : storages) {
        uint64_t sum = own.count(scope) ? own[scope][at] : 0;
        for (const auto& [other_at, other] : storages) sum += other_at <= at ? other : 0;
        peak = std::max(peak, sum);
      }
      reserved_[scope] = peak;
    }
    return {};
  }

  // The bytes the planned storage of a scope may take: none without a capacity.
  std::optional<uint64_t> arena_room(const ScopeDesc& scope) {
    if (scope.capacity == 0) return std::nullopt;
    const uint64_t taken = std::min(reserved_[&scope], scope.capacity);
    const uint64_t alignment = std::max<uint64_t>(scope.alignment, 1);
    return (scope.capacity - taken) / alignment * alignment;
  }

  // Texture scopes: every texture tensor but the returned ones gets an image
  // storage and a place in it (plan_textures.cc).
  Status place_textures() {
    std::vector<TextureTensor> textures;
    std::vector<size_t> which;  // tensors_ index of each
    std::map<size_t, size_t> position;
    for (size_t i = 0; i < tensors_.size(); ++i) {
      const PlannedTensor& t = tensors_[i];
      if (!t.image || t.returned) continue;
      position[i] = textures.size();
      which.push_back(i);
      textures.push_back(TextureTensor{t.name, t.scope, t.scope_name, t.dtype, *t.image, t.first, t.last, t.at_origin});
    }
    if (textures.empty()) return {};
    std::vector<std::pair<size_t, size_t>> apart;
    std::sort(apart_.begin(), apart_.end());
    apart_.erase(std::unique(apart_.begin(), apart_.end()), apart_.end());
    for (const auto& [a, b] : apart_) {
      auto ia = position.find(a), ib = position.find(b);
      if (ia != position.end() && ib != position.end()) apart.push_back({ia->second, ib->second});
    }
    auto plan = plan_textures(f_.name, textures, apart, target_, options_.strategy == PlanStrategy::kNaive,
                              [this](const std::string& stem) { return fresh_name(stem); });
    if (!plan) return plan.error();
    for (size_t k = 0; k < textures.size(); ++k) {
      PlannedTensor& t = tensors_[which[k]];
      t.storage = plan->storages[plan->storage[k]].name;
      t.offset = 0;
      t.image_offset = plan->offset[k];
    }
    images_ = std::move(plan->storages);
    for (ScopeReport& r : plan->reports) report_.scopes.push_back(std::move(r));
    return {};
  }

  // The offset alignment of a part packed as one item: tables sit at multiples
  // of the entry size, blocks kept together at multiples of the element size.
  // Kernels reach both through offsets into the whole storage, not through
  // sub-buffers, so the scope's (sub-buffer) alignment does not apply to them.
  uint64_t item_alignment(const PlannedTensor& t, const ScopeDesc& scope) const {
    if (t.part == Part::kTables) return target_.table_entry_bytes;
    if (t.part == Part::kBlocks) return dtype_bytes(t.dtype);
    return std::max<uint64_t>(scope.alignment, 1);
  }

  // Blocks placed one by one (rather than kept together as one item).
  bool split(const PlannedTensor& t) const {
    return t.part == Part::kBlocks && options_.split_discontiguous && options_.strategy == PlanStrategy::kPacked;
  }

  PackItem item_of(const PlannedTensor& t, const ScopeDesc& scope) const {
    return PackItem{t.name, t.first, t.last + 1, t.nbytes, item_alignment(t, scope)};
  }

  Error scope_error(const ScopeDesc& scope, const std::string& what) const {
    return Error(ErrorKind::kVerify, fmt::format("error: planning function '{}', scope '{}': {}", f_.name, scope.name,
                                                 what));
  }

  // Packs the contiguous members, then places the blocks of the others in what is free.
  Expected<Arrangement> arrange(const ScopeDesc& scope, const std::vector<size_t>& members) {
    const std::optional<uint64_t> room = arena_room(scope);
    Arrangement out;
    out.offsets.assign(members.size(), 0);
    out.blocks.resize(members.size());
    std::vector<PackItem> items;
    std::vector<size_t> packed;  // positions in `members` of the items
    std::vector<size_t> split_members;
    for (size_t k = 0; k < members.size(); ++k) {
      const PlannedTensor& t = tensors_[members[k]];
      if (split(t)) {
        split_members.push_back(k);
        continue;
      }
      items.push_back(item_of(t, scope));
      packed.push_back(k);
    }
    // Every contiguous item at 0 in a storage of its own (naive), or packed.
    PackResult result;
    result.fits = true;
    result.offsets.assign(items.size(), 0);
    if (options_.strategy == PlanStrategy::kNaive) {
      for (const auto& item : items) result.height += round_up(item.size, item.alignment);
    } else {
      PackOptions options;
      // Blocks fit in holes and above the items: keep the items low, whatever the capacity.
      if (room && split_members.empty()) options.capacity = *room;
      options.lower_when_over = false;  // over: tensors spill, the height does not matter
      options.time_limit_seconds = std::chrono::duration<double>(deadline_ - Clock::now()).count();
      auto packed_result = pack(items, options);
      if (!packed_result) return scope_error(scope, packed_result.error().message());
      result = packed_result.take();
    }
    for (size_t j = 0; j < packed.size(); ++j) out.offsets[packed[j]] = result.offsets[j];
    // Blocks kept together lie back to back from their item's offset.
    for (size_t k = 0; k < members.size(); ++k) {
      const PlannedTensor& t = tensors_[members[k]];
      if (t.part != Part::kBlocks || split(t)) continue;
      for (uint64_t n = 0; n < t.num_blocks; ++n) out.blocks[k].push_back(out.offsets[k] + n * t.block_bytes);
    }
    out.height = result.height;
    out.fits = result.fits && (!room || out.height <= *room);
    out.proven_optimal = result.proven_optimal;
    if (split_members.empty()) return out;
    // In order of allocation: with blocks of one size, that reaches the live-bytes bound.
    std::sort(split_members.begin(), split_members.end(),
              [&](size_t a, size_t b) { return tensors_[members[a]].first < tensors_[members[b]].first; });
    std::vector<BlockRequest> requests;
    for (size_t k : split_members) {
      const PlannedTensor& t = tensors_[members[k]];
      requests.push_back(BlockRequest{t.name, t.first, t.last + 1, t.block_bytes, t.num_blocks, dtype_bytes(t.dtype)});
    }
    auto placed = place_blocks(items, result.offsets, requests, deadline_);
    if (!placed) return scope_error(scope, placed.error().message());
    for (size_t j = 0; j < split_members.size(); ++j) out.blocks[split_members[j]] = std::move(placed->offsets[j]);
    out.height = placed->height;
    out.fits = !room || out.height <= *room;
    std::vector<PackItem> all;
    for (size_t i : members) all.push_back(item_of(tensors_[i], scope));
    out.proven_optimal = out.height == peak_live_bytes(lifetimes_of(all));
    return out;
  }

  void record(const ScopeDesc& scope, const std::vector<size_t>& members, const Arrangement& result, uint64_t spilled,
              uint64_t spilled_bytes, double seconds) {
    std::vector<PackItem> items;
    std::set<std::string> names;
    ScopeReport r;
    for (size_t k = 0; k < members.size(); ++k) {
      PlannedTensor& t = tensors_[members[k]];
      items.push_back(item_of(t, scope));
      t.offset = result.offsets[k];
      t.block_offsets = result.blocks[k];
      names.insert(t.name);
      if (t.part == Part::kBlocks) {
        r.discontiguous += 1;
        r.blocks += t.num_blocks;
      }
    }
    r.function = f_.name;
    r.scope = tensors_[members[0]].scope_name;
    r.tensors = names.size();
    r.lower_bound = peak_live_bytes(lifetimes_of(items));
    r.naive_bytes = naive_total(items);
    r.reuse_only_bytes = reuse_only_total(items);
    r.spilled = spilled;
    r.spilled_bytes = spilled_bytes;
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

  Status emit() {
    std::vector<Binding> out;
    for (const auto& s : storages_) {
      if (!s.name.empty()) out.push_back(alloc_storage(s.name, s.nbytes, s.scope));
    }
    for (const auto& image : images_) out.push_back(alloc_image(image.name, image.extent, image.dtype, image.scope_name));
    const bool naive = options_.strategy == PlanStrategy::kNaive;
    // Kills due after each binding.
    std::map<int64_t, std::vector<std::string>> kills;
    for (const auto& t : tensors_) {
      if (t.returned) continue;
      if (!t.user_killed && t.part != Part::kTables) kills[t.last].push_back(t.name);  // one kill for both parts
      // A storage of its own (the naive reference) ends with its tensor.
      if (naive && !t.image) kills[t.last].push_back(t.storage);
    }
    std::map<size_t, std::vector<const PlannedTensor*>> planned;  // binding -> its parts
    for (const auto& t : tensors_) planned[t.binding].push_back(&t);
    for (size_t i = 0; i < f_.bindings.size(); ++i) {
      Binding b = f_.bindings[i];
      if (auto it = planned.find(i); it != planned.end() && b.op == Op::kEmptyDiscontiguous) {
        auto status = emit_discontiguous(b, *it->second[0], *it->second[1], out);
        if (!status) return status;
      } else if (it != planned.end()) {
        const PlannedTensor& t = *it->second[0];
        uint64_t alignment = std::max<uint64_t>(t.scope->alignment, 1);
        std::string storage = t.storage;
        if (t.returned && t.image) {
          storage = fresh_name("result");
          out.push_back(alloc_image(storage, *t.image, t.dtype, t.scope_name));
        } else if (t.returned || (naive && !t.image)) {
          storage = t.returned ? fresh_name("result") : t.storage;
          auto bytes = storage_bytes(t.nbytes, alignment);
          if (!bytes)
            return plan_error(f_, b, fmt::format("its {} bytes are more than one storage can hold", t.nbytes));
          out.push_back(alloc_storage(storage, *bytes, t.scope_name));
        }
        Binding a;
        a.result = b.result;
        a.op = Op::kAllocTensor;
        a.vars = {storage};
        a.offset = static_cast<int64_t>(t.returned || (naive && !t.image) ? 0 : t.offset);
        if (t.image && !t.returned) a.image_offset = t.image_offset;
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
    return {};
  }

  // `alloc_discontiguous_tensor` for an `empty_discontiguous`: tables at the
  // offset of their item plus the sizes of the tables before them.
  Status emit_discontiguous(const Binding& b, const PlannedTensor& blocks, const PlannedTensor& tables,
                            std::vector<Binding>& out) {
    const uint64_t entry = target_.table_entry_bytes;
    if (options_.strategy == PlanStrategy::kNaive) {
      for (const PlannedTensor* part : {&tables, &blocks}) {
        uint64_t alignment = std::max<uint64_t>(part->scope->alignment, 1);
        auto bytes = storage_bytes(part->nbytes, alignment);
        if (!bytes)
          return plan_error(f_, b, fmt::format("its {} bytes are more than one storage can hold", part->nbytes));
        out.push_back(alloc_storage(part->storage, *bytes, part->scope_name));
      }
    }
    const uint64_t max_entry = entry >= 8 ? UINT64_MAX : (uint64_t{1} << (8 * entry)) - 1;
    auto fits_entry = [&](uint64_t offset) -> Status {
      if (offset <= max_entry && offset <= uint64_t(INT64_MAX)) return {};
      return plan_error(f_, b, fmt::format("a table or block would be at offset {}, which does not fit a {}-byte "
                                           "table entry", offset, entry));
    };
    DiscontiguousGeometry geometry = *discontiguous_geometry(b.shape, b.dtype);  // checked in collect()
    Binding a;
    a.result = b.result;
    a.op = Op::kAllocDiscontiguousTensor;
    a.vars = {tables.storage, blocks.storage};
    uint64_t offset = tables.offset;
    for (uint64_t t = 0; t < geometry.num_tables; ++t) {
      if (auto status = fits_entry(offset); !status) return status;
      a.table_offsets.push_back(static_cast<int64_t>(offset));
      offset += geometry.entries_of(b.shape, t) * entry;  // within the item: no overflow
    }
    for (uint64_t block : blocks.block_offsets) {
      if (auto status = fits_entry(block); !status) return status;
      a.data_offsets.push_back(static_cast<int64_t>(block));
    }
    a.shape = b.shape;
    a.dtype = b.dtype;
    a.loc = b.loc;
    out.push_back(std::move(a));
    return {};
  }

  struct StorageToEmit {
    std::string name;
    std::string scope;
    uint64_t nbytes;
  };

  const Module& module_;
  Function& f_;
  const TargetDesc& target_;
  const PlanOptions& options_;
  const Clock::time_point deadline_;
  MemoryReport& report_;
  std::vector<PlannedTensor> tensors_;
  std::vector<StorageToEmit> storages_;
  std::vector<TextureStorage> images_;
  std::set<std::string> discontiguous_;  // names of discontiguous tensors (they fill three kernel parameters)
  std::vector<std::pair<size_t, size_t>> apart_;  // texture tensors one launch reads and writes through images
  std::set<std::string> names_;
  std::map<const ScopeDesc*, uint64_t> reserved_;  // capacity taken by other storages at the fullest moment
  uint64_t blocks_ = 0;  // of the discontiguous tensors collected so far
};

}  // namespace

bool has_tensor_level_bindings(const Module& module) {
  for (const auto& f : module.functions) {
    for (const auto& b : f.bindings) {
      if (b.op == Op::kEmpty || b.op == Op::kEmptyDiscontiguous) return true;
    }
  }
  return false;
}

Expected<MemoryReport> plan_memory(Module& module, const TargetDesc& target, const PlanOptions& options) {
  const auto limit = std::chrono::duration<double>(std::clamp(options.time_limit_seconds, 0.0, 1e9));
  const Clock::time_point deadline = Clock::now() + std::chrono::duration_cast<Clock::duration>(limit);
  MemoryReport report;
  std::set<std::string> constants;  // names the planner's storages must not take
  for (const auto& c : module.constants) constants.insert(c.name);
  for (auto& f : module.functions) {
    if (auto status = FunctionPlanner(module, f, target, options, deadline, report, constants).run(); !status) {
      return status.error();
    }
  }
  return report;
}

}  // namespace stowage::ir
