#include "ddp_functions.hpp"
#include "functions.hpp"
#include "support.hpp"

#include <mpify/torch.hpp>

#include <c10/core/CPUAllocator.h>
#include <torch/torch.h>
#include <torch/version.h>

#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <set>
#include <iostream>
#include <sstream>
#include <stdexcept>
#include <thread>

namespace ddp_test {

/// A small model whose training on n ranks must match one process exactly.
struct Mlp : torch::nn::Module {
    Mlp();
    at::Tensor forward(const at::Tensor& x);
    torch::nn::Linear first{nullptr}, second{nullptr};
};

Mlp::Mlp() {
    first = register_module("first", torch::nn::Linear(6, 8));
    second = register_module("second", torch::nn::Linear(8, 1));
}

at::Tensor Mlp::forward(const at::Tensor& x) { return second(torch::tanh(first(x))); }

std::pair<at::Tensor, at::Tensor> equivalence_data() {
    torch::manual_seed(1234);
    const at::Tensor x = torch::randn({60, 6});  // splits evenly over 1 to 6 ranks
    const at::Tensor y = torch::randn({60, 1});
    return {x, y};
}

namespace {

std::vector<at::Tensor> copies(const std::vector<at::Tensor>& parameters) {
    std::vector<at::Tensor> out;
    for (const at::Tensor& p : parameters) out.push_back(p.detach().clone());
    return out;
}

}  // namespace

std::vector<at::Tensor> train_mlp_single(const TrainSpec& spec) {
    torch::manual_seed(0);
    auto model = std::make_shared<Mlp>();
    auto [x, y] = equivalence_data();
    torch::optim::SGD optimizer(model->parameters(), torch::optim::SGDOptions(0.1));
    for (int step = 0; step < spec.steps; ++step) {
        optimizer.zero_grad();
        torch::mse_loss(model->forward(x), y).backward();
        optimizer.step();
    }
    return copies(model->parameters());
}

std::int64_t allreduce_rank() {
    at::Tensor t = torch::tensor(static_cast<std::int64_t>(mpify::ddp::rank()));
    mpify::ddp::all_reduce(t);
    return t.item<std::int64_t>();
}
MPIFY_REGISTER(allreduce_rank);

std::string device_of_rank() { return mpify::ddp::device().str(); }
MPIFY_REGISTER(device_of_rank);

int libtorch_files_checked(std::string expected_folder) {
    namespace fs = std::filesystem;
    const fs::path expected = fs::canonical(expected_folder);
    std::ifstream maps("/proc/self/maps");
    std::set<std::string> seen;
    for (std::string line; std::getline(maps, line);) {
        const std::size_t slash = line.find('/');
        if (slash == std::string::npos) continue;
        const fs::path file = line.substr(slash);
        const std::string name = file.filename().string();
        if (!seen.insert(file.string()).second) continue;
        const bool libtorch = name.rfind("libtorch", 0) == 0 || name.rfind("libc10", 0) == 0;
        if (libtorch && fs::canonical(file).parent_path() != expected)
            throw std::runtime_error("rank " + std::to_string(mpify::ddp::rank()) + " loaded " + file.string() +
                                     ", not from " + expected.string());
#if TORCH_VERSION_MAJOR >= 2
        // Gloo is inside libtorch_cpu.so: a second one (Debian's) must never join it.
        if (name.rfind("libgloo", 0) == 0)
            throw std::runtime_error("rank " + std::to_string(mpify::ddp::rank()) + " loaded " + file.string());
#endif
    }
    mpify::ddp::barrier();  // the group formed and works
    return static_cast<int>(seen.size());
}
MPIFY_REGISTER(libtorch_files_checked);

std::int64_t allreduce_after_restarts(int dying_rank, int failed_attempts) {
    at::Tensor first = torch::tensor(std::int64_t{1});
    mpify::ddp::all_reduce(first);  // the group works, then loses a rank
    if (mpify::restart_count() < failed_attempts && mpify::ddp::rank() == dying_rank) ::raise(SIGKILL);
    at::Tensor t = torch::tensor(static_cast<std::int64_t>(mpify::ddp::rank() + 1000 * mpify::restart_count()));
    mpify::ddp::all_reduce(t);
    return t.item<std::int64_t>();
}
MPIFY_REGISTER(allreduce_after_restarts);

std::string wait_for_a_lost_machine() {
    at::Tensor check = torch::tensor(std::int64_t{1});
    mpify::ddp::all_reduce(check);  // the group works
    if (mpify::restart_count() == 0) {
        std::cout << "rank " << mpify::ddp::rank() << " of " << mpify::ddp::world_size() << " waits" << std::endl;
        if (mpify::ddp::rank() != 0) {
            for (;;) ::pause();  // until stopped: rank 0 waits for it in a collective
        }
        mpify::ddp::all_reduce(check);
        return "the first attempt ended";
    }
    at::Tensor t = torch::tensor(static_cast<std::int64_t>(mpify::ddp::rank() + 1));
    mpify::ddp::all_reduce(t);
    return "world " + std::to_string(mpify::ddp::world_size()) + " sum " + std::to_string(t.item<std::int64_t>()) +
           " restart " + std::to_string(mpify::restart_count());
}
MPIFY_REGISTER(wait_for_a_lost_machine);

TrainResult train_mlp(TrainSpec spec) {
    torch::manual_seed(100 + mpify::ddp::rank());  // different on purpose: DDP copies rank 0's
    auto model = std::make_shared<Mlp>();
    if (mpify::ddp::rank() == 0) {
        torch::manual_seed(0);
        model = std::make_shared<Mlp>();  // the reference's initial parameters
    }
    mpify::DdpModelOptions options;
    options.bucket_bytes = static_cast<std::size_t>(spec.bucket_bytes);
    if (spec.hook == "bf16") options.communication_hook = mpify::bf16_compress_hook();
    else if (spec.hook == "fp16") options.communication_hook = mpify::fp16_compress_hook();
    mpify::DistributedDataParallel ddp_model(model, options);
    auto [x, y] = equivalence_data();
    const std::int64_t per_rank = x.size(0) / mpify::ddp::world_size();
    const at::Tensor my_x = x.narrow(0, mpify::ddp::rank() * per_rank, per_rank);
    const at::Tensor my_y = y.narrow(0, mpify::ddp::rank() * per_rank, per_rank);
    const std::int64_t micro = per_rank / spec.micro_batches;
    torch::optim::SGD optimizer(ddp_model.parameters(), torch::optim::SGDOptions(0.1));
    std::uint64_t before_last_step = 0;
    for (int step = 0; step < spec.steps; ++step) {
        const auto calls = mpify::ddp::recorded_calls();
        before_last_step = calls.empty() ? 0 : calls.back().sequence;
        optimizer.zero_grad();
        for (int m = 0; m < spec.micro_batches; ++m) {
            const at::Tensor bx = my_x.narrow(0, m * micro, micro);
            const at::Tensor by = my_y.narrow(0, m * micro, micro);
            const at::Tensor loss = torch::mse_loss(ddp_model(bx), by) / spec.micro_batches;
            if (m + 1 < spec.micro_batches) {
                auto local_only = ddp_model.no_sync();
                loss.backward();
            } else {
                loss.backward();
            }
        }
        optimizer.step();
    }
    TrainResult result;
    for (const mpify::CollectiveCall& call : mpify::ddp::recorded_calls())
        if (call.sequence > before_last_step &&
            (call.bucket >= 0 || call.site.find("compress_hook") != std::string::npos))
            result.gradient_bytes += static_cast<std::int64_t>(call.bytes);
    result.parameters = copies(model->parameters());
    result.buckets = static_cast<std::int64_t>(ddp_model.reducer().bucket_count());
    result.sent_during_backward = static_cast<std::int64_t>(ddp_model.reducer().buckets_sent_during_backward());
    return result;
}
MPIFY_REGISTER(train_mlp);

namespace {
struct PartlyUsed : torch::nn::Module {
    PartlyUsed() {
        used = register_module("used", torch::nn::Linear(4, 1));
        rank0_only = register_module("rank0_only", torch::nn::Linear(4, 1));
        never = register_module("never", torch::nn::Linear(4, 1));
    }
    at::Tensor forward(const at::Tensor& x) {
        at::Tensor out = used(x);
        if (mpify::ddp::rank() == 0) out = out + rank0_only(x);
        return out;
    }
    torch::nn::Linear used{nullptr}, rank0_only{nullptr}, never{nullptr};
};
}  // namespace

bool unused_parameters_stay_consistent() {
    auto model = std::make_shared<PartlyUsed>();
    mpify::DdpModelOptions options;
    options.bucket_bytes = 64;
    mpify::DistributedDataParallel ddp_model(model, options);
    torch::optim::SGD optimizer(ddp_model.parameters(), torch::optim::SGDOptions(0.1));
    for (int step = 0; step < 3; ++step) {
        optimizer.zero_grad();
        ddp_model(torch::randn({5, 4})).sum().backward();
        optimizer.step();
    }
    // Identical on every rank: max and min over ranks agree, parameter by parameter.
    bool identical = true;
    for (const at::Tensor& p : model->parameters()) {
        at::Tensor high = p.detach().clone(), low = p.detach().clone();
        mpify::ddp::all_reduce(high, c10d::ReduceOp::MAX);
        mpify::ddp::all_reduce(low, c10d::ReduceOp::MIN);
        identical = identical && at::equal(high, low);
    }
    const bool never_touched = !model->never->weight.grad().defined();
    const bool rank0_only_averaged = model->rank0_only->weight.grad().defined();
    return identical && never_touched && rank0_only_averaged;
}
MPIFY_REGISTER(unused_parameters_stay_consistent);

std::string rank0_first_cache(std::string dir) {
    const std::string cache = dir + "/cache.txt";
    std::string seen;
    mpify::ddp::rank0_first([&] {
        if (mpify::ddp::rank() == 0) {
            std::ofstream(cache) << "filled by rank 0";
            return;
        }
        std::ifstream in(cache);
        if (!in) throw std::runtime_error("rank " + std::to_string(mpify::ddp::rank()) + " found no cache");
        std::getline(in, seen);
    });
    // Every other rank saw rank 0's file; rank 0 reports what the others saw.
    at::Tensor ok = torch::tensor(mpify::ddp::rank() == 0 || seen == "filled by rank 0" ? 1 : 0);
    mpify::ddp::all_reduce(ok, c10d::ReduceOp::MIN);
    return ok.item<int>() == 1 ? "all ranks saw rank 0's cache" : "some rank did not";
}
MPIFY_REGISTER(rank0_first_cache);

int fail_mid_training(int failing_rank) {
    for (int step = 0; step < 1000; ++step) {
        if (step == 3 && mpify::ddp::rank() == failing_rank)
            throw std::runtime_error("diverged at step 3 on rank " + std::to_string(failing_rank));
        at::Tensor t = torch::ones({4});
        mpify::ddp::all_reduce(t);
    }
    return 0;
}
MPIFY_REGISTER(fail_mid_training);

std::int64_t noop_in_group() { return mpify::ddp::world_size(); }
MPIFY_REGISTER(noop_in_group);

std::vector<int> caller_helper_threads() {
    return {mpify_test::threads_named("mpify-store"), mpify_test::threads_named("mpify-watcher")};
}
MPIFY_REGISTER(caller_helper_threads);

bool group_is_active() { return mpify::ddp::active(); }
MPIFY_REGISTER(group_is_active);

std::int64_t ranks_caching_tensor_memory() {
    const bool caching = c10::GetCPUAllocator() != c10::GetDefaultCPUAllocator();
    at::Tensor count = torch::full({1}, caching ? 1 : 0, torch::kLong);
    mpify::ddp::all_reduce(count);
    return count.item<std::int64_t>();
}
MPIFY_REGISTER(ranks_caching_tensor_memory);

std::string nested_guard() {
    try {
        mpify::DdpGuard inner;
        return "a nested guard was allowed";
    } catch (const mpify::UsageError& e) {
        return e.what();
    }
}
MPIFY_REGISTER(nested_guard);

namespace {
bool write_fails_with_epipe(int fd) {
    const char byte = 0;
    return ::write(fd, &byte, 1) < 0 && errno == EPIPE;
}
}  // namespace

bool broken_pipe_writes_fail_with_epipe() {
    int fds[2];
    if (::pipe2(fds, O_CLOEXEC) != 0) return false;
    ::close(fds[0]);
    bool from_thread = false;
    std::thread writer([&] { from_thread = write_fails_with_epipe(fds[1]); });
    writer.join();
    const bool from_here = write_fails_with_epipe(fds[1]);
    ::close(fds[1]);
    return from_thread && from_here;
}
MPIFY_REGISTER(broken_pipe_writes_fail_with_epipe);

int die_during_large_allreduces(int dying_rank) {
    at::Tensor t = torch::ones({8 << 20});  // 32 MiB of floats
    for (int step = 0; step < 50; ++step) {
        if (step == 2 && mpify::ddp::rank() == dying_rank) ::raise(SIGKILL);
        mpify::ddp::all_reduce(t);
    }
    return 0;
}
MPIFY_REGISTER(die_during_large_allreduces);

int train_until_killed(int dying_rank, int dying_step) {
    at::Tensor gradient = torch::ones({256 << 10});
    for (int step = 0; step < 20; ++step) {
        if (step == dying_step && mpify::ddp::rank() == dying_rank) ::raise(SIGKILL);
        mpify::ddp::all_reduce(gradient);
        gradient.fill_(1.0);
    }
    return 0;
}
MPIFY_REGISTER(train_until_killed);

std::string torchrun_variables() {
    auto get = [](const char* name) -> std::string {
        const char* v = std::getenv(name);
        return v ? v : "";
    };
    auto number = [&](const char* name) { return get(name).empty() ? -1 : std::stoi(get(name)); };
    // Each rank checks its own: torchrun's names agree with the group it is in.
    const bool consistent = number("RANK") == mpify::ddp::rank() && number("WORLD_SIZE") == mpify::ddp::world_size() &&
                            number("GROUP_RANK") * number("LOCAL_WORLD_SIZE") + number("LOCAL_RANK") ==
                                number("RANK") &&
                            !get("MASTER_ADDR").empty() && number("MASTER_PORT") > 0;
    at::Tensor count = torch::tensor(static_cast<std::int64_t>(consistent));
    mpify::ddp::all_reduce(count);
    std::string text = std::to_string(count.item<std::int64_t>()) + " of " + std::to_string(mpify::ddp::world_size()) +
                       " ranks consistent; rank 0:";
    for (const char* name :
         {"RANK", "LOCAL_RANK", "GROUP_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT"})
        text += std::string(" ") + name + "=" + get(name);
    return text;
}
MPIFY_REGISTER(torchrun_variables);

int allreduce_until_stopped() {
    at::Tensor gradient = torch::ones({256 << 10});
    const auto give_up = std::chrono::steady_clock::now() + std::chrono::minutes(5);
    for (int step = 0; std::chrono::steady_clock::now() < give_up; ++step) {
        mpify::ddp::all_reduce(gradient);
        gradient.fill_(1.0);
        if (step == 0 && mpify::ddp::rank() == 0) std::cout << "training" << std::endl;
    }
    return 0;
}
MPIFY_REGISTER(allreduce_until_stopped);

int all_reduce_beside_a_silent_rank(int silent_rank) {
    if (mpify::ddp::rank() == silent_rank) {
        std::cout << "silent" << std::endl;
        for (;;) ::pause();  // until it is stopped
    }
    at::Tensor t = torch::ones({256 * 1024});
    mpify::ddp::all_reduce(t);  // its send waits for the silent rank's receive
    return mpify::ddp::rank();
}
MPIFY_REGISTER(all_reduce_beside_a_silent_rank);

int join_group_of(int world_size, int port) {
    if (mpify::local_rank() != 0) std::cout << "joining" << std::endl;
    mpify::DdpOptions options;
    options.world_size = world_size;
    options.port = port;
    options.timeout = std::chrono::minutes(1);
    const mpify::DdpGuard guard(options);  // rank 0 hosts the store, as under torchrun
    return guard.rank();
}
MPIFY_REGISTER(join_group_of);

std::vector<std::string> listening_addresses() {
    // The sockets this process has open, by inode ...
    std::set<std::string> mine;
    for (const auto& entry : std::filesystem::directory_iterator("/proc/self/fd")) {
        std::error_code error;
        const std::string target = std::filesystem::read_symlink(entry.path(), error).string();
        if (!error && target.rfind("socket:[", 0) == 0) mine.insert(target.substr(8, target.size() - 9));
    }
    // ... and the kernel's table of TCP sockets: local address, state (0A: listening), inode.
    std::vector<std::string> found;
    for (const char* table : {"/proc/net/tcp", "/proc/net/tcp6"}) {
        std::ifstream in(table);
        std::string line;
        std::getline(in, line);  // the header
        while (std::getline(in, line)) {
            std::istringstream fields(line);
            std::string slot, local, remote, state, queues, timer, retransmits, uid, timeout, inode;
            fields >> slot >> local >> remote >> state >> queues >> timer >> retransmits >> uid >> timeout >> inode;
            if (state == "0A" && mine.count(inode)) found.push_back(local.substr(0, local.find(':')));
        }
    }
    mpify::ddp::barrier();  // every rank's group is up while rank 0 looks
    return found;
}
MPIFY_REGISTER(listening_addresses);

int skip_one_all_reduce(int skipping_rank) {
    for (int step = 0; step < 5; ++step) {
        at::Tensor loss = torch::full({1}, float(step));
        if (step == 2 && mpify::ddp::rank() == skipping_rank) in_library::spin_in_own_loop();  // the bug
        mpify::ddp::all_reduce(loss);
    }
    return mpify::ddp::rank();
}
MPIFY_REGISTER(skip_one_all_reduce);

std::string mismatched_call(std::string how) {
    const std::int64_t n = 1 << 20;
    at::Tensor t = torch::ones({mpify::ddp::rank() == 1 && how == "size" ? 2 * n : n});
    try {
        if (mpify::ddp::rank() == 1 && how == "operation") mpify::ddp::broadcast(t, 0);
        else mpify::ddp::all_reduce(t);
        mpify::ddp::barrier();  // a rank whose call ended all the same is told here
    } catch (const std::exception& e) {
        const std::string said = e.what();
        if (said.find("made different collective calls") == std::string::npos)
            throw std::runtime_error("rank " + std::to_string(mpify::ddp::rank()) + " was told: " + said);
        return said;
    }
    throw std::runtime_error("rank " + std::to_string(mpify::ddp::rank()) + " was told nothing");
}
MPIFY_REGISTER(mismatched_call);

}  // namespace ddp_test
