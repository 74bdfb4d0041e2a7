#pragma once
// The environments of a call: what the workers get, and what the caller's own rank sees
// while its fn runs (set with common/scoped_environment.hpp).
#include <mpify/options.hpp>

#include <map>
#include <optional>
#include <string>

MPIFY_BEGIN_DETAIL_NAMESPACE

/// What every worker of an n-rank call adds to the caller's environment: Options::env,
/// LOCAL_WORLD_SIZE, the mark of a worker (contract/process_contract.hpp), and malloc on
/// huge pages unless the user chose GLIBC_TUNABLES. LOCAL_RANK is each worker's own.
std::map<std::string, std::string> worker_variables(const Options& options, int n);

/// What the caller's own rank sees while its fn runs: Options::env, LOCAL_RANK, LOCAL_WORLD_SIZE.
std::map<std::string, std::string> own_rank_variables(const Options& options, int rank, int n);

MPIFY_END_DETAIL_NAMESPACE
