// The planner's figures for text IR files, as JSON: per file, its memory
// report (planned bytes, lower bound, images and pixels per scope) and whether
// the planned program passes the verifier.
//
//   texture_planning [--offsets] [--target NAME_OR_PATH] FILE.stir...
//
// --offsets gives every image parameter of every kernel an image offset
// parameter after it, in the signatures the kernel reader made (the sources
// stay as they are): the planner then plans as it will for kernels that read
// and write relative to a tensor's origin, placing texture tensors at offsets
// in shared images. Such a program is for measuring, not for running.
// Constants written `external` (no data) are given zeros: only their types
// matter to the planner.
// benchmarks/texture_memory.py writes the files and prints the table.
#include <cstdio>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "stowage/ir/kernel_reader.h"
#include "stowage/ir/parser.h"
#include "stowage/ir/planner.h"
#include "stowage/ir/verifier.h"

namespace {

using namespace stowage;

void give_images_offsets(ir::Module& module) {
  for (ir::KernelSourceUnit& unit : module.units) {
    for (KernelSignature& kernel : unit.signatures) {
      std::vector<KernelParam> params;
      for (size_t i = 0; i < kernel.params.size(); ++i) {
        params.push_back(kernel.params[i]);
        if (kernel.params[i].is_image() && !has_image_offset(kernel, i)) {
          params.push_back(KernelParam{kernel.params[i].name + "_at", KernelParamKind::kImageOffset, DType::kInt32, 2,
                                       false});
        }
      }
      kernel.params = std::move(params);
    }
  }
}

Expected<nlohmann::json> plan_file(const std::string& path, const TargetDesc& target, bool offsets) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return Error(ErrorKind::kInvalidInput, "cannot read " + path);
  std::stringstream text;
  text << in.rdbuf();
  auto module = ir::parse_module(text.str(), path);
  if (!module) return module.error();
  for (ir::ConstantTensor& c : module->constants) {
    if (!c.data) c.data = std::make_shared<std::vector<std::byte>>(*checked_nbytes(c.type.shape, c.type.dtype));
  }
  if (Status s = ir::read_module_kernels(*module, target.table_entry_bytes, path); !s) return s.error();
  if (offsets) give_images_offsets(*module);
  if (Status s = ir::verify_module(*module, target, path); !s) return s.error();
  auto report = ir::plan_memory(*module, target);
  if (!report) return report.error();
  Status verified = ir::verify_module(*module, target, path);
  return nlohmann::json{{"file", path},
                        {"verified", verified ? nlohmann::json(true) : nlohmann::json(verified.error().message())},
                        {"report", nlohmann::json::parse(ir::memory_report_json(*report))}};
}

}  // namespace

int main(int argc, char** argv) {
  std::string target_name = "opencl";
  bool offsets = false;
  std::vector<std::string> files;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "--offsets") {
      offsets = true;
    } else if (arg == "--target" && i + 1 < argc) {
      target_name = argv[++i];
    } else if (!arg.empty() && arg[0] != '-') {
      files.push_back(arg);
    } else {
      std::fprintf(stderr, "usage: texture_planning [--offsets] [--target NAME_OR_PATH] FILE.stir...\n");
      return 2;
    }
  }
  auto target = TargetDesc::load(target_name);
  if (!target) {
    std::fprintf(stderr, "error: %s\n", target.error().message().c_str());
    return 2;
  }
  nlohmann::json out = nlohmann::json::array();
  int status = 0;
  for (const std::string& file : files) {
    auto planned = plan_file(file, *target, offsets);
    if (!planned) {
      out.push_back({{"file", file}, {"error", planned.error().message()}});
      status = 1;
      continue;
    }
    out.push_back(*planned);
  }
  std::printf("%s\n", out.dump(1).c_str());
  return status;
}
