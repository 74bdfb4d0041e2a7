#pragma once
// Which LibTorch a program's use of mpify's LibTorch part was compiled against, checked by
// the linker. LibTorch keeps no ABI between its versions (1.13 and 2.11 lay out their classes
// differently), so libmpify_torch works only with code compiled against the LibTorch it was
// built with. It exports one symbol named for that version; every translation unit that
// includes this header refers to the symbol named for the LibTorch it is compiled against.
// Built against another, the program fails to link, or to load, naming the symbol:
//   undefined reference to `mpify_built_for_libtorch_2_11'
// which reads "this libmpify_torch was not built for LibTorch 2.11".
#include <mpify/export.hpp>

#include <torch/version.h>

#define MPIFY_LIBTORCH_GENERATION_CONCAT_(major, minor) mpify_built_for_libtorch_##major##_##minor
#define MPIFY_LIBTORCH_GENERATION_CONCAT(major, minor) MPIFY_LIBTORCH_GENERATION_CONCAT_(major, minor)
/// The symbol for the LibTorch this file is compiled against: mpify_built_for_libtorch_<major>_<minor>.
#define MPIFY_LIBTORCH_GENERATION_SYMBOL MPIFY_LIBTORCH_GENERATION_CONCAT(TORCH_VERSION_MAJOR, TORCH_VERSION_MINOR)

/// Defined (as 1) by libmpify_torch, only for the LibTorch it was built with.
extern "C" MPIFY_API const int MPIFY_LIBTORCH_GENERATION_SYMBOL;

// Not in an interpreter (cling, mpify-kernel): it resolves symbols as cells run, against the
// libraries loaded by then, and compiles cells with the LibTorch mpify was built with.
#if !defined(MPIFY_BUILDING_LIBRARY) && !defined(__CLING__) && !defined(MPIFY_KERNEL)
namespace {
// Kept in every object file (`used`), so that its reference to the symbol is too.
[[maybe_unused]] __attribute__((used))
const int* const mpify_libtorch_generation_check = &MPIFY_LIBTORCH_GENERATION_SYMBOL;
}  // namespace
#endif
