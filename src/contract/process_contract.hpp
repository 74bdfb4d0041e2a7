#pragma once
// What a process started by mpify finds when it starts: the whole contract between the
// caller (spawn/) and the process it starts (worker/), in one place.
//
//   fd 0   /dev/null
//   fd 1   stdout: a pipe to the caller's relay, /dev/null, or the caller's own fd 1
//   fd 2   stderr: a pipe to the caller's relay, or the caller's own fd 2
//   fd 3   its end of the channel to the caller (a socketpair; wire/frames.hpp)
//   fd 4   the call's arguments in a sealed memfd, when they are large
//          (wire/shared_arguments.hpp); closed otherwise
//   no other fd; an empty signal mask; PR_SET_PDEATHSIG = SIGKILL when the caller dies
//
// and in its environment either
//   MPIFY_WORKER_FD=3    serve one call (worker/serve.hpp), or
//   MPIFY_TEMPLATE_FD=3  become a warm template, fd 3 being its control socket
//                        (worker/template_server.hpp; it has no PDEATHSIG)
// plus LOCAL_RANK and LOCAL_WORLD_SIZE (workers only) and the caller's Options::env.
//
// A worker on another machine, started by a launcher (srun, mpirun, ssh), has none of
// these fds; its environment has instead
//   MPIFY_CONNECT=tcp:host:port  the caller's connect-back port
//   MPIFY_CONNECT_SECRET=<hex>   the call's secret (contract/connect_back.hpp)
//   MPIFY_CONNECT_RANK=k         the rank it proves
// and it serves the call over the connection it makes (worker/connect_back_worker.hpp).

namespace mpify::detail {

/// The fd number at which a worker finds its end of the channel (a template: its
/// control socket).
constexpr int worker_channel_fd = 3;
/// The fd number at which a worker finds its arguments when they came in shared memory.
constexpr int worker_args_fd = 4;
/// Fds 0..worker_fd_count-1 are laid out as above; every other fd is closed.
constexpr int worker_fd_count = 5;

/// The environment variable that marks a worker process (value: the channel fd).
constexpr const char* worker_env_var = "MPIFY_WORKER_FD";
/// The environment variable that makes a process a warm template (value: its control fd).
constexpr const char* template_env_var = "MPIFY_TEMPLATE_FD";

/// A remote worker's way back to its caller ("tcp:host:port"), and the rank it proves.
constexpr const char* connect_env_var = "MPIFY_CONNECT";
constexpr const char* connect_rank_env_var = "MPIFY_CONNECT_RANK";

}  // namespace mpify::detail
