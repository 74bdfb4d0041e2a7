#pragma once
// mpify::ranch: run one registered function on n processes and gather the results.
#include <mpify/abi.hpp>
#include <mpify/detail/blob.hpp>
#include <mpify/detail/function_traits.hpp>
#include <mpify/export.hpp>
#include <mpify/options.hpp>

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <tuple>
#include <type_traits>
#include <typeinfo>
#include <utility>
#include <vector>

MPIFY_BEGIN_NAMESPACE

/// The default context of a ranch call: nothing around fn.
struct NoContext {};

namespace detail {

/// What the compiled part needs to know about the call; templates fill it in.
struct CallRequest {
    const void* function = nullptr;  ///< address of the registered function
    std::string args;                ///< the serialized arguments, unless they are in shared memory:
    std::shared_ptr<SharedArguments> shared_args;  ///< there when not null (args is empty then)
    std::string context_key;         ///< typeid name of the context, empty for none
    /// Whether the caller's rank can call fn on its arguments again (Options::restarts):
    /// not when one of them can only be moved.
    bool arguments_reusable = true;
};

/// How large a call's serialized arguments may grow before they go into shared memory
/// as they are written (to_arguments_blob): Options::shared_memory_threshold, or SIZE_MAX
/// when no worker of the call would map them (none on this machine).
MPIFY_API std::size_t arguments_spill_size(const Options& options, int n);

/// Validates, spawns, runs `local_call` as the caller's rank (if any), supervises and
/// reaps, and does it all again after a failure while Options::restarts allow.
/// `local_call(last_attempt)` may move the arguments only when `last_attempt` is true.
/// Returns each rank's result blob, indexed by rank (empty for the caller's rank and
/// when results are not gathered). Throws mpify::Error subclasses.
MPIFY_API std::vector<std::string> run_ranch(const Options& options, int n, CallRequest request,
                                             const std::function<void(bool last_attempt)>& local_call);

/// Records that the caller's own fn is failing, now: called where fn throws, before the
/// context's destructor runs (which may break the other ranks' collectives), so that the
/// caller's failure is ordered correctly against the workers'.
MPIFY_API void mark_local_failure() noexcept;

/// Throws WorkerError for `rank` of the call of `function` on `n` ranks, whose result
/// could not be read as `result_type` (a typeid name), with the exception being handled
/// nested. Only for use inside a catch block.
[[noreturn]] MPIFY_API void throw_unreadable_result(const void* function, int n, int rank, const char* result_type);

/// Reads `rank`'s result blob. Whatever goes wrong (bytes missing or left over, a load()
/// that throws) becomes a WorkerError naming the rank, with the original nested.
template <class Result>
Result read_result(std::string_view blob, const void* function, int n, int rank) {
    Result value{};
    try {
        from_blob(blob, value);
    } catch (...) {
        throw_unreadable_result(function, n, rank, typeid(Result).name());
    }
    return value;
}

/// What ranch returns for a function returning R: std::vector<R>, or void.
template <class R>
using ranch_result_t = std::conditional_t<std::is_void_v<R>, void, std::vector<R>>;

/// An argument as its parameter type, for serialization: the argument itself when it has
/// that type already (no copy of a large argument), else a converted temporary.
template <class P, class A>
decltype(auto) as_param(const A& arg) {
    if constexpr (std::is_same_v<std::decay_t<A>, P>) return static_cast<const P&>(arg);
    else return P(arg);
}

/// Calls fn on the caller's arguments: moved from when `may_move` (no attempt follows),
/// else as lvalues, so that a restart finds them whole.
template <class F, class... A>
decltype(auto) call_with_arguments(F fn, bool may_move, A&&... args) {
    if constexpr (std::is_invocable_v<F, std::remove_reference_t<A>&...>) {
        if (!may_move) return fn(args...);
    }
    return fn(std::forward<A>(args)...);
}

/// Runs the caller's own rank: body inside a Ctx (none for NoContext), its failure
/// time-stamped before the context unwinds.
template <class Ctx, class Body>
void with_context(Body&& body) {
    auto stamped = [&] {
        try {
            body();
        } catch (...) {
            mark_local_failure();
            throw;
        }
    };
    if constexpr (std::is_same_v<Ctx, NoContext>) {
        stamped();
    } else {
        [[maybe_unused]] Ctx context;
        stamped();
    }
}

}  // namespace detail

