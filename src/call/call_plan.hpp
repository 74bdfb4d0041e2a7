#pragma once
// What one ranch call is, found and checked before anything starts: the registered
// function, its context, and how its workers are started.
#include <mpify/options.hpp>
#include <mpify/ranch.hpp>

#include <string>

MPIFY_BEGIN_DETAIL_NAMESPACE

struct CallPlan {
    int n = 1;                      ///< ranks in the call
    const void* function = nullptr; ///< address of the registered function
    std::string function_name;      ///< its registered name
    std::string function_signature;  ///< its type, as registered here (typeid(F*).name())
    std::string context_key;        ///< typeid name of the context, empty for none
    std::string context_library;    ///< the shared object that registered it; empty: the program
    std::string label;              ///< "mpify::ranch(train, n=4)", the start of every message
    Spawner spawner = Spawner::warm_template;  ///< after MPIFY_SPAWNER
};

/// "mpify::ranch(train, n=4)": how messages about a call of `function` through `api`
/// start.
std::string call_label(const void* function, int n, const char* api = "mpify::ranch");

/// Why the function at `address` cannot be called: it is not registered (and what to add).
std::string unregistered_message(const void* address);

/// Why `function_name`, in the program itself, cannot run on other machines (and where
/// to put it), for the messages of `label`.
std::string not_on_other_machines_message(const std::string& label, const std::string& function_name);

/// Checks the options and the request and looks the function up. Throws UsageError,
/// naming what is wrong and what to do, before anything is spawned.
CallPlan plan_call(const Options& options, int n, const CallRequest& request);

MPIFY_END_DETAIL_NAMESPACE
