#pragma once
// A worker on another machine: a launcher (srun, mpirun, ssh) started it with the way
// back to its caller in the environment (contract/process_contract.hpp). It connects,
// proves its rank with the call's secret (contract/connect_back.hpp), checks that the
// other end is the caller, and then serves the call over that connection as a local
// worker serves it over its channel.

namespace mpify::detail {

/// If MPIFY_CONNECT is set: takes the secret out of the environment (neither the
/// function nor what it starts sees it), connects back, serves the call and ends the
/// process. When the caller cannot be reached or does not prove itself, says so on
/// stderr (naming the caller's address and the reason, never the secret) and exits with
/// 70. Otherwise returns.
void serve_if_connecting();

}  // namespace mpify::detail
