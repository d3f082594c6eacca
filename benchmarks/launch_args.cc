// What a kernel launch costs the host by the kind of its arguments: whole buffers,
// sub-buffers that do not overlap, sub-buffers that overlap (as the tensors of a
// planned storage do), pointers into one SVM allocation (the VM's way where a
// device offers SVM), and images. Each row launches 38 kernels (one cl_kernel each,
// arguments set once) `--invocations` times without waiting, then waits: "issue" is
// the host's time to enqueue, per launch; "total" adds the wait for the device.
// When issue is as long as total, the host sets the pace.
//
//   launch_args [--device=SPEC] [--invocations=N] [--rounds=R]
#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <functional>
#include <string>
#include <vector>

#include "stowage/backend/opencl.h"

namespace {

using namespace stowage;

constexpr int kKernels = 38;       // launches per invocation, as in MobileNetV2
constexpr size_t kItems = 16384;   // work-items per launch: short kernels
constexpr size_t kRange = 131072;  // bytes each argument covers

const char* kSource = R"(
__constant sampler_t smp = CLK_NORMALIZED_COORDS_FALSE | CLK_ADDRESS_CLAMP | CLK_FILTER_NEAREST;
__kernel void buffers(__global float* y, __global const float* a, __global const float* b, __global const float* c) {
  const int i = get_global_id(0);
  y[i] = a[i] + b[i] * c[i];
}
__kernel void scalars36(__global float* y, __global const float* a, __global const float* b, __global const float* c,
                        int s0, int s1, int s2, int s3, int s4, int s5, int s6, int s7, int s8, int s9, int s10,
                        int s11, int s12, int s13, int s14, int s15, int s16, int s17, int s18, int s19, int s20,
                        int s21, int s22, int s23, int s24, int s25, int s26, int s27, int s28, int s29, int s30,
                        int s31, int s32, int s33, int s34, int s35) {
  const int i = get_global_id(0) + get_global_id(1) * get_global_size(0);
  const int s = s0 + s1 + s2 + s3 + s4 + s5 + s6 + s7 + s8 + s9 + s10 + s11 + s12 + s13 + s14 + s15 + s16 + s17 +
                s18 + s19 + s20 + s21 + s22 + s23 + s24 + s25 + s26 + s27 + s28 + s29 + s30 + s31 + s32 + s33 +
                s34 + s35;
  y[i] = a[i] + b[i] * c[i] + (float)s;
}
__kernel void optional(__global float* y, __global const float* a, __global const float* b, __global const float* c) {
  const int i = get_global_id(0);
  y[i] = (a ? a[i] : 0.0f) + (b ? b[i] : 1.0f) * (c ? c[i] : 1.0f);
}
__kernel void vectors36(__global float* y, __global const float* a, __global const float* b, __global const float* c,
                        int16 s0, int16 s1, int4 s2) {
  const int i = get_global_id(0) + get_global_id(1) * get_global_size(0);
  const int16 s16 = s0 + s1;
  const int s = s16.s0 + s16.s1 + s16.s2 + s16.s3 + s16.s4 + s16.s5 + s16.s6 + s16.s7 + s16.s8 + s16.s9 + s16.sa +
                s16.sb + s16.sc + s16.sd + s16.se + s16.sf + s2.x + s2.y + s2.z + s2.w;
  y[i] = a[i] + b[i] * c[i] + (float)s;
}
__kernel void images1(__global float* y, read_only image2d_t a, __global const float* b, __global const float* c) {
  const int i = get_global_id(0);
  y[i] = read_imagef(a, smp, (int2)(i & 127, i >> 7)).x + b[i] * c[i];
}
__kernel void images2(write_only image2d_t y, read_only image2d_t a, __global const float* b, __global const float* c) {
  const int i = get_global_id(0);
  write_imagef(y, (int2)(i & 127, i >> 7), read_imagef(a, smp, (int2)(i & 127, i >> 7)) + b[i] * c[i]);
}
__kernel void images3(write_only image2d_t y, read_only image2d_t a, read_only image2d_t b, __global const float* c) {
  const int i = get_global_id(0);
  write_imagef(y, (int2)(i & 127, i >> 7), read_imagef(a, smp, (int2)(i & 127, i >> 7)) *
                                               read_imagef(b, smp, (int2)(i & 127, i >> 7)) + c[i]);
}
)";

void check(cl_int status, const char* call) {
  if (status != CL_SUCCESS) throw StowageError(opencl::cl_error(status, call));
}

