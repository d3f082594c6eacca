// Texture scopes of the planning pass (plan_textures.h); plan_memory.cc says
// what the pass guarantees.
#include "plan_textures.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <set>

#include "stowage/ir/lifetimes.h"
#include "stowage/ir/packing_rectangles.h"

namespace stowage::ir {
namespace {

using Clock = std::chrono::steady_clock;

uint64_t pixels(ImageExtent e) { return e.height * e.width; }  // both at most 2^31

// Bytes of RGBA pixels (saturating: the totals of a report, never sizes to allocate).
uint64_t pixel_bytes(uint64_t count, DType dtype) {
  return checked_mul(count, 4 * dtype_bytes(dtype)).value_or(UINT64_MAX);
}

uint64_t add(uint64_t a, uint64_t b) { return checked_add(a, b).value_or(UINT64_MAX); }

// Whole images reused over time, each holding one tensor at its origin at a
// time: tensors in order of allocation take a free image (its tensor died), the
// smallest that already fits, else the one whose growth to fit adds the least
// area, else a new one. `naive`: a new image each.
struct Pool {
  struct Image {
    ImageExtent extent;
    int64_t busy_until = -1;  // the last use of the tensor it holds now
    std::vector<size_t> members;
  };
  std::vector<Image> images;

  Pool(const std::vector<TextureTensor>& tensors, const std::vector<size_t>& members, bool naive) {
    for (size_t i : members) {
      const TextureTensor& t = tensors[i];
      Image* best = nullptr;
      uint64_t best_cost = UINT64_MAX;
      bool best_fits = false;
      for (Image& image : images) {
        if (naive) break;
        if (image.busy_until >= t.first) continue;
        bool fits = image.extent.height >= t.extent.height && image.extent.width >= t.extent.width;
        uint64_t area = pixels(image.extent);
        uint64_t grown = std::max(image.extent.height, t.extent.height) * std::max(image.extent.width, t.extent.width);
        uint64_t cost = fits ? area : grown - area;
        if ((fits && !best_fits) || (fits == best_fits && cost < best_cost)) {
          best = &image;
          best_cost = cost;
          best_fits = fits;
        }
      }
      if (best == nullptr) best = &images.emplace_back();
      best->extent.height = std::max(best->extent.height, t.extent.height);
      best->extent.width = std::max(best->extent.width, t.extent.width);
      best->busy_until = t.last;
      best->members.push_back(i);
    }
  }
};

ImageExtent at_least_one_pixel(ImageExtent e) {
  return ImageExtent{std::max<uint64_t>(e.height, 1), std::max<uint64_t>(e.width, 1)};
}

}  // namespace

Expected<TexturePlan> plan_textures(const std::string& function, const std::vector<TextureTensor>& tensors,
                                    const std::vector<std::pair<size_t, size_t>>& apart, const TargetDesc& target,
                                    bool naive, const std::function<std::string(const std::string&)>& fresh_name) {
  TexturePlan plan;
  plan.storage.assign(tensors.size(), 0);
  plan.offset.assign(tensors.size(), ImageOffset{});
  RectOptions options;
  options.max_width = std::min<uint64_t>(target.max_image_width, uint64_t{1} << 31);
  options.max_height = std::min<uint64_t>(target.max_image_height, uint64_t{1} << 31);
  for (const TextureTensor& t : tensors) {
    if (t.extent.width > options.max_width || t.extent.height > options.max_height) {
      return Error(ErrorKind::kVerify,
                   fmt::format("error: planning function '{}', tensor '{}': it needs an image of {} x {} pixels "
                               "(height x width), more than the target's largest ({} x {})",
                               function, t.name, t.extent.height, t.extent.width, options.max_height,
                               options.max_width));
    }
  }
  // One placement per scope and pixel type; reports per scope as requested.
  std::map<std::pair<std::string, DType>, std::vector<size_t>> groups;
  std::map<std::string, std::vector<size_t>> by_scope;
  for (size_t i = 0; i < tensors.size(); ++i) {
    groups[{tensors[i].scope->name, tensors[i].dtype}].push_back(i);
    by_scope[tensors[i].scope_name].push_back(i);
  }
  std::map<std::string, ScopeReport> reports;
  auto add_storage = [&](const std::string& stem, size_t first_member, ImageExtent extent) {
    const TextureTensor& t = tensors[first_member];
    plan.storages.push_back(TextureStorage{fresh_name(stem), t.scope_name, t.dtype, at_least_one_pixel(extent)});
    return plan.storages.size() - 1;
  };
  for (const auto& [key, members] : groups) {
    const auto start = Clock::now();
    std::vector<size_t> free, fixed;
    for (size_t i : members) (naive || tensors[i].at_origin ? fixed : free).push_back(i);
    // Tensors read from the image's origin keep whole images, pooled as before.
    for (const Pool::Image& image : Pool(tensors, fixed, naive).images) {
      const size_t s = add_storage("image", image.members.front(), image.extent);
      for (size_t i : image.members) plan.storage[i] = s;
    }
    if (!free.empty()) {
      std::vector<RectItem> items;
      std::map<size_t, uint32_t> local;
      for (size_t i : free) {
        local[i] = static_cast<uint32_t>(items.size());
        const TextureTensor& t = tensors[i];
        items.push_back(RectItem{t.name, t.first, t.last + 1, t.extent.width, t.extent.height});
      }
      std::vector<RectApart> pairs;
      for (const auto& [a, b] : apart) {
        auto ia = local.find(a), ib = local.find(b);
        if (ia != local.end() && ib != local.end() && a != b) pairs.push_back(RectApart{ia->second, ib->second});
      }
      auto packed = pack_rectangles(items, pairs, options);
      if (!packed) {
        return Error(ErrorKind::kVerify, fmt::format("error: planning function '{}', scope '{}': {}", function,
                                                     key.first, packed.error().message()));
      }
      std::vector<size_t> atlas_storage;
      for (size_t k = 0; k < packed->atlases.size(); ++k) {
        size_t first = 0;
        for (size_t j = 0; j < items.size(); ++j) {
          if (packed->placements[j].atlas == k) {
            first = free[j];
            break;
          }
        }
        atlas_storage.push_back(add_storage("atlas", first, packed->atlases[k]));
      }
      for (size_t j = 0; j < items.size(); ++j) {
        const RectPlacement& p = packed->placements[j];
        plan.storage[free[j]] = atlas_storage[p.atlas];
        plan.offset[free[j]] = ImageOffset{p.x, p.y};
      }
    }
    const std::chrono::duration<double> took = Clock::now() - start;
    reports[tensors[members.front()].scope_name].seconds += took.count();
  }
  // Image scopes count pixel bytes throughout: the storages, what each tensor's
  // own image would take, whole images reused without offsets (reuse-only), and
  // as the lower bound the most pixel bytes alive at one moment.
  for (const auto& [name, members] : by_scope) {
    ScopeReport& r = reports[name];
    r.function = function;
    r.scope = name;
    r.tensors = members.size();
    std::vector<Lifetime> lifetimes;
    std::map<DType, std::vector<size_t>> by_dtype;
    for (size_t i : members) {
      const TextureTensor& t = tensors[i];
      const uint64_t bytes = pixel_bytes(pixels(t.extent), t.dtype);
      r.naive_pixels = add(r.naive_pixels, pixels(t.extent));
      r.naive_bytes = add(r.naive_bytes, bytes);
      lifetimes.push_back({t.first, t.last + 1, bytes});
      by_dtype[t.dtype].push_back(i);
    }
    r.lower_bound = peak_live_bytes(lifetimes);
    for (const auto& [dtype, same] : by_dtype) {
      for (const Pool::Image& image : Pool(tensors, same, false).images) {
        r.reuse_only_bytes = add(r.reuse_only_bytes, pixel_bytes(pixels(image.extent), dtype));
      }
    }
  }
  std::set<size_t> counted;
  for (size_t i = 0; i < tensors.size(); ++i) {
    if (!counted.insert(plan.storage[i]).second) continue;
    const TextureStorage& s = plan.storages[plan.storage[i]];
    ScopeReport& r = reports[s.scope_name];
    r.images += 1;
    r.planned_pixels = add(r.planned_pixels, pixels(s.extent));
    r.planned_bytes = add(r.planned_bytes, pixel_bytes(pixels(s.extent), s.dtype));
  }
  for (auto& [name, r] : reports) {
    r.proven_optimal = r.planned_bytes == r.lower_bound;
    plan.reports.push_back(r);
  }
  return plan;
}

}  // namespace stowage::ir
