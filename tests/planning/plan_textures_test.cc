// The planning pass in texture scopes: tensors at 2D offsets in shared image
// storages (atlases). Each planned function passes the verifier and is checked
// here independently of it too: no two tensors alive together share a pixel of
// one image, no launch reads and writes one image, tensors bound to image
// parameters without an offset parameter sit at the origin, every rectangle
// lies inside its image. One planned program runs on the default device.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <map>
#include <set>

#include "stowage/ir/compiler.h"
#include "stowage/ir/kernel_reader.h"
#include "stowage/ir/parser.h"
#include "stowage/ir/planner.h"
#include "stowage/ir/printer.h"
#include "stowage/ir/verifier.h"
#include "stowage/vm/vm.h"

namespace stowage::ir {
namespace {

constexpr const char* kKernels = R"(kernels tex """
#include <stowage/image_offset.cl.h>
__constant sampler_t kPixel = CLK_NORMALIZED_COORDS_FALSE | CLK_ADDRESS_NONE | CLK_FILTER_NEAREST;
__kernel void add_one(read_only image2d_t in, stowage_image_offset in_at,
                      write_only image2d_t out, stowage_image_offset out_at) {
  int2 p = (int2)(get_global_id(0), get_global_id(1));
  write_imagef(out, p + out_at, read_imagef(in, kPixel, p + in_at) + 1.0f);
}
__kernel void add(read_only image2d_t a, stowage_image_offset a_at, read_only image2d_t b,
                  stowage_image_offset b_at, write_only image2d_t out, stowage_image_offset out_at) {
  int2 p = (int2)(get_global_id(0), get_global_id(1));
  write_imagef(out, p + out_at, read_imagef(a, kPixel, p + a_at) + read_imagef(b, kPixel, p + b_at));
}
__kernel void at_origin(read_only image2d_t in, write_only image2d_t out, stowage_image_offset out_at) {
  int2 p = (int2)(get_global_id(0), get_global_id(1));
  write_imagef(out, p + out_at, read_imagef(in, kPixel, p));
}
"""

)";

TargetDesc opencl_target() { return TargetDesc::load("opencl").value_or_throw(); }

struct Planned {
  Module module;
  MemoryReport report;
};

Expected<Planned> plan(const std::string& body, const PlanOptions& options = {}) {
  auto module = parse_module(std::string(kKernels) + body, "t.stir");
  if (!module) return module.error();
  Planned out{module.take(), {}};
  TargetDesc target = opencl_target();
  if (Status s = read_module_kernels(out.module); !s) return s.error();
  if (Status s = verify_module(out.module, target); !s) return s.error();
  auto report = plan_memory(out.module, target, options);
  if (!report) return report.error();
  out.report = report.take();
  if (Status s = verify_module(out.module, target); !s) {
    return Error(ErrorKind::kVerify,
                 "planned: " + s.error().message() + "\n" + print_function(out.module.functions[0]));
  }
  return out;
}

struct Placed {
  std::string storage;
  ImageOffset at;
  ImageExtent extent;
  size_t born = 0;
  size_t dies = SIZE_MAX;  // its kill_object
};

// The rules above, over the planned function; "" when they hold.
std::string check_planned(const Module& module) {
  const Function& f = module.functions[0];
  TargetDesc target = opencl_target();
  std::map<std::string, ImageExtent> images;
  std::map<std::string, Placed> tensors;
  for (size_t i = 0; i < f.bindings.size(); ++i) {
    const Binding& b = f.bindings[i];
    if (b.op == Op::kAllocStorage && b.shape.size() == 2) {
      images[b.result] = ImageExtent{uint64_t(b.shape[0]), uint64_t(b.shape[1])};
    } else if (b.op == Op::kAllocTensor && images.count(b.vars[0])) {
      auto extent = image_extent(b.shape, target.find_scope("global.texture")->image_layout());
      const ImageExtent& image = images[b.vars[0]];
      if (b.image_offset.x + extent->width > image.width || b.image_offset.y + extent->height > image.height)
        return "tensor " + b.result + " lies outside its image";
      tensors[b.result] = Placed{b.vars[0], b.image_offset, *extent, i};
    } else if (b.op == Op::kKillObject && tensors.count(b.vars[0])) {
      tensors[b.vars[0]].dies = i;
    }
  }
  for (const auto& [a, p] : tensors) {
    for (const auto& [b, q] : tensors) {
      if (a >= b || p.storage != q.storage || p.dies <= q.born || q.dies <= p.born) continue;
      if (p.at.x < q.at.x + q.extent.width && q.at.x < p.at.x + p.extent.width &&
          p.at.y < q.at.y + q.extent.height && q.at.y < p.at.y + p.extent.height)
        return a + " and " + b + " overlap while alive";
    }
  }
  for (const Binding& b : f.bindings) {
    if (b.op != Op::kCallKernel) continue;
    const KernelSignature* kernel = module.find_kernel(b.callee);
    std::set<std::string> read, written;
    size_t param = 0;
    for (const Arg& a : b.args) {
      const KernelParam& p = kernel->params[param];
      const bool offset = has_image_offset(*kernel, param);
      if (p.is_image() && tensors.count(a.var)) {
        (p.writes() ? written : read).insert(tensors[a.var].storage);
        if (!offset && !(tensors[a.var].at == ImageOffset{})) return a.var + " is not at its image's origin";
      }
      param += offset ? 2 : 1;
    }
    for (const std::string& s : written) {
      if (read.count(s)) return b.callee + " reads and writes image " + s;
    }
  }
  return "";
}

// A residual block: y from x, z from y, w from z and x, v from w. Apart: x-y,
// y-z, z-w, x-w, w-v. Two atlases meet the lower bound: x and z (stacked), then
// v, in one; y, then w, in the other.
constexpr const char* kResidual = R"(fn main(input: Tensor[(8, 8, 4), float32]) -> Tensor[(8, 8, 4), float32] {
  x = empty([8, 8, 4], float32, scope="global.texture")
  copy_tensor(input, x)
  y = empty([8, 8, 4], float32, scope="global.texture")
  call_kernel(add_one, [x, y], grid=[8, 8])
  z = empty([4, 8, 4], float32, scope="global.texture")
  call_kernel(add_one, [y, z], grid=[8, 4])
  w = empty([8, 8, 4], float32, scope="global.texture")
  call_kernel(add, [z, x, w], grid=[8, 8])
  v = empty([8, 8, 4], float32, scope="global.texture")
  call_kernel(add_one, [w, v], grid=[8, 8])
  out = empty([8, 8, 4], float32, scope="global")
  copy_tensor(v, out)
  return out
}
)";

TEST(PlanTextures, TensorsShareAtlasesAtOffsetsWithoutALaunchReadingAndWritingOne) {
  auto planned = plan(kResidual);
  ASSERT_TRUE(planned) << planned.error().message();
  EXPECT_EQ(check_planned(planned->module), "");
  ASSERT_EQ(planned->report.scopes.size(), 1u);  // the result has a storage of its own
  const ScopeReport* r = &planned->report.scopes[0];
  EXPECT_EQ(r->scope, "global.texture");
  EXPECT_EQ(r->tensors, 5u);
  // The most alive at once: x, y, z or x, z, w (64 + 64 + 32 pixels of 16 bytes).
  EXPECT_EQ(r->lower_bound, 160u * 16);
  EXPECT_EQ(r->images, 2u);
  EXPECT_EQ(r->planned_pixels, 160u);
  EXPECT_EQ(r->planned_bytes, 160u * 16);
  EXPECT_TRUE(r->proven_optimal);
  EXPECT_EQ(r->naive_pixels, 4u * 64 + 32);
  EXPECT_EQ(r->naive_bytes, (4u * 64 + 32) * 16);
  EXPECT_GE(r->reuse_only_bytes, r->planned_bytes);
  std::map<std::string, Binding> placed;
  for (const Binding& b : planned->module.functions[0].bindings) {
    if (b.op == Op::kAllocTensor) placed[b.result] = b;
  }
  EXPECT_EQ(placed["x"].vars[0], placed["z"].vars[0]);
  EXPECT_EQ(placed["x"].vars[0], placed["v"].vars[0]);
  EXPECT_EQ(placed["y"].vars[0], placed["w"].vars[0]);
  EXPECT_EQ(placed["x"].vars[0].rfind("atlas", 0), 0u);
  EXPECT_NE(placed["z"].image_offset, ImageOffset{});  // beside or under x
  // The text form writes where: [y, x].
  const ImageOffset at = placed["z"].image_offset;
  const std::string text = print_function(planned->module.functions[0]);
  EXPECT_NE(text.find(fmt::format("z = alloc_tensor({}, [{}, {}], [4, 8, 4], float32)", placed["z"].vars[0], at.y,
                                  at.x)),
            std::string::npos)
      << text;
}

// The same block on the device: every tensor 8 x 6 pixels, so z shares x's
// atlas at an offset; out = ((x + 1) + 1 + x) + 1 = 2x + 3.
TEST(PlanTextures, APlannedBlockRunsOnTheDevice) {
  const std::string text = std::string(kKernels) + R"(fn main(input: Tensor[(8, 6, 4), float32]) -> Tensor[(8, 6, 4), float32] {
  x = empty([8, 6, 4], float32, scope="global.texture")
  copy_tensor(input, x)
  y = empty([8, 6, 4], float32, scope="global.texture")
  call_kernel(add_one, [x, y], grid=[6, 8])
  z = empty([8, 6, 4], float32, scope="global.texture")
  call_kernel(add_one, [y, z], grid=[6, 8])
  w = empty([8, 6, 4], float32, scope="global.texture")
  call_kernel(add, [z, x, w], grid=[6, 8])
  v = empty([8, 6, 4], float32, scope="global.texture")
  call_kernel(add_one, [w, v], grid=[6, 8])
  out = empty([8, 6, 4], float32, scope="global")
  copy_tensor(v, out)
  return out
}
)";
  auto compiled = compile_text(text, "block.stir", opencl_target());
  ASSERT_TRUE(compiled) << compiled.error().message();
  const ScopeReport& r = compiled->memory.scopes.at(0);
  EXPECT_EQ(r.planned_pixels, 3u * 48);  // at the bound: x, y and z alive together
  EXPECT_EQ(r.planned_bytes, r.lower_bound);
  bool off_origin = false;
  for (const Binding& b : compiled->module.functions[0].bindings) {
    off_origin = off_origin || (b.op == Op::kAllocTensor && !(b.image_offset == ImageOffset{}));
  }
  EXPECT_TRUE(off_origin) << print_function(compiled->module.functions[0]);
  auto machine = vm::VirtualMachine::create(std::make_shared<const Executable>(compiled->executable)).value_or_throw();
  std::vector<float> x(8 * 6 * 4);
  for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(i) * 0.25f - 20.0f;
  auto out = machine->invoke("main", {vm::Value::from(vm::host_tensor({8, 6, 4}, DType::kFloat32,
                                                                      std::as_bytes(std::span(x))))});
  std::vector<float> y = out.as_tensor().to_vector<float>();
  ASSERT_EQ(y.size(), x.size());
  for (size_t i = 0; i < x.size(); ++i) ASSERT_EQ(y[i], 2.0f * x[i] + 3.0f) << i;
}

TEST(PlanTextures, ATensorReadWithoutAnOffsetKeepsAnImageOfItsOwn) {
  auto planned = plan(R"(fn main(input: Tensor[(8, 8, 4), float32]) -> Tensor[(8, 8, 4), float32] {
  x = empty([8, 8, 4], float32, scope="global.texture")
  copy_tensor(input, x)
  y = empty([8, 8, 4], float32, scope="global.texture")
  call_kernel(at_origin, [x, y], grid=[8, 8])
  z = empty([8, 8, 4], float32, scope="global.texture")
  call_kernel(add_one, [y, z], grid=[8, 8])
  out = empty([8, 8, 4], float32, scope="global")
  copy_tensor(z, out)
  return out
}
)");
  ASSERT_TRUE(planned) << planned.error().message();
  EXPECT_EQ(check_planned(planned->module), "");
  std::map<std::string, std::string> storage;
  for (const Binding& b : planned->module.functions[0].bindings) {
    if (b.op == Op::kAllocTensor) storage[b.result] = b.vars[0];
  }
  EXPECT_EQ(storage["x"].rfind("image", 0), 0u) << storage["x"];
  EXPECT_EQ(storage["y"].rfind("atlas", 0), 0u) << storage["y"];
  EXPECT_EQ(storage["z"].rfind("atlas", 0), 0u) << storage["z"];
  EXPECT_NE(storage["y"], storage["z"]);
}

TEST(PlanTextures, NaiveGivesEveryTensorAnImage) {
  PlanOptions naive;
  naive.strategy = PlanStrategy::kNaive;
  auto planned = plan(kResidual, naive);
  ASSERT_TRUE(planned) << planned.error().message();
  EXPECT_EQ(check_planned(planned->module), "");
  for (const ScopeReport& r : planned->report.scopes) {
    if (r.scope != "global.texture") continue;
    EXPECT_EQ(r.images, 5u);
    EXPECT_EQ(r.planned_pixels, r.naive_pixels);
  }
}

TEST(PlanTextures, ATensorLargerThanTheLargestImageIsRefused) {
  auto planned = plan(R"(fn main(input: Tensor[(8, 8, 4), float32]) -> Tensor[(8, 8, 4), float32] {
  x = empty([1, 20000, 4], float32, scope="global.texture")
  out = empty([8, 8, 4], float32, scope="global")
  copy_tensor(input, out)
  return out
}
)");
  ASSERT_FALSE(planned);
  EXPECT_EQ(planned.error().message(),
            "error: planning function 'main', tensor 'x': it needs an image of 1 x 20000 pixels (height x width), "
            "more than the target's largest (16384 x 16384)");
}

}  // namespace
}  // namespace stowage::ir