struct Row {
  std::string name;
  const char* kernel;
  // Sets the arguments of launch `j`'s kernel.
  std::function<void(cl_kernel, int)> bind;
  // A 2-D launch of kItems work-items in work-groups of 16 x 8, as the VM's tiled
  // kernels launch, instead of 1-D with the local size left to the driver.
  bool tiled = false;
};

struct Timing {
  double issue_us;
  double total_us;
};

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.size() % 2 ? v[v.size() / 2] : (v[v.size() / 2 - 1] + v[v.size() / 2]) / 2;
}

Timing time_row(const opencl::Context& ctx, cl_program program, const Row& row, int invocations, int rounds) {
  std::vector<cl_kernel> kernels(kKernels);
  cl_int status = CL_SUCCESS;
  for (int j = 0; j < kKernels; ++j) {
    kernels[j] = clCreateKernel(program, row.kernel, &status);
    check(status, "clCreateKernel");
    row.bind(kernels[j], j);
  }
  std::vector<double> issue, total;
  for (int r = 0; r <= rounds; ++r) {  // round 0 warms up
    check(clFinish(ctx.queue()), "clFinish");
    auto start = std::chrono::steady_clock::now();
    for (int i = 0; i < invocations; ++i) {
      for (cl_kernel k : kernels) {
        const size_t global2[2] = {128, kItems / 128}, local2[2] = {16, 8};
        check(row.tiled ? clEnqueueNDRangeKernel(ctx.queue(), k, 2, nullptr, global2, local2, 0, nullptr, nullptr)
                        : clEnqueueNDRangeKernel(ctx.queue(), k, 1, nullptr, &kItems, nullptr, 0, nullptr, nullptr),
              "clEnqueueNDRangeKernel");
      }
    }
    auto issued = std::chrono::steady_clock::now();
    check(clFinish(ctx.queue()), "clFinish");
    auto done = std::chrono::steady_clock::now();
    if (r == 0) continue;
    const double launches = static_cast<double>(invocations) * kKernels;
    issue.push_back(std::chrono::duration<double, std::micro>(issued - start).count() / launches);
    total.push_back(std::chrono::duration<double, std::micro>(done - start).count() / launches);
  }
  for (cl_kernel k : kernels) clReleaseKernel(k);
  return {median(issue), median(total)};
}

void set_mem(cl_kernel k, cl_uint i, cl_mem m) { check(clSetKernelArg(k, i, sizeof(cl_mem), &m), "clSetKernelArg"); }

