// On-chip bytes with and without splitting tensors into blocks, as a printed
// table.
//
//   discontiguous_planning [--target NAME_OR_PATH]
//
// Each program of fragmentation_programs.h requests its tensors with
// empty_discontiguous in "global.vtcm" (tables in "global") and is planned
// twice: blocks placed one by one into free space (the default), and blocks of
// a tensor kept back to back as one item (PlanOptions::split_discontiguous =
// false, which plans them as `empty` tensors of the same bytes would be).
// "needed" is the on-chip storage planned with the capacity lifted; the rest
// is what the planner does under the target's capacity. Both planned programs
// pass the verifier.
#include <cstdio>
#include <string>

#include "fragmentation_programs.h"
#include "stowage/ir/parser.h"
#include "stowage/ir/planner.h"
#include "stowage/ir/verifier.h"

namespace {

using namespace stowage;

constexpr const char* kScope = "global.vtcm";

struct Outcome {
  uint64_t onchip_bytes = 0;  // the on-chip storage planned
  uint64_t spilled = 0;
  uint64_t spilled_bytes = 0;
};

Expected<Outcome> plan(const std::string& text, const TargetDesc& target, bool split) {
  auto module = ir::parse_module(text, "fragmentation.stir");
  if (!module) return module.error();
  if (auto status = ir::verify_module(*module, target); !status) return status.error();
  ir::PlanOptions options;
  options.split_discontiguous = split;
  auto report = ir::plan_memory(*module, target, options);
  if (!report) return report.error();
  if (auto status = ir::verify_module(*module, target); !status) return status.error();
  const ScopeDesc* onchip = target.find_scope(kScope);
  Outcome out;
  for (const ir::ScopeReport& r : report->scopes) {
    if (target.find_scope(r.scope) == onchip) out.onchip_bytes += r.planned_bytes;
    out.spilled += r.spilled;
    out.spilled_bytes += r.spilled_bytes;
  }
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  std::string target_name = "opencl";
  if (argc == 3 && std::string(argv[1]) == "--target") {
    target_name = argv[2];
  } else if (argc != 1) {
    std::fprintf(stderr, "usage: discontiguous_planning [--target NAME_OR_PATH]\n");
    return 2;
  }
  auto target = TargetDesc::load(target_name);
  if (!target) {
    std::fprintf(stderr, "error: %s\n", target.error().message().c_str());
    return 2;
  }
  const ScopeDesc* onchip = target->find_scope(kScope);
  if (onchip == nullptr || onchip->capacity == 0) {
    std::fprintf(stderr, "error: target '%s' has no scope '%s' with a capacity\n", target_name.c_str(), kScope);
    return 2;
  }
  TargetDesc unlimited = *target;
  for (ScopeDesc& s : unlimited.scopes) {
    if (s.name == onchip->name) s.capacity = 0;
  }
  std::printf("| program | tensors | unit | live-bytes bound | capacity | plan | on-chip needed | fits "
              "| spilled tensors | spilled bytes | on-chip planned |\n");
  std::printf("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |\n");
  int status = 0;
  for (const bench::FragmentationCase& c : bench::fragmentation_cases()) {
    const std::string text = bench::fragmentation_program(c, kScope);
    const uint64_t bound = ir::live_bytes_lower_bound(bench::fragmentation_items(c));
    for (bool split : {false, true}) {
      auto needed = plan(text, unlimited, split);
      auto capped = plan(text, *target, split);
      const char* plan_name = split ? "discontiguous" : "contiguous";
      if (!needed || !capped) {
        std::printf("| %s | error: %s |\n", c.name.c_str(),
                    (!needed ? needed.error() : capped.error()).message().c_str());
        status = 1;
        continue;
      }
      std::printf("| %s | %zu | %llu | %llu | %llu | %s | %llu | %s | %llu | %llu | %llu |\n", c.name.c_str(),
                  c.tensors.size(), (unsigned long long)bench::unit_bytes(c), (unsigned long long)bound,
                  (unsigned long long)onchip->capacity, plan_name, (unsigned long long)needed->onchip_bytes,
                  needed->onchip_bytes <= onchip->capacity ? "yes" : "no", (unsigned long long)capped->spilled,
                  (unsigned long long)capped->spilled_bytes, (unsigned long long)capped->onchip_bytes);
    }
  }
  return status;
}
