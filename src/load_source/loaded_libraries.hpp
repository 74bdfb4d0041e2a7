#pragma once
// The libraries load_source has loaded into this process, newest last.
//
// A notebook edits a file and loads it again: both versions stay loaded (code compiled
// from earlier cells may still point into the old one), and both define the same
// names. The process's global symbol lookup finds the oldest, so an interpreter asks
// here instead: the newest library that defines a function wins, as the newest cell
// that defines a name does.
#include <string>

#include <mpify/abi.hpp>

MPIFY_BEGIN_DETAIL_NAMESPACE

/// Records a library load_source has just loaded (`handle` from dlopen).
void remember_loaded_source(void* handle, const std::string& path);

/// The address of the function `linker_name` defined in the newest loaded library that
/// defines it as a global function (not one it only uses), or nullptr.
void* newest_source_function(const char* linker_name) noexcept;

/// How many times remember_loaded_source has recorded a library not seen before.
unsigned long source_generation() noexcept;

MPIFY_END_DETAIL_NAMESPACE