int run(const std::string& device_spec, int invocations, int rounds) {
  auto device = opencl::select_device(device_spec, Requirements{});
  if (!device) throw StowageError(device.error());
  auto made = opencl::Context::create(*device);
  if (!made) throw StowageError(made.error());
  const opencl::Context& ctx = **made;
  cl_int status = CL_SUCCESS;
  cl_program program = clCreateProgramWithSource(ctx.context(), 1, &kSource, nullptr, &status);
  check(status, "clCreateProgramWithSource");
  cl_device_id id = ctx.device();
  check(clBuildProgram(program, 1, &id, "", nullptr, nullptr), "clBuildProgram");

  // 16 ranges of kRange bytes: disjoint ones 1 MiB apart, overlapping ones 64 KiB
  // apart (range i overlaps i - 1 and i + 1). Launch j writes range 3j and reads
  // 3j + 4, 3j + 8, 3j + 12: each launch's ranges overlap its neighbours'.
  auto range_of = [](int j, int a) { return (3 * j + 4 * a) % 16; };
  std::vector<opencl::MemHandle> whole, disjoint, overlapping;
  opencl::MemHandle spread(clCreateBuffer(ctx.context(), CL_MEM_READ_WRITE, 16 << 20, nullptr, &status));
  check(status, "clCreateBuffer");
  opencl::MemHandle packed(clCreateBuffer(ctx.context(), CL_MEM_READ_WRITE, 2 << 20, nullptr, &status));
  check(status, "clCreateBuffer");
  for (size_t i = 0; i < 16; ++i) {
    whole.emplace_back(clCreateBuffer(ctx.context(), CL_MEM_READ_WRITE, kRange, nullptr, &status));
    check(status, "clCreateBuffer");
    cl_buffer_region apart{i << 20, kRange}, close{i * 65536, kRange};
    disjoint.emplace_back(clCreateSubBuffer(spread.get(), CL_MEM_READ_WRITE, CL_BUFFER_CREATE_TYPE_REGION, &apart, &status));
    check(status, "clCreateSubBuffer");
    overlapping.emplace_back(clCreateSubBuffer(packed.get(), CL_MEM_READ_WRITE, CL_BUFFER_CREATE_TYPE_REGION, &close, &status));
    check(status, "clCreateSubBuffer");
  }
  auto with = [&](std::vector<opencl::MemHandle>& mems) {
    return [&mems, range_of](cl_kernel k, int j) {
      for (cl_uint a = 0; a < 4; ++a) set_mem(k, a, mems[range_of(j, a)].get());
    };
  };
  std::vector<Row> rows = {
      {"4 whole buffers", "buffers", with(whole)},
      {"4 sub-buffers, none overlapping", "buffers", with(disjoint)},
      {"4 sub-buffers, overlapping others", "buffers", with(overlapping)},
  };
  void* svm = nullptr;
  if (device->svm_coarse_grain) {
    svm = clSVMAlloc(ctx.context(), CL_MEM_READ_WRITE, 2 << 20, 0);
    if (svm == nullptr) throw StowageError(ErrorKind::kRuntime, "clSVMAlloc failed");
    rows.push_back({"4 SVM pointers, overlapping others", "buffers", [svm, range_of](cl_kernel k, int j) {
                      for (cl_uint a = 0; a < 4; ++a) {
                        check(clSetKernelArgSVMPointer(k, a, static_cast<char*>(svm) + range_of(j, a) * 65536),
                              "clSetKernelArgSVMPointer");
                      }
                    }});
    // As many scalars as a GEMM's launch takes (gemm.cl: about 36), then also its 2-D
    // work-groups: whether the count of arguments or the launch's shape costs the host.
    auto svm_and_scalars = [svm, range_of](cl_kernel k, int j) {
      for (cl_uint a = 0; a < 4; ++a) {
        check(clSetKernelArgSVMPointer(k, a, static_cast<char*>(svm) + range_of(j, a) * 65536),
              "clSetKernelArgSVMPointer");
      }
      for (cl_uint a = 4; a < 40; ++a) {
        const cl_int value = static_cast<cl_int>(a + j);
        check(clSetKernelArg(k, a, sizeof value, &value), "clSetKernelArg");
      }
    };
    // Weights are read-only and lie apart: whether such arguments cost less as
    // sub-buffers beside an SVM pointer for the output, and whether naming the SVM
    // pointers a kernel uses (CL_KERNEL_EXEC_INFO_SVM_PTRS) changes a launch's cost.
    auto svm_and_disjoint = [&disjoint, svm, range_of](cl_kernel k, int j) {
      check(clSetKernelArgSVMPointer(k, 0, static_cast<char*>(svm) + range_of(j, 0) * 65536),
            "clSetKernelArgSVMPointer");
      for (cl_uint a = 1; a < 4; ++a) set_mem(k, a, disjoint[range_of(j, a)].get());
    };
    rows.push_back({"1 SVM pointer, 3 sub-buffers none overlapping", "buffers", svm_and_disjoint});
    rows.push_back({"4 SVM pointers, named in CL_KERNEL_EXEC_INFO_SVM_PTRS", "buffers",
                    [svm, range_of](cl_kernel k, int j) {
                      void* used[4];
                      for (cl_uint a = 0; a < 4; ++a) {
                        used[a] = static_cast<char*>(svm) + range_of(j, a) * 65536;
                        check(clSetKernelArgSVMPointer(k, a, used[a]), "clSetKernelArgSVMPointer");
                      }
                      check(clSetKernelExecInfo(k, CL_KERNEL_EXEC_INFO_SVM_PTRS, sizeof used, used),
                            "clSetKernelExecInfo");
                    }});
    rows.push_back({"4 SVM pointers, 36 int scalars", "scalars36", svm_and_scalars});
    // The same 36 values in two int16s and an int4: whether a launch pays per argument
    // or per byte of its arguments.
    rows.push_back({"4 SVM pointers, 36 ints as 2 int16 and 1 int4", "vectors36", [svm, range_of](cl_kernel k, int j) {
                      for (cl_uint a = 0; a < 4; ++a) {
                        check(clSetKernelArgSVMPointer(k, a, static_cast<char*>(svm) + range_of(j, a) * 65536),
                              "clSetKernelArgSVMPointer");
                      }
                      cl_int values[36];
                      for (int v = 0; v < 36; ++v) values[v] = v + j;
                      check(clSetKernelArg(k, 4, 16 * sizeof(cl_int), values), "clSetKernelArg");
                      check(clSetKernelArg(k, 5, 16 * sizeof(cl_int), values + 16), "clSetKernelArg");
                      check(clSetKernelArg(k, 6, 4 * sizeof(cl_int), values + 32), "clSetKernelArg");
                    }});
    // A launch's placeholders are tensors it already passes: whether the driver's cost
    // is per argument or per distinct pointer.
    rows.push_back({"4 SVM pointers, all the same", "optional", [svm, range_of](cl_kernel k, int j) {
                      for (cl_uint a = 0; a < 4; ++a) {
                        check(clSetKernelArgSVMPointer(k, a, static_cast<char*>(svm) + range_of(j, 0) * 65536),
                              "clSetKernelArgSVMPointer");
                      }
                    }});
    // An unused operand (a GEMM's residual or workspace, which the launches fill with
    // a placeholder tensor today) passed as a null pointer instead.
    rows.push_back({"1 SVM pointer, 3 null pointers", "optional", [svm, range_of](cl_kernel k, int j) {
                      check(clSetKernelArgSVMPointer(k, 0, static_cast<char*>(svm) + range_of(j, 0) * 65536),
                            "clSetKernelArgSVMPointer");
                      for (cl_uint a = 1; a < 4; ++a) check(clSetKernelArg(k, a, sizeof(cl_mem), nullptr), "clSetKernelArg");
                    }});
    rows.push_back({"4 SVM pointers, 36 int scalars, 2-D work-groups of 16 x 8", "scalars36", svm_and_scalars, true});
  }
  std::vector<opencl::MemHandle> images;
  if (device->image_support) {
    cl_image_format format{CL_RGBA, CL_FLOAT};
    cl_image_desc desc{};
    desc.image_type = CL_MEM_OBJECT_IMAGE2D;
    desc.image_width = 128;
    desc.image_height = kItems / 128;
    for (int i = 0; i < 8; ++i) {
      images.emplace_back(clCreateImage(ctx.context(), CL_MEM_READ_WRITE, &format, &desc, nullptr, &status));
      check(status, "clCreateImage");
    }
    for (int n = 1; n <= 3; ++n) {
      rows.push_back({fmt::format("{} image{}, {} whole buffer{}", n, n > 1 ? "s" : "", 4 - n, n < 3 ? "s" : ""),
                      n == 1 ? "images1" : n == 2 ? "images2" : "images3", [&, n](cl_kernel k, int j) {
                        for (cl_uint a = 0; a < 4; ++a) {
                          const bool image = n == 1 ? a == 1 : n == 2 ? a <= 1 : a <= 2;
                          set_mem(k, a, image ? images[(j + a) % 8].get() : whole[range_of(j, a)].get());
                        }
                      }});
    }
    rows.push_back({"3 image parameters given 2 images, 1 whole buffer", "images3", [&](cl_kernel k, int j) {
                      set_mem(k, 0, images[j % 8].get());
                      set_mem(k, 1, images[(j + 1) % 8].get());
                      set_mem(k, 2, images[(j + 1) % 8].get());
                      set_mem(k, 3, whole[range_of(j, 3)].get());
                    }});
  }
  fmt::print("# launch_args --invocations={} --rounds={} on {}\n", invocations, rounds, device->summary());
  fmt::print("# {} launches of {} work-items per invocation; medians of {} rounds, per launch\n\n", kKernels, kItems,
             rounds);
  fmt::print("| arguments | issue (us) | total (us) |\n| --- | ---: | ---: |\n");
  for (const Row& row : rows) {
    Timing t = time_row(ctx, program, row, invocations, rounds);
    fmt::print("| {} | {:.2f} | {:.2f} |\n", row.name, t.issue_us, t.total_us);
  }
  if (svm != nullptr) {
    clFinish(ctx.queue());
    clSVMFree(ctx.context(), svm);
  }
  clReleaseProgram(program);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Host cost of a kernel launch by the kind of its arguments.", "launch_args"};
  std::string device;
  int invocations = 10;
  int rounds = 5;
  app.add_option("--device", device, "opencl:N, gpu, cpu or part of a device name");
  app.add_option("--invocations", invocations, "invocations of 38 launches per round")->check(CLI::Range(1, 10000));
  app.add_option("--rounds", rounds, "rounds timed after one not counted")->check(CLI::Range(1, 1000));
  CLI11_PARSE(app, argc, argv);
  try {
    return run(device, invocations, rounds);
  } catch (const StowageError& e) {
    fmt::print(stderr, "launch_args: {}\n", e.what());
    return 1;
  }
}
