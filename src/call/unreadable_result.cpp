// A result that arrived but cannot be read: a WorkerError naming the rank, so that a
// caller catching mpify::Error learns which rank and why, with Boost's (or load()'s) own
// exception nested for whoever wants it.
#include "call/call_plan.hpp"
#include "common/demangle.hpp"

#include <mpify/error.hpp>
#include <mpify/ranch.hpp>

#include <exception>
#include <string>

MPIFY_BEGIN_DETAIL_NAMESPACE

void throw_unreadable_result(const void* function, int n, int rank, const char* result_type) {
    RankFailure failure;
    failure.rank = rank;
    failure.kind = RankFailure::Kind::unreadable_result;
    const std::string what = current_exception_message();
    failure.message = "reading it as " + demangle(result_type) + " failed with " + current_exception_type() +
                      (what.empty() ? "" : ": " + what) +
                      ". Either the worker and the caller disagree about this type (built from different "
                      "versions of its serialize()?), or its load() threw.";
    std::throw_with_nested(WorkerError(call_label(function, n), {std::move(failure)}));
}

MPIFY_END_DETAIL_NAMESPACE
