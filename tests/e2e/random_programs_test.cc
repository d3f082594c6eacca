// Random valid programs (seeded), each written twice: at tensor level (`empty`,
// `empty_discontiguous`, placed by the planner) and at storage level (placed by
// this generator: byte offsets in shared arenas, blocks scattered through free
// space, tables, textures reused over time, kill_object after each last use).
// Both forms must compile, verify, pass the loader and give, on the default
// device, exactly the result the host computes.
//
// Every tensor has the program's shape [H, W, 4] float32 and one of five kinds:
// a buffer in `global` or `global.vtcm`, a discontiguous tensor (blocks of 4
// elements) in either, or a texture in each of the three texture layouts.
// Kernels add two tensors or a tensor and a constant, one work item per group of
// four elements; the kernel library holds one kernel per combination of kinds.
// Values are small integers, so float32 arithmetic is exact.
//
// STOWAGE_RANDOM_PROGRAMS overrides the number of programs (default 200).
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <map>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "stowage/bytecode/file.h"
#include "stowage/ir/compiler.h"
#include "stowage/vm/vm.h"

namespace stowage {
namespace {

enum class Kind { kBuffer, kDiscontiguous, kTextureActivation, kTextureNhwc, kTextureWeight };
constexpr Kind kKinds[] = {Kind::kBuffer, Kind::kDiscontiguous, Kind::kTextureActivation, Kind::kTextureNhwc,
                           Kind::kTextureWeight};

const char* kind_name(Kind k) {
  switch (k) {
    case Kind::kBuffer: return "buf";
    case Kind::kDiscontiguous: return "disc";
    case Kind::kTextureActivation: return "act";
    case Kind::kTextureNhwc: return "nhwc";
    case Kind::kTextureWeight: return "weight";
  }
  return "?";
}

bool is_texture(Kind k) { return k != Kind::kBuffer && k != Kind::kDiscontiguous; }

const char* texture_scope(Kind k) {
  switch (k) {
    case Kind::kTextureActivation: return "global.texture";
    case Kind::kTextureNhwc: return "global.texture-nhwc";
    default: return "global.texture-weight";
  }
}

// ---------------------------------------------------------------------------
// The kernel library: add_A_B_C (c = a + b) and addk_A_C (c = a + k) for every
// kind of each argument. `W` is the tensor's second extent.
// ---------------------------------------------------------------------------

std::string param(Kind k, const char* name, bool output) {
  switch (k) {
    case Kind::kBuffer: return fmt::format("__global {}float* {}", output ? "" : "const ", name);
    case Kind::kDiscontiguous:
      return fmt::format("STOWAGE_DISCONTIGUOUS{}(float, {})", output ? "" : "_CONST", name);
    default: return fmt::format("{} image2d_t {}", output ? "write_only" : "read_only", name);
  }
}

// The pixel of element group g = h * W + w in each texture layout, for a shape
// [H, W, 4] (read as [1, 1, H, W, 4]): activation puts it at (w, h); weight and
// nhwc flatten H and W into the width.
std::string pixel(Kind k) { return k == Kind::kTextureActivation ? "(int2)(w, h)" : "(int2)(h * W + w, 0)"; }

std::string load(Kind k, const char* name) {
  switch (k) {
    case Kind::kBuffer: return fmt::format("vload4(g, {})", name);
    case Kind::kDiscontiguous:
      return fmt::format("(float4)(*STOWAGE_AT3(float, {0}, h, w, 0), *STOWAGE_AT3(float, {0}, h, w, 1), "
                         "*STOWAGE_AT3(float, {0}, h, w, 2), *STOWAGE_AT3(float, {0}, h, w, 3))",
                         name);
    default: return fmt::format("read_imagef({}, kSampler, {})", name, pixel(k));
  }
}

std::string store(Kind k, const char* name) {
  switch (k) {
    case Kind::kBuffer: return fmt::format("vstore4(v, g, {});", name);
    case Kind::kDiscontiguous:
      return fmt::format("*STOWAGE_AT3(float, {0}, h, w, 0) = v.x; *STOWAGE_AT3(float, {0}, h, w, 1) = v.y; "
                         "*STOWAGE_AT3(float, {0}, h, w, 2) = v.z; *STOWAGE_AT3(float, {0}, h, w, 3) = v.w;",
                         name);
    default: return fmt::format("write_imagef({}, {}, v);", name, pixel(k));
  }
}

constexpr const char* kIndex = "  size_t g = get_global_id(0);\n  int h = (int)(g / W), w = (int)(g % W);\n";

std::string kernel_library() {
  std::string out =
      "#include <stowage/discontiguous.cl.h>\n\n"
      "__constant sampler_t kSampler = CLK_NORMALIZED_COORDS_FALSE | CLK_ADDRESS_NONE | CLK_FILTER_NEAREST;\n\n";
  for (Kind a : kKinds) {
    for (Kind c : kKinds) {
      out += fmt::format("__kernel void addk_{}_{}({}, {}, float k, int W) {{\n{}  float4 v = {} + k;\n  {}\n}}\n",
                         kind_name(a), kind_name(c), param(a, "a", false), param(c, "c", true), kIndex, load(a, "a"),
                         store(c, "c"));
      for (Kind b : kKinds) {
        out += fmt::format("__kernel void add_{}_{}_{}({}, {}, {}, int W) {{\n{}  float4 v = {} + {};\n  {}\n}}\n",
                           kind_name(a), kind_name(b), kind_name(c), param(a, "a", false), param(b, "b", false),
                           param(c, "c", true), kIndex, load(a, "a"), load(b, "b"), store(c, "c"));
      }
    }
  }
  return out;
}

// ---------------------------------------------------------------------------
// A program: a sequence of steps over tensors t0, t1, ...
// ---------------------------------------------------------------------------

struct TensorSpec {
  Kind kind = Kind::kBuffer;
  bool onchip = false;  // buffers and discontiguous tensors: global.vtcm, else global
  int defined_at = 0;   // the step that writes it
  int last_use = 0;     // the last step that reads it
};

struct Step {
  enum class Op { kCopyIn, kCopy, kAdd, kAddConst } op = Op::kCopyIn;
  int out = 0;
  int a = -1;  // -1: the parameter x
  int b = -1;
  int k = 0;
};

struct Program {
  int h = 1, w = 1;
  std::vector<TensorSpec> tensors;
  std::vector<Step> steps;
  int result = 0;  // the tensor copied into the returned one
  size_t elements() const { return static_cast<size_t>(h) * w * 4; }
};

Program generate(std::mt19937_64& rng) {
  auto below = [&](int n) { return static_cast<int>(rng() % static_cast<uint64_t>(n)); };
  Program p;
  p.h = 1 + below(8);
  p.w = 1 + below(8);
  auto new_tensor = [&](int step) {
    TensorSpec t;
    t.kind = kKinds[below(5)];
    t.onchip = below(2) == 0;
    t.defined_at = step;
    t.last_use = step;
    p.tensors.push_back(t);
    return static_cast<int>(p.tensors.size() - 1);
  };
  // Inputs come mostly from the last few tensors, so lifetimes end at varied times.
  auto pick = [&](int step) {
    int n = static_cast<int>(p.tensors.size());
    int t = std::max(0, n - 1 - below(std::min(n, 4)));
    p.tensors[t].last_use = step;
    return t;
  };
  int steps = 3 + below(8);
  p.steps.push_back({Step::Op::kCopyIn, new_tensor(0)});
  for (int s = 1; s < steps; ++s) {
    Step step;
    int choice = below(10);
    step.op = choice < 3 ? Step::Op::kCopy : choice < 7 ? Step::Op::kAdd : Step::Op::kAddConst;
    step.a = pick(s);
    if (step.op == Step::Op::kAdd) step.b = pick(s);
    step.k = below(7) - 3;
    step.out = new_tensor(s);
    // copy_tensor does not copy between blocks and images (docs/discontiguous.md).
    Kind from = p.tensors[step.a].kind;
    Kind& to = p.tensors[step.out].kind;
    // Nor between images of different extents (pixel for pixel).
    auto extent = [&](Kind k) {
      return k == Kind::kTextureActivation ? std::pair(p.h, p.w) : std::pair(1, p.h * p.w);
    };
    if (step.op == Step::Op::kCopy && ((from == Kind::kDiscontiguous && is_texture(to)) ||
                                       (is_texture(from) && to == Kind::kDiscontiguous) ||
                                       (is_texture(from) && is_texture(to) && extent(from) != extent(to)))) {
      to = Kind::kBuffer;
    }
    p.steps.push_back(step);
  }
  p.result = p.steps.back().out;
  p.tensors[p.result].last_use = steps;  // read by the final copy
  return p;
}

std::vector<float> host_result(const Program& p, const std::vector<float>& x) {
  std::vector<std::vector<float>> values(p.tensors.size());
  for (const Step& s : p.steps) {
    const std::vector<float>& a = s.a < 0 ? x : values[s.a];
    std::vector<float> out(p.elements());
    for (size_t i = 0; i < out.size(); ++i) {
      switch (s.op) {
        case Step::Op::kCopyIn: out[i] = x[i]; break;
        case Step::Op::kCopy: out[i] = a[i]; break;
        case Step::Op::kAdd: out[i] = a[i] + values[s.b][i]; break;
        case Step::Op::kAddConst: out[i] = a[i] + static_cast<float>(s.k); break;
      }
    }
    values[s.out] = std::move(out);
  }
  return values[p.result];
}

// ---------------------------------------------------------------------------
// The two texts
// ---------------------------------------------------------------------------

std::string shape_text(const Program& p) { return fmt::format("[{}, {}, 4]", p.h, p.w); }
std::string name(int t) { return fmt::format("t{}", t); }

// The statement of step `s` once its output exists.
std::string operation(const Program& p, const Step& s) {
  std::string a = s.a < 0 ? "x" : name(s.a);
  const TensorSpec& out = p.tensors[s.out];
  int groups = p.h * p.w;
  switch (s.op) {
    case Step::Op::kCopyIn:
    case Step::Op::kCopy: return fmt::format("  copy_tensor({}, {})\n", a, name(s.out));
    case Step::Op::kAdd:
      return fmt::format("  call_kernel(add_{}_{}_{}, [{}, {}, {}, {}], grid=[{}], local=[1])\n",
                         kind_name(p.tensors[s.a].kind), kind_name(p.tensors[s.b].kind), kind_name(out.kind), a,
                         name(s.b), name(s.out), p.w, groups);
    case Step::Op::kAddConst:
      return fmt::format("  call_kernel(addk_{}_{}, [{}, {}, {}.0, {}], grid=[{}], local=[1])\n",
                         kind_name(p.tensors[s.a].kind),
                         kind_name(out.kind), a, name(s.out), s.k, p.w, groups);
  }
  return "";
}

std::string header(const Program& p, const std::string& library) {
  return fmt::format("kernels lib \"\"\"\n{}\"\"\"\n\nfn main(x: Tensor[({}, {}, 4), float32]) -> Tensor[({}, {}, 4), "
                     "float32] {{\n",
                     library, p.h, p.w, p.h, p.w);
}

std::string footer(const Program& p, const std::string& result_alloc) {
  return fmt::format("{}  copy_tensor({}, result)\n  return result\n}}\n", result_alloc, name(p.result));
}

std::string planned_text(const Program& p, const std::string& library) {
  std::string body = header(p, library);
  for (const Step& s : p.steps) {
    const TensorSpec& t = p.tensors[s.out];
    const char* scope = t.onchip ? "global.vtcm" : "global";
    if (t.kind == Kind::kBuffer) {
      body += fmt::format("  {} = empty({}, float32, scope=\"{}\")\n", name(s.out), shape_text(p), scope);
    } else if (t.kind == Kind::kDiscontiguous) {
      body += fmt::format("  {} = empty_discontiguous({}, float32, scope=\"{}\", table_scope=\"global\")\n",
                          name(s.out), shape_text(p), scope);
    } else {
      body += fmt::format("  {} = empty({}, float32, scope=\"{}\")\n", name(s.out), shape_text(p),
                          texture_scope(t.kind));
    }
    body += operation(p, s);
  }
  return body + footer(p, fmt::format("  result = empty({}, float32, scope=\"global\")\n", shape_text(p)));
}

// First-fit placement in one arena over time: ranges are taken and released.
class Arena {
 public:
  uint64_t take(uint64_t size, uint64_t align, int owner) {
    uint64_t at = 0;
    for (bool moved = true; moved;) {
      moved = false;
      for (const Range& r : ranges_) {
        if (at < r.end && r.start < at + size) {
          at = (r.end + align - 1) / align * align;
          moved = true;
        }
      }
    }
    ranges_.push_back({at, at + size, owner});
    size_ = std::max(size_, at + size);
    return at;
  }
  void release(int owner) {
    std::erase_if(ranges_, [&](const Range& r) { return r.owner == owner; });
  }
  uint64_t size() const { return (size_ + 127) / 128 * 128; }

