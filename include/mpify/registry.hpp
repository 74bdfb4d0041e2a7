#pragma once
// MPIFY_REGISTER: makes a function callable on fresh processes, by name.
//
// A worker is a new process: it cannot receive a function pointer, only a name. The
// registration, run by a static initializer of the program or shared library that
// defines the function, maps that name to an invoker that reads the arguments from a
// blob, calls the function and writes the result to a blob. The same initializer runs
// in the worker (same executable, or same library loaded by mpify-worker), so the name
// resolves there too.
#include <mpify/abi.hpp>
#include <mpify/detail/blob.hpp>
#include <mpify/detail/function_traits.hpp>
#include <mpify/export.hpp>

#include <string>
#include <string_view>
#include <typeinfo>
#include <utility>

MPIFY_BEGIN_NAMESPACE
namespace detail {

/// Reads the arguments, calls the function, returns its result as a blob (empty when
/// the function returns void or when the caller does not want results).
using Invoker = std::string (*)(std::string_view args, bool want_result);

/// Runs `body(data)` inside a freshly constructed context object.
using ContextRunner = void (*)(void (*body)(void*), void* data);

/// Records `name` -> (address, invoker, signature); a second registration of the same
/// address is ignored. `signature` is typeid(F*).name(): a caller and a worker built from
/// different versions of the function compare it before the worker runs anything.
MPIFY_API void register_function(const char* name, const void* address, Invoker invoker,
                                 const char* signature) noexcept;
/// Forgets the function at `address` (its library is being unloaded).
MPIFY_API void unregister_function(const void* address) noexcept;
/// Records a context type under its typeid name; `name` is how messages call it.
MPIFY_API void register_context(const char* type_key, const char* name, ContextRunner runner) noexcept;
/// Forgets the context type (its library is being unloaded).
MPIFY_API void unregister_context(const char* type_key) noexcept;
/// True if a context with this key (typeid name) was registered in this process.
MPIFY_API bool context_registered(const char* type_key) noexcept;

/// The Invoker of function `Fn`: reads its parameters from `args`, calls it, and returns
/// its result as a blob (empty for void, or when the caller wants no result).
template <auto Fn>
std::string invoke_registered(std::string_view args, bool want_result) {
    using traits = function_traits<decltype(Fn)>;
    typename traits::params params{};
    std::apply([&](auto&... p) { from_blob(args, p...); }, params);
    if constexpr (std::is_void_v<typename traits::result>) {
        std::apply(Fn, std::move(params));
        return {};
    } else {
        auto result = std::apply(Fn, std::move(params));
        return want_result ? to_blob(result) : std::string{};
    }
}

/// The ContextRunner of `Ctx`: constructs one, runs the body, destroys it (also on throw).
template <class Ctx>
void run_in_context(void (*body)(void*), void* data) {
    [[maybe_unused]] Ctx context;
    body(data);
}

// Registers at static initialization and unregisters when its shared object is
// unloaded, so a library rebuilt and loaded again replaces its old entries.
class FunctionRegistrar {
public:
    template <class F>
    FunctionRegistrar(const char* name, F* function, Invoker invoker) noexcept
        : address_(reinterpret_cast<const void*>(function)) {
        check_shippable<F*>();
        register_function(name, address_, invoker, typeid(F*).name());
    }
    ~FunctionRegistrar() { unregister_function(address_); }
    FunctionRegistrar(const FunctionRegistrar&) = delete;
    FunctionRegistrar& operator=(const FunctionRegistrar&) = delete;

private:
    const void* address_;
};

/// What MPIFY_REGISTER_CONTEXT declares: registers `Ctx` for the life of its object file.
template <class Ctx>
class ContextRegistrar {
public:
    explicit ContextRegistrar(const char* name) noexcept {
        register_context(typeid(Ctx).name(), name, &run_in_context<Ctx>);
    }
    ~ContextRegistrar() { unregister_context(typeid(Ctx).name()); }
    ContextRegistrar(const ContextRegistrar&) = delete;
    ContextRegistrar& operator=(const ContextRegistrar&) = delete;
};

}  // namespace detail
MPIFY_END_NAMESPACE

#define MPIFY_DETAIL_CONCAT2(a, b) a##b
#define MPIFY_DETAIL_CONCAT(a, b) MPIFY_DETAIL_CONCAT2(a, b)

/// Registers `fn` (a function name, possibly qualified: `MPIFY_REGISTER(ns::train);`)
/// so that mpify::ranch can run it on other processes. Write it at namespace scope in
/// the same program or shared library that defines the function. Its parameters and
/// result must be Boost-serializable and default-constructible; non-const lvalue
/// reference parameters are rejected at compile time.
#define MPIFY_REGISTER(fn)                                                                                       \
    static const ::mpify::detail::FunctionRegistrar MPIFY_DETAIL_CONCAT(mpify_function_registrar_, __COUNTER__)( \
        #fn, &fn, &::mpify::detail::invoke_registered<&fn>)

/// Registers a context type (default-constructible; constructed before fn and destroyed
/// after it in every rank, also when fn throws), for `mpify::ranch<Ctx>(...)`. Write it
/// at namespace scope in the program or library that workers load.
#define MPIFY_REGISTER_CONTEXT(Ctx) \
    static const ::mpify::detail::ContextRegistrar<Ctx> MPIFY_DETAIL_CONCAT(mpify_context_registrar_, __COUNTER__)(#Ctx)
