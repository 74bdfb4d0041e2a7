#pragma once
// Variables that libraries read as they load (the loader, glibc's malloc, OpenMP, BLAS):
// a template started with other values would give the workers it forks the wrong ones.
#include <string>
#include <vector>

#include <mpify/abi.hpp>

MPIFY_BEGIN_DETAIL_NAMESPACE

/// Whether "NAME=value" is read as libraries load (LD_*, GLIBC_TUNABLES, MALLOC_*, OMP_*...).
bool read_at_load(const std::string& entry);

/// The load-time entries of `env`, sorted, one per line: equal for two environments
/// whose templates load the same way.
std::string load_time_signature(const std::vector<std::string>& env);

MPIFY_END_DETAIL_NAMESPACE
