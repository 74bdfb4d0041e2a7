#pragma once
// A cell's names resolve to the newest library that defines them.
//
// A notebook edits a function in a %%mpify (or %%file + load_source) cell and runs it
// again: mpify loads a second library beside the first, and both define the function.
// The JIT's own lookup asks the dynamic linker, which answers with the oldest; and it
// remembers every answer. So the kernel puts a lookup of its own first, which asks mpify
// for the newest definition (mpify_newest_source_function), and forgets its answers each
// time mpify loads another library.
namespace llvm::orc {
class LLJIT;
}

namespace mpify_kernel {

/// Adds the lookup to the JIT's main library. Call once, before the first cell.
void install_newest_definitions(llvm::orc::LLJIT& jit);

/// After a cell: when mpify has loaded another library since the last call, forgets the
/// answers given, so that the next cell looks them up again.
void forget_outdated_definitions(llvm::orc::LLJIT& jit);

}  // namespace mpify_kernel
