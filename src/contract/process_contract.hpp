#pragma once
// What a process started by mpify finds when it starts: the whole contract between the
// caller (spawn/) and the process it starts (worker/), in one place.
//
//   fd 0   /dev/null
//   fd 1   stdout: a pipe to the caller's relay, /dev/null, or the caller's own fd 1
//   fd 2   stderr: a pipe to the caller's relay, or the caller's own fd 2
//   fd 3   its end of the channel to the caller (a socketpair; wire/frames.hpp)
//   fd 4   the call's arguments in a memfd, when they are large: to be mapped
//          privately and closed before fn runs, since the caller's next call
//          rewrites it (wire/shared_arguments.hpp); closed otherwise
//   no other fd; an empty signal mask; PR_SET_PDEATHSIG = SIGKILL when the caller dies
//
// and in its environment either
//   MPIFY_WORKER_FD=3    serve one call (worker/serve.hpp), or
//   MPIFY_TEMPLATE_FD=3  become a warm template, fd 3 being its control socket
//                        (worker/template_server.hpp; it has no PDEATHSIG)
// plus LOCAL_RANK and LOCAL_WORLD_SIZE (workers only) and the caller's Options::env.
//
// A rank on another machine is two processes. Its agent, on that machine, is started by
// a launcher (srun, mpirun, ssh, a command template) with none of these fds; its
// environment has instead
//   MPIFY_CONNECT=tcp:host:port  the caller's connect-back port
//   MPIFY_CONNECT_SECRET=<hex>   the call's secret (common/secret_handshake.hpp); when the
//                                launcher cannot pass it, the first line of stdin
//   MPIFY_CONNECT_RANK=k         the rank it proves
// and it starts the rank's worker there as above (worker/remote_agent.hpp). Its stand-in,
// on the caller's machine, is started as a worker is (fds 0-3 as above, no arguments in
// shared memory) with
//   fd 4                         the link to the agent (contract/remote_link.hpp)
//   MPIFY_STAND_IN=k@host        the rank it stands for, and where it runs
// and looks to the caller's supervisor exactly like a local worker (worker/stand_in.hpp).

#include <mpify/abi.hpp>

MPIFY_BEGIN_DETAIL_NAMESPACE

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

/// Which attempt of a call with Options::restarts every rank runs (mpify::restart_count()):
/// set in the workers' environment and, while its fn runs, in the caller's.
constexpr const char* restart_count_env_var = "MPIFY_RESTART_COUNT";

/// A remote worker's way back to its caller ("tcp:host:port"), and the rank it proves.
constexpr const char* connect_env_var = "MPIFY_CONNECT";
constexpr const char* connect_rank_env_var = "MPIFY_CONNECT_RANK";

/// The mark of a node's template (worker/node_template.hpp): how many seconds it stays
/// once idle (0: until its caller ends it). Its requests come on its stdin
/// (contract/node_template_request.hpp).
constexpr const char* node_template_env_var = "MPIFY_NODE_TEMPLATE";

/// The mark of a remote rank's stand-in ("k@host"), and the fd of its link to the agent.
constexpr const char* stand_in_env_var = "MPIFY_STAND_IN";
constexpr int stand_in_link_fd = 4;
/// A stand-in's fd 0: a socket on which the caller asks where the remote rank is (a byte)
/// and the stand-in answers with the agent's stack dump (u32 size, little-endian, then
/// the dump: forensics/stack_dump_format.hpp).
constexpr int stand_in_control_fd = 0;

MPIFY_END_DETAIL_NAMESPACE