/// Runs `fn(args...)` on `n` processes and returns each rank's result, indexed by rank.
///
/// `fn` must be registered with MPIFY_REGISTER. The caller runs it as rank
/// `options.caller_rank` (default 0; std::nullopt: n new processes); the other ranks
/// are fresh processes, reaped before ranch returns. `Ctx` (registered with
/// MPIFY_REGISTER_CONTEXT) is constructed around fn in every rank. Throws UsageError
/// before spawning anything on bad input, WorkerError / TimeoutError when ranks fail
/// (after stopping and reaping the rest), and rethrows the caller's own exception when
/// fn throws in the caller. A void fn gives a void ranch. After the loss of a machine
/// with Options::min_ranks, the attempt that succeeds may have fewer ranks than n: the
/// result has one element per rank of that attempt.
template <class Ctx = NoContext, class R, class... P, class... A>
detail::ranch_result_t<std::decay_t<R>> ranch(const Options& options, int n, R (*fn)(P...), A&&... args) {
    using F = R (*)(P...);
    using traits = detail::function_traits<F>;
    using Result = typename traits::result;
    detail::check_shippable<F>();
    static_assert(sizeof...(P) == sizeof...(A), "mpify::ranch: the number of arguments does not match fn's parameters");
    static_assert((std::is_convertible_v<A&&, P> && ...),
                  "mpify::ranch: an argument does not convert to the type of fn's parameter");
    static_assert(std::is_default_constructible_v<Ctx>, "mpify::ranch: the context type must be default-constructible");

    // The arguments are written as fn's parameter types, so the worker reads exactly those.
    detail::CallRequest request;
    const void* const request_function = reinterpret_cast<const void*>(fn);
    request.function = request_function;
    request.args = detail::to_arguments_blob(detail::arguments_spill_size(options, n), request.shared_args,
                                             detail::as_param<std::decay_t<P>>(args)...);
    if constexpr (!std::is_same_v<Ctx, NoContext>) {
        request.context_key = typeid(Ctx).name();
    }
    request.arguments_reusable = std::is_invocable_v<F, std::remove_reference_t<A>&...>;

    if constexpr (std::is_void_v<Result>) {
        detail::run_ranch(options, n, std::move(request), [&](bool last_attempt) {
            detail::with_context<Ctx>([&] { detail::call_with_arguments(fn, last_attempt, std::forward<A>(args)...); });
        });
    } else {
        std::optional<Result> own;
        const std::vector<std::string> blobs =
            detail::run_ranch(options, n, std::move(request), [&](bool last_attempt) {
                detail::with_context<Ctx>([&] {
                    own.emplace(detail::call_with_arguments(fn, last_attempt, std::forward<A>(args)...));
                });
            });
        std::vector<Result> results;
        if (!options.gather) {
            if (own) results.push_back(std::move(*own));
            return results;
        }
        // One per rank of the attempt that succeeded: fewer than n after a machine was lost
        // (Options::min_ranks).
        const int ranks = static_cast<int>(blobs.size());
        results.reserve(blobs.size());
        for (int rank = 0; rank < ranks; ++rank) {
            if (options.caller_rank == rank) {
                results.push_back(std::move(*own));
            } else {
                results.push_back(detail::read_result<Result>(blobs[static_cast<std::size_t>(rank)], request_function,
                                                              n, rank));
            }
        }
        return results;
    }
}

/// ranch with default Options: the caller is rank 0, every result is gathered.
template <class Ctx = NoContext, class R, class... P, class... A>
detail::ranch_result_t<std::decay_t<R>> ranch(int n, R (*fn)(P...), A&&... args) {
    return ranch<Ctx>(Options{}, n, fn, std::forward<A>(args)...);
}

MPIFY_END_NAMESPACE