 private:
  struct Range {
    uint64_t start, end;
    int owner;
  };
  std::vector<Range> ranges_;
  uint64_t size_ = 0;
};

std::string placed_text(const Program& p, const std::string& library, std::mt19937_64& rng) {
  const uint64_t tensor_bytes = p.elements() * 4;
  Arena global, vtcm;
  std::map<Kind, std::vector<int>> free_images;  // texture storages not in use, by kind
  std::map<Kind, int> images;                    // texture storages made, by kind
  std::vector<int> image_of(p.tensors.size(), -1);
  std::string steps;
  auto release_dead = [&](int step) {
    for (int t = 0; t < static_cast<int>(p.tensors.size()); ++t) {
      if (p.tensors[t].last_use != step || t == p.result) continue;
      steps += fmt::format("  kill_object({})\n", name(t));
      global.release(t);
      vtcm.release(t);
      if (is_texture(p.tensors[t].kind)) free_images[p.tensors[t].kind].push_back(image_of[t]);
    }
  };
  for (size_t i = 0; i < p.steps.size(); ++i) {
    const Step& s = p.steps[i];
    const TensorSpec& t = p.tensors[s.out];
    Arena& arena = t.onchip ? vtcm : global;
    const char* arena_name = t.onchip ? "vtcm" : "arena";
    if (t.kind == Kind::kBuffer) {
      uint64_t offset = arena.take(tensor_bytes, 128, s.out);
      steps += fmt::format("  {} = alloc_tensor({}, {}, {}, float32)\n", name(s.out), arena_name, offset,
                           shape_text(p));
    } else if (t.kind == Kind::kDiscontiguous) {
      // Tables: the root, then one per row; blocks of 16 bytes in a shuffled order.
      std::vector<uint64_t> tables;
      tables.push_back(global.take(4 * p.h, 4, s.out));
      for (int r = 0; r < p.h; ++r) tables.push_back(global.take(4 * p.w, 4, s.out));
      std::vector<int> order(p.h * p.w);
      for (size_t b = 0; b < order.size(); ++b) order[b] = static_cast<int>(b);
      std::shuffle(order.begin(), order.end(), rng);
      std::vector<uint64_t> blocks(order.size());
      for (int b : order) blocks[b] = arena.take(16, 16, s.out);
      steps += fmt::format("  {} = alloc_discontiguous_tensor(arena, [{}], {}, [{}], {}, float32)\n", name(s.out),
                           fmt::join(tables, ", "), arena_name, fmt::join(blocks, ", "), shape_text(p));
    } else {
      std::vector<int>& pool = free_images[t.kind];
      int image = 0;
      if (pool.empty()) {
        image = images[t.kind]++;
      } else {
        image = pool.back();
        pool.pop_back();
      }
      image_of[s.out] = image;
      steps += fmt::format("  {} = alloc_tensor(tex_{}_{}, 0, {}, float32)\n", name(s.out), image, kind_name(t.kind),
                           shape_text(p));
    }
    steps += operation(p, s);
    release_dead(static_cast<int>(i));
  }
  std::string body = header(p, library);
  body += fmt::format("  arena = alloc_storage([{}], device=0, dtype=uint8, scope=\"global\")\n",
                      std::max<uint64_t>(global.size(), 128));
  body += fmt::format("  vtcm = alloc_storage([{}], device=0, dtype=uint8, scope=\"global.vtcm\")\n",
                      std::max<uint64_t>(vtcm.size(), 128));
  for (const auto& [kind, count] : images) {
    bool activation = kind == Kind::kTextureActivation;
    int height = activation ? p.h : 1, width = activation ? p.w : p.h * p.w;
    for (int i = 0; i < count; ++i) {
      body += fmt::format("  tex_{}_{} = alloc_storage([{}, {}], device=0, dtype=float32, scope=\"{}\")\n", i,
                          kind_name(kind), height, width, texture_scope(kind));
    }
  }
  body += steps;
  return body + footer(p, fmt::format("  out = alloc_storage([{}], device=0, dtype=uint8, scope=\"global\")\n"
                                      "  result = alloc_tensor(out, 0, {}, float32)\n",
                                      tensor_bytes, shape_text(p)));
}

// ---------------------------------------------------------------------------
// Compile, load, run
// ---------------------------------------------------------------------------

const TargetDesc& target() {
  static const TargetDesc t = TargetDesc::load("opencl").value_or_throw();
  return t;
}

// The result of `text` on input `x`, or a description of what went wrong.
std::optional<std::vector<float>> run(const std::string& text, const std::vector<float>& x, const Program& p,
                                      std::string& problem) {
  Expected<ir::CompileResult> compiled = ir::compile_text(text, "random.stir", target());
  if (!compiled) {
    problem = "compile: " + compiled.error().message();
    return std::nullopt;
  }
  Expected<Executable> loaded = read_bytecode(write_bytecode(compiled->executable));
  if (!loaded) {
    problem = "load: " + loaded.error().message();
    return std::nullopt;
  }
  try {
    auto vm = vm::VirtualMachine::create(std::make_shared<const Executable>(loaded.take())).value_or_throw();
    vm::Value out = vm->invoke(
        "main", {vm::Value::from(vm::host_tensor({p.h, p.w, 4}, DType::kFloat32, std::as_bytes(std::span(x))))});
    return out.as_tensor().to_vector<float>();
  } catch (const StowageError& e) {
    problem = std::string("run: ") + e.what();
    return std::nullopt;
  }
}

int program_count() {
  const char* env = std::getenv("STOWAGE_RANDOM_PROGRAMS");
  return env != nullptr ? std::atoi(env) : 200;
}

TEST(RandomPrograms, PlannedAndHandPlacedFormsAgreeWithTheHost) {
  const std::string library = kernel_library();
  std::mt19937_64 rng(20250116);
  const int n = program_count();
  std::map<Kind, int> kinds_seen;
  for (int i = 0; i < n; ++i) {
    Program p = generate(rng);
    for (const TensorSpec& t : p.tensors) ++kinds_seen[t.kind];
    std::vector<float> x(p.elements());
    for (float& v : x) v = static_cast<float>(static_cast<int>(rng() % 17) - 8);
    std::vector<float> expected = host_result(p, x);
    std::string planned = planned_text(p, library);
    std::string placed = placed_text(p, library, rng);
    for (const auto& [form, text] : {std::pair{"planned", &planned}, std::pair{"hand-placed", &placed}}) {
      std::string problem;
      std::optional<std::vector<float>> got = run(*text, x, p, problem);
      // The library is the first part of each text: show the program after it.
      std::string program = text->substr(text->find("fn main"));
      ASSERT_TRUE(got) << "program " << i << " (" << form << "): " << problem << "\n" << program;
      ASSERT_EQ(*got, expected) << "program " << i << " (" << form << ")\n" << program;
    }
  }
  for (Kind k : kKinds) EXPECT_GT(kinds_seen[k], n / 10) << kind_name(k);
}

}  // namespace
}  // namespace stowage
