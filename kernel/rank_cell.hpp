#pragma once
// Where a %%mpify cell's source goes, and the call that compiles it.
//
// The cell is written to a folder of this kernel's own (created 0700 under $TMPDIR,
// removed when the kernel shuts down) and compiled by mpify::load_source, called from
// the session (the kernel does not link mpify): the library lands in load_source's
// private cache, keyed by content, and its functions become the ones every rank runs.
#include <string>
#include <vector>

namespace mpify_kernel {

/// Writes `code` to the kernel's folder as NAME.cpp (NAME from the first of `functions`,
/// else "mpify_cell") and returns its path. Throws std::runtime_error naming the file.
std::string write_rank_source(const std::string& code, const std::vector<std::string>& functions);

/// C++ for the session: load_source of `path` with these compiler flags and link inputs.
std::string load_source_call(const std::string& path, const std::vector<std::string>& flags,
                             const std::vector<std::string>& libraries);

/// Removes the kernel's folder (at shutdown).
void remove_rank_sources();

}  // namespace mpify_kernel
