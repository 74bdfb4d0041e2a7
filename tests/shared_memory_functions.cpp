// Functions the tests of mpify's shared-memory group run in every rank of an in_ddp
// call (compiled into the test-functions library, declared in ddp_functions.hpp).
#include "ddp_functions.hpp"
#include "support.hpp"

#include <mpify/torch.hpp>

#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>
#include <torch/torch.h>

#include <signal.h>

#include <chrono>
#include <cstdlib>
#include <sstream>
#include <stdexcept>

namespace ddp_test {
namespace {

// Rank r's values for a collective: small whole numbers (1 to 7 + r), never zero, the
// same for every rank that asks, so each rank knows what every other one sends.
at::Tensor values_of(int rank, at::ScalarType type, std::int64_t count) {
    return ((at::arange(count, at::kLong) * (rank + 2)) % 7 + rank + 1).to(type);
}

// What `op` over every rank's values_of gives, computed here with plain ATen.
at::Tensor reduced(c10d::ReduceOp op, at::ScalarType type, std::int64_t count, int world) {
    at::Tensor out = values_of(0, type, count);
    for (int r = 1; r < world; ++r) {
        const at::Tensor v = values_of(r, type, count);
        switch (op) {
            case c10d::ReduceOp::SUM:
            case c10d::ReduceOp::AVG: out = out + v; break;
            case c10d::ReduceOp::PRODUCT: out = out * v; break;
            case c10d::ReduceOp::MIN: out = at::minimum(out, v); break;
            case c10d::ReduceOp::MAX: out = at::maximum(out, v); break;
            case c10d::ReduceOp::BAND: out = at::bitwise_and(out, v); break;
            case c10d::ReduceOp::BOR: out = at::bitwise_or(out, v); break;
            case c10d::ReduceOp::BXOR: out = at::bitwise_xor(out, v); break;
            default: throw std::logic_error("no reference for this op");
        }
    }
    return op == c10d::ReduceOp::AVG ? out / world : out;
}

class Findings {
public:
    void expect(const std::string& what, const at::Tensor& got, const at::Tensor& want) {
        const bool same = got.scalar_type() == want.scalar_type() && got.sizes() == want.sizes() &&
                          (got.is_floating_point() ? at::allclose(got, want) : at::equal(got, want));
        if (!same) wrong_.push_back(what);
    }
    void expect(const std::string& what, bool holds) {
        if (!holds) wrong_.push_back(what);
    }
    // Rank 0 returns what it found; another rank that found anything throws it, so that
    // in_ddp fails naming that rank.
    std::vector<std::string> result() const {
        if (mpify::ddp::rank() != 0 && !wrong_.empty()) {
            std::ostringstream text;
            for (const std::string& w : wrong_) text << w << "; ";
            throw std::runtime_error("wrong on rank " + std::to_string(mpify::ddp::rank()) + ": " + text.str());
        }
        return wrong_;
    }

private:
    std::vector<std::string> wrong_;
};

const char* op_name(c10d::ReduceOp op) {
    switch (op) {
        case c10d::ReduceOp::SUM: return "sum";
        case c10d::ReduceOp::AVG: return "avg";
        case c10d::ReduceOp::PRODUCT: return "product";
        case c10d::ReduceOp::MIN: return "min";
        case c10d::ReduceOp::MAX: return "max";
        case c10d::ReduceOp::BAND: return "band";
        case c10d::ReduceOp::BOR: return "bor";
        case c10d::ReduceOp::BXOR: return "bxor";
        default: return "?";
    }
}

}  // namespace

std::string group_backend_name() { return mpify::ddp::process_group()->getBackendName(); }
MPIFY_REGISTER(group_backend_name);

std::vector<std::string> collectives_wrong_on_this_rank() {
    const int rank = mpify::ddp::rank(), world = mpify::ddp::world_size();
    const auto group = mpify::ddp::process_group();
    Findings findings;
    findings.expect("backend " + group->getBackendName(), group->getBackendName() == "mpify-shared-memory");

    // Every reduce op on the types it applies to, at two sizes (shares of unequal size):
    // 1001 elements, a few KiB, and 20001.
    const std::vector<c10d::ReduceOp> arithmetic{c10d::ReduceOp::SUM, c10d::ReduceOp::PRODUCT, c10d::ReduceOp::MIN,
                                                 c10d::ReduceOp::MAX};
    const std::vector<c10d::ReduceOp> bitwise{c10d::ReduceOp::BAND, c10d::ReduceOp::BOR, c10d::ReduceOp::BXOR};
    for (std::int64_t count : {1001, 20001}) {
        for (at::ScalarType type : {at::kFloat, at::kDouble, at::kLong, at::kInt, at::kByte}) {
            std::vector<c10d::ReduceOp> ops = arithmetic;
            if (at::isIntegralType(type, false)) ops.insert(ops.end(), bitwise.begin(), bitwise.end());
            if (at::isFloatingType(type)) ops.push_back(c10d::ReduceOp::AVG);
            for (c10d::ReduceOp op : ops) {
                at::Tensor t = values_of(rank, type, count);
                mpify::ddp::all_reduce(t, op);
                findings.expect(std::string("allreduce ") + op_name(op) + " of " + std::to_string(count) + " x " +
                                    c10::toString(type),
                                t, reduced(op, type, count, world));
            }
        }
    }
    // Small all-reduces in a row, each of values of its own, now and then a larger one or a
    // broadcast between them: each gets its own sums, none an earlier one's.
    for (int step = 0; step < 40; ++step) {
        at::Tensor t = values_of(rank, at::kLong, 64) + step;
        mpify::ddp::all_reduce(t);
        findings.expect("small allreduce " + std::to_string(step) + " of a row", t,
                        reduced(c10d::ReduceOp::SUM, at::kLong, 64, world) + step * world);
        if (step % 7 == 3) {
            at::Tensor large_one = values_of(rank, at::kDouble, 5000);
            mpify::ddp::all_reduce(large_one);
            findings.expect("large allreduce after small " + std::to_string(step), large_one,
                            reduced(c10d::ReduceOp::SUM, at::kDouble, 5000, world));
        }
        if (step % 11 == 5) {
            at::Tensor from_last = values_of(rank, at::kInt, 16);
            mpify::ddp::broadcast(from_last, world - 1);
            findings.expect("broadcast after small " + std::to_string(step), from_last,
                            values_of(world - 1, at::kInt, 16));
        }
    }
    // More than a slot of shared memory (4 MiB): it goes through in chunks, the last one
    // shorter (its shares lie elsewhere than the full chunks' ones).
    const std::int64_t large_count = (3 << 20) + 777;
    at::Tensor large = values_of(rank, at::kFloat, large_count);
    mpify::ddp::all_reduce(large);
    findings.expect("allreduce of 12 MiB and a bit", large,
                    reduced(c10d::ReduceOp::SUM, at::kFloat, large_count, world));
    // A transposed view: not one run of bytes; the result lands in the view.
    at::Tensor matrix = values_of(rank, at::kFloat, 600).view({20, 30}).t();
    mpify::ddp::all_reduce(matrix);
    findings.expect("allreduce of a transposed view", matrix,
                    reduced(c10d::ReduceOp::SUM, at::kFloat, 600, world).view({20, 30}).t());
    at::Tensor empty = torch::empty({0});
    mpify::ddp::all_reduce(empty);
    findings.expect("allreduce of no elements", empty.numel() == 0);

    // Broadcast from the last rank, 5 MiB (pieces again), and a small one from rank 0.
    const int root = world - 1;
    at::Tensor sent = values_of(rank, at::kFloat, 5 << 18);
    mpify::ddp::broadcast(sent, root);
    findings.expect("broadcast from the last rank", sent, values_of(root, at::kFloat, 5 << 18));
    at::Tensor flag = torch::tensor({rank * 10 + 1});
    mpify::ddp::broadcast(flag, 0);
    findings.expect("broadcast from rank 0", flag, torch::tensor({1}));

    // Allgather: every rank's values in every rank's list.
    std::vector<std::vector<at::Tensor>> gathered(1);
    for (int r = 0; r < world; ++r) gathered[0].push_back(torch::zeros({1000}, at::kDouble));
    std::vector<at::Tensor> mine{values_of(rank, at::kDouble, 1000)};
    // Waited for with a bound (Work::wait(timeout)): true once it ended.
    findings.expect("allgather's wait with a bound", group->allgather(gathered, mine)->wait(std::chrono::minutes(1)));
    for (int r = 0; r < world; ++r)
        findings.expect("allgather's entry of rank " + std::to_string(r), gathered[0][r],
                        values_of(r, at::kDouble, 1000));
    mpify::ddp::barrier();

    // A call the shared memory does not serve goes to Gloo, formed here; the shared
    // memory serves the calls after it as before.
    std::vector<at::Tensor> to_root{values_of(rank, at::kLong, 100)};
    c10d::ReduceOptions to_rank_0;
    group->reduce(to_root, to_rank_0)->wait();
    if (rank == 0)
        findings.expect("reduce to rank 0 (through Gloo)", to_root[0],
                        reduced(c10d::ReduceOp::SUM, at::kLong, 100, world));
    at::Tensor after = values_of(rank, at::kInt, 10);
    mpify::ddp::all_reduce(after, c10d::ReduceOp::MAX);
    findings.expect("allreduce after Gloo's reduce", after, reduced(c10d::ReduceOp::MAX, at::kInt, 10, world));
    return findings.result();
}
MPIFY_REGISTER(collectives_wrong_on_this_rank);

std::string mismatched_all_reduce() {
    at::Tensor t = torch::ones({mpify::ddp::rank() == 0 ? 4 : 8});
    std::string said = "no error";
    try {
        mpify::ddp::all_reduce(t);
    } catch (const std::exception& e) {
        said = e.what();
    }
    try {
        mpify::ddp::barrier();  // the group is failed now: this fails at once too
        said += " | the barrier after it passed";
    } catch (const std::exception& e) {
        said += std::string(" | ") + e.what();
    }
    if (mpify::ddp::rank() != 0 && said.find("called different collectives") == std::string::npos)
        throw std::runtime_error("rank " + std::to_string(mpify::ddp::rank()) + " was told: " + said);
    return said;
}
MPIFY_REGISTER(mismatched_all_reduce);

std::vector<int> threads_as_collectives_go() {
    const std::string group_thread = "mpify-shm-group";  // the name the group gives its thread
    const int world = mpify::ddp::world_size();
    const int at_start = mpify_test::threads_named(group_thread);
    at::Tensor helped = torch::ones({4});
    mpify::ddp::all_reduce(helped);
    mpify::ddp::barrier();
    mpify::ddp::broadcast(helped, 0);
    const int after_helpers = mpify_test::threads_named(group_thread);
    // Started and waited for later, as DDP's buckets are; an all-reduce called meanwhile
    // queues behind it.
    std::vector<at::Tensor> started{torch::full({4}, 2.0)};
    const c10::intrusive_ptr<c10d::Work> work = mpify::ddp::process_group()->allreduce(started);
    at::Tensor behind = torch::full({4}, 3.0);
    mpify::ddp::all_reduce(behind);
    work->wait();
    const int after_started = mpify_test::threads_named(group_thread);
    const bool right = helped.eq(world).all().item<bool>() && started[0].eq(2.0 * world).all().item<bool>() &&
                       behind.eq(3.0 * world).all().item<bool>();
    const std::vector<int> counts{at_start, after_helpers, after_started, right ? 1 : 0};
    if (mpify::ddp::rank() != 0 && counts != std::vector<int>{0, 0, 1, 1})
        throw std::runtime_error("group threads at the start " + std::to_string(at_start) + ", after the helpers " +
                                 std::to_string(after_helpers) + ", after the started all-reduce " +
                                 std::to_string(after_started) + (right ? "" : "; wrong results"));
    return counts;
}
MPIFY_REGISTER(threads_as_collectives_go);

std::string backend_after_a_rank_refused_the_segment(int refusing) {
    // Where in_ddp's caller said the group's shared memory is (its variable, set by
    // with_rendezvous); empty when the caller made none.
    const char* const segment_var = "MPIFY_DDP_SEGMENT";
    const char* said = std::getenv(segment_var);
    if (said == nullptr || *said == '\0')
        throw std::runtime_error("rank " + std::to_string(mpify::local_rank()) +
                                 ": the caller made no shared memory for the group");
    if (mpify::local_rank() == refusing) ::setenv(segment_var, "0 0 0 0 0 0", 1);  // /proc/0/fd/0: not there
    mpify::DdpGuard guard;
    at::Tensor one = torch::ones({1});
    mpify::ddp::all_reduce(one);
    return group_backend_name() + " " + std::to_string(one.item<int>());
}
MPIFY_REGISTER(backend_after_a_rank_refused_the_segment);

}  // namespace ddp_test
