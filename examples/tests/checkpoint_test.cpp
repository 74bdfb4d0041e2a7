// The Learner's checkpoints: a fit stopped at any point and started again ends exactly
// where the fit never stopped would; a bad file is an error naming it; a crash during a
// write leaves the previous checkpoint whole.
#include <learner/checkpoint_file.hpp>
#include <mpify/learner/learner.hpp>

#include "learner_group_functions.hpp"
#include "line_data.hpp"
#include "scratch_folder.hpp"

#include <torch/torch.h>

#include <catch2/catch.hpp>

#include <malloc.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <stdexcept>
#include <tuple>

using namespace mpify::learner;
using namespace mpify_examples;
using mpify_examples::testing::checkpoint_on_every_rank;
using mpify_examples::testing::epoch_2_in_parts;
using mpify_examples::testing::line;
using mpify_examples::testing::ScratchFolder;
using Catch::Matchers::Contains;
namespace fs = std::filesystem;

namespace {

std::shared_ptr<torch::nn::SequentialImpl> small_mlp(int hidden = 8) {
    return std::make_shared<torch::nn::SequentialImpl>(torch::nn::Linear(1, hidden), torch::nn::ReLU(),
                                                       torch::nn::Linear(hidden, 1));
}

// A Learner of the line with a fresh model (initialized from `seed`), checkpointing in `dir`.
struct LineLearner {
    explicit LineLearner(const fs::path& dir, std::uint64_t seed = 0, std::int64_t every = 0, int hidden = 8) {
        torch::manual_seed(seed);
        model = small_mlp(hidden);
        LearnerOptions options;
        options.max_batches = 0;
        options.checkpoint_dir = dir.empty() ? "" : dir.string();
        options.checkpoint_every = every;
        learn = std::make_unique<Learner>(
            DataLoaders{line(256, 1), line(64, 2), 32, 7}, model,
            [](const at::Tensor& out, const at::Tensor& y) { return torch::mse_loss(out, y); },
            std::vector<Metric>{rmse()}, options);
    }
    std::shared_ptr<torch::nn::SequentialImpl> model;
    std::unique_ptr<Learner> learn;
};

// Stops a fit by throwing after batch `batch` (0-based) of epoch `epoch` (1-based), as a
// crash would stop it (no checkpoint is written on the way out).
class StopAt : public Callback {
public:
    StopAt(int epoch, std::int64_t batch) : epoch_(epoch), batch_(batch) {}
    void before_epoch(const Learner&, int epoch, std::int64_t) override { current_ = epoch; }
    void after_batch(const Learner&, std::int64_t batch, double) override {
        if (current_ == epoch_ && batch == batch_) throw std::runtime_error("stopped on purpose");
    }

private:
    int epoch_;
    std::int64_t batch_;
    int current_ = 0;
};

// Counts the training batches a fit runs.
class CountBatches : public Callback {
public:
    void after_batch(const Learner&, std::int64_t, double) override { ++count; }
    int count = 0;
};

// Trains `learner` one epoch and saves its checkpoint as dir/good.pt, whose path it returns.
std::string fit_and_save(LineLearner& learner, const fs::path& dir) {
    learner.learn->fit(1, 0.05);
    const std::string path = (dir / "good.pt").string();
    learner.learn->save(path);
    return path;
}

std::string file_bytes(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

// A figure of this process's memory in /proc/self/status ("VmRSS:", "VmHWM:"), in bytes.
std::int64_t memory_figure(const std::string& key) {
    std::ifstream status("/proc/self/status");
    for (std::string line; std::getline(status, line);)
        if (line.rfind(key, 0) == 0) return std::stoll(line.substr(key.size())) * 1024;
    return -1;
}

void check_same_parameters(torch::nn::Module& a, torch::nn::Module& b) {
    const auto pa = a.parameters();
    const auto pb = b.parameters();
    REQUIRE(pa.size() == pb.size());
    for (std::size_t i = 0; i < pa.size(); ++i) CHECK(torch::equal(pa[i], pb[i]));
}

}  // namespace

TEST_CASE("a fit stopped in epoch 2 and started again ends with the never-stopped fit's parameters", "[checkpoint]") {
    LineLearner reference({});
    const History whole = reference.learn->fit_one_cycle(3, 0.1);

    for (std::int64_t every : {0, 3}) {  // from the end of epoch 1; from batch 6 of epoch 2
        INFO("checkpoint_every = " << every);
        const ScratchFolder scratch("mpify_checkpoint_test", "resume" + std::to_string(every));
        const fs::path& dir = scratch.path();
        LineLearner stopped(dir, 0, every);
        stopped.learn->add_callback(std::make_shared<StopAt>(2, 7));
        REQUIRE_THROWS_WITH(stopped.learn->fit_one_cycle(3, 0.1), "stopped on purpose");

        LineLearner resumed(dir, /*seed=*/99, every);  // other initial weights: the checkpoint's must win
        auto batches = std::make_shared<CountBatches>();
        resumed.learn->add_callback(batches);
        const History h = resumed.learn->fit_one_cycle(3, 0.1);
        CHECK(batches->count == (every == 0 ? 16 : 16 - 6));
        check_same_parameters(*resumed.model, *reference.model);
        REQUIRE(h.epochs.size() == 3);
        for (std::size_t e = 0; e < 3; ++e) {
            CHECK(h.epochs[e].train_loss == whole.epochs[e].train_loss);
            CHECK(h.epochs[e].valid_loss == whole.epochs[e].valid_loss);
        }
        CHECK(h.batch_losses == whole.batch_losses);
    }
}

TEST_CASE("an epoch stopped on 2 ranks and resumed on 3, or on 3 and resumed on 2, trains each sample once",
          "[checkpoint][ddp]") {
    for (const auto& [before, after, stop] : {std::tuple{2, 3, 3}, std::tuple{3, 2, 2}}) {
        INFO(before << " ranks, then " << after);
        const ScratchFolder dir("mpify_resize", "checkpoints");
        const auto first = mpify::in_ddp(before, epoch_2_in_parts, dir.path().string(), std::int64_t{stop});
        const auto second = mpify::in_ddp(after, epoch_2_in_parts, dir.path().string(), std::int64_t{-1});
        // The checkpoint held `stop` batches of every rank: `stop` × 4 × `before` samples.
        CHECK(first[0].sum().item<std::int64_t>() == stop * 4 * before);
        CHECK(first[1][1].item<double>() == stop * before);
        // Every sample trained in one part or the other, once; only the padding that gives
        // each of the `after` ranks as many samples repeats some (fewer than `after`).
        const at::Tensor times = first[0] + second[0];
        CHECK(times.min().item<std::int64_t>() == 1);
        CHECK(times.sum().item<std::int64_t>() - 50 < after);
        // The epoch's loss: the mean over the batches of both parts.
        const double batches = first[1][1].item<double>() + second[1][1].item<double>();
        const double mean = (first[1][0].item<double>() + second[1][0].item<double>()) / batches;
        CHECK(second[1][2].item<double>() == Approx(mean).epsilon(1e-12));
    }
}

TEST_CASE("a finished fit's checkpoint trains nothing more; another fit's is refused by name", "[checkpoint]") {
    const ScratchFolder scratch("mpify_checkpoint_test", "finished");
    const fs::path& dir = scratch.path();
    LineLearner first(dir);
    const History done = first.learn->fit(2, 0.05);

    LineLearner again(dir, 5);
    auto batches = std::make_shared<CountBatches>();
    again.learn->add_callback(batches);
    const History h = again.learn->fit(2, 0.05);
    CHECK(batches->count == 0);
    CHECK(h.epochs.size() == 2);
    check_same_parameters(*again.model, *first.model);

    LineLearner other(dir, 5);
    CHECK_THROWS_WITH(other.learn->fit_one_cycle(2, 0.05),
                      Contains("belongs to fit(2, 0.05), not to this fit_one_cycle(2, 0.05)") &&
                          Contains((dir / "checkpoint.pt").string()));
}

TEST_CASE("save, load, export_model and load_model carry a model between learners", "[checkpoint]") {
    const ScratchFolder scratch("mpify_checkpoint_test", "by_hand");
    const fs::path& dir = scratch.path();
    LineLearner trained({});
    trained.learn->fit(1, 0.05);
    trained.learn->save((dir / "saved.pt").string());
    trained.learn->export_model((dir / "model.pt").string());

    LineLearner loaded({}, 3);
    loaded.learn->load((dir / "saved.pt").string());
    check_same_parameters(*loaded.model, *trained.model);
    CHECK(loaded.learn->history().epochs.size() == 1);

    torch::manual_seed(4);
    auto plain = small_mlp();
    load_model((dir / "model.pt").string(), *plain);
    CHECK_FALSE(plain->is_training());
    const at::Tensor x = torch::rand({5, 1});
    CHECK(torch::equal(plain->forward(x), trained.learn->predict(x)));
    CHECK_THROWS_WITH(loaded.learn->load((dir / "model.pt").string()), Contains("it is an export"));
}

TEST_CASE("saving a checkpoint takes little memory, loading one at most 1.2 times the file", "[checkpoint]") {
    const ScratchFolder scratch("mpify_checkpoint_test", "memory");
    const std::string path = (scratch.path() / "large.pt").string();
    constexpr int hidden = 1 << 22;  // 3 × 4 Mi parameters: a 48 MiB file
    // The peak of this process's memory while `f` runs, over what it held before. The
    // Learner keeps the memory it frees (mallopt): given back first, the peak counts what
    // `f` allocates, not pages that earlier learners left.
    const auto memory_taken_by = [](const std::function<void()>& f) {
        ::malloc_trim(0);
        {
            std::ofstream reset("/proc/self/clear_refs");  // "5": the peak (VmHWM) starts again from now
            reset << "5";
        }
        const std::int64_t before = memory_figure("VmRSS:");
        REQUIRE(memory_figure("VmHWM:") - before < (std::int64_t(4) << 20));
        f();
        return memory_figure("VmHWM:") - before;
    };
    std::int64_t file_size = 0;
    {
        LineLearner large({}, 0, 0, hidden);
        const std::int64_t saving = memory_taken_by([&] { large.learn->save(path); });
        file_size = static_cast<std::int64_t>(fs::file_size(path));
        REQUIRE(file_size > (std::int64_t(40) << 20));
        CAPTURE(file_size, saving);
        CHECK(static_cast<double>(saving) <= 0.2 * static_cast<double>(file_size));
    }
    LineLearner other({}, 1, 0, hidden);
    const std::int64_t loading = memory_taken_by([&] { other.learn->load(path); });
    CAPTURE(file_size, loading);
    CHECK(static_cast<double>(loading) <= 1.2 * static_cast<double>(file_size));
    LineLearner again({}, 0, 0, hidden);
    check_same_parameters(*other.model, *again.model);
}

TEST_CASE("every rank loads the checkpoint rank 0 read: its own file, or rank 0's sent to it", "[checkpoint][ddp]") {
    const ScratchFolder scratch("mpify_checkpoint_test", "ranks");
    const fs::path& dir = scratch.path();
    LineLearner trained({});
    const std::string path = fit_and_save(trained, dir);
    LineLearner other({}, 5);
    const std::string another = (dir / "another.pt").string();
    other.learn->save(another);
    // The same file on every rank: each reads its own, and only what rank 0 found travels.
    const std::vector<std::int64_t> own = mpify::in_ddp(3, checkpoint_on_every_rank, path, path);
    CHECK(own[0] == 3);
    CHECK(own[1] == 2);
    // A rank whose machine lacks the file, or holds another under that name: rank 0 sends it.
    for (const std::string& theirs : {(dir / "missing.pt").string(), another}) {
        INFO(theirs);
        const std::vector<std::int64_t> sent = mpify::in_ddp(3, checkpoint_on_every_rank, path, theirs);
        CHECK(sent[0] == 3);
        CHECK(sent[1] > 2);
    }
}

TEST_CASE("a damaged, truncated, foreign or newer checkpoint is an error naming the file", "[checkpoint]") {
    const ScratchFolder scratch("mpify_checkpoint_test", "bad");
    const fs::path& dir = scratch.path();
    LineLearner trained({});
    const std::string good = fit_and_save(trained, dir);
    const std::string bytes = file_bytes(good);

    const std::string truncated = (dir / "truncated.pt").string();
    write_file_atomically(truncated, bytes.substr(0, bytes.size() / 2));
    CHECK_THROWS_WITH(trained.learn->load(truncated), Contains("checkpoint " + truncated) && Contains("truncated"));

    const std::string empty = (dir / "empty.pt").string();
    write_file_atomically(empty, "");
    CHECK_THROWS_WITH(trained.learn->load(empty), Contains(empty) && Contains("the file is empty"));

    LineLearner wider({}, 0, 0, /*hidden=*/4);
    CHECK_THROWS_WITH(wider.learn->load(good),
                      Contains(good) && Contains("another model: parameter 0.weight is [8, 1] in the file and [4, 1] "
                                                 "in this model"));

    const std::string foreign = (dir / "tensor.pt").string();
    torch::save(torch::ones({3}), foreign);
    CHECK_THROWS_WITH(trained.learn->load(foreign), Contains(foreign) && Contains("not one mpify's Learner wrote"));

    const std::string newer = (dir / "newer.pt").string();
    torch::serialize::OutputArchive archive;
    archive.write("format", c10::IValue(std::string("mpify-learner")));
    archive.write("version", c10::IValue(std::int64_t{99}));
    archive.save_to(newer);
    CHECK_THROWS_WITH(trained.learn->load(newer), Contains(newer) && Contains("format 99, newer than this build"));

    CHECK_THROWS_WITH(trained.learn->load((dir / "missing.pt").string()),
                      Contains("cannot read " + (dir / "missing.pt").string()));
}

TEST_CASE("one flipped bit is found by the checksum, and a failed load changes nothing", "[checkpoint]") {
    const ScratchFolder scratch("mpify_checkpoint_test", "flipped");
    const fs::path& dir = scratch.path();
    LineLearner trained({});
    std::string bytes = file_bytes(fit_and_save(trained, dir));
    // A bit of the last parameter's values: LibTorch's reader alone loads it as a wrong weight.
    const at::Tensor last = trained.model->parameters().back().detach().contiguous();
    const std::string value(reinterpret_cast<const char*>(last.data_ptr<float>()), sizeof(float));
    const std::size_t at = bytes.rfind(value);
    REQUIRE(at != std::string::npos);
    bytes[at] = static_cast<char>(bytes[at] ^ 0x10);
    const std::string flipped = (dir / "flipped.pt").string();
    write_file_atomically(flipped, bytes);

    LineLearner other({}, 3);
    const std::vector<at::Tensor> before = [&] {
        std::vector<at::Tensor> copies;
        for (const at::Tensor& p : other.model->parameters()) copies.push_back(p.detach().clone());
        return copies;
    }();
    CHECK_THROWS_WITH(other.learn->load(flipped), Contains("checkpoint " + flipped) && Contains("checksum"));
    auto plain = small_mlp();
    CHECK_THROWS_WITH(load_model(flipped, *plain), Contains(flipped) && Contains("checksum"));

    // An export given to load is refused before the model changes.
    const std::string exported = (dir / "model.pt").string();
    trained.learn->export_model(exported);
    CHECK_THROWS_WITH(other.learn->load(exported), Contains("it is an export"));
    const std::vector<at::Tensor> after = other.model->parameters();
    for (std::size_t i = 0; i < before.size(); ++i) CHECK(torch::equal(after[i], before[i]));
}

TEST_CASE("a FIFO, a device or a folder as a checkpoint is refused by name, without blocking", "[checkpoint]") {
    const ScratchFolder scratch("mpify_checkpoint_test", "special");
    const fs::path& dir = scratch.path();
    const fs::path fifo = dir / "fifo.pt";
    REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
    const fs::path device = dir / "zero.pt";
    fs::create_symlink("/dev/zero", device);
    const fs::path folder = dir / "folder.pt";
    fs::create_directory(folder);
    LineLearner learner({});
    CHECK_THROWS_WITH(learner.learn->load(fifo.string()), Contains("cannot read " + fifo.string()) && Contains("FIFO"));
    CHECK_THROWS_WITH(learner.learn->load(device.string()),
                      Contains("cannot read " + device.string()) && Contains("a device"));
    CHECK_THROWS_WITH(learner.learn->load(folder.string()),
                      Contains("cannot read " + folder.string()) && Contains("a folder"));

    // The automatic checkpoint's place taken by a FIFO: the fit stops at once, naming it.
    const fs::path checkpoints = dir / "checkpoints";
    fs::create_directory(checkpoints);
    REQUIRE(::mkfifo((checkpoints / "checkpoint.pt").c_str(), 0600) == 0);
    LineLearner resuming(checkpoints);
    CHECK_THROWS_WITH(resuming.learn->fit(1, 0.05),
                      Contains("cannot read " + (checkpoints / "checkpoint.pt").string()) && Contains("FIFO"));
}

TEST_CASE("a folder that cannot hold checkpoints is an error before any batch trains", "[checkpoint]") {
    const ScratchFolder scratch("mpify_checkpoint_test", "file");
    const fs::path not_a_folder = scratch.path() / "plain-file";
    std::ofstream(not_a_folder) << "x";
    LineLearner learner(not_a_folder / "checkpoints");
    auto batches = std::make_shared<CountBatches>();
    learner.learn->add_callback(batches);
    CHECK_THROWS_WITH(learner.learn->fit(1, 0.05),
                      Contains("cannot write checkpoints in " + (not_a_folder / "checkpoints").string()));
    CHECK(batches->count == 0);
}

TEST_CASE("a process killed while it writes a checkpoint leaves the previous one whole", "[checkpoint]") {
    const ScratchFolder scratch("mpify_checkpoint_test", "killed");
    const fs::path& dir = scratch.path();
    const std::string path = (dir / "checkpoint.pt").string();
    LineLearner trained({});
    trained.learn->fit(1, 0.05);
    trained.learn->save(path);
    const std::string before = file_bytes(path);
    const std::string larger(4 << 20, 'x');

    // The writer dies of SIGXFSZ after its first 64 KiB: inside its write, for real.
    const pid_t child = ::fork();
    REQUIRE(child >= 0);
    if (child == 0) {
        ::signal(SIGXFSZ, SIG_DFL);
        const rlimit limit{64 << 10, 64 << 10};
        ::setrlimit(RLIMIT_FSIZE, &limit);
        write_file_atomically(path, larger);
        ::_exit(0);
    }
    int status = 0;
    REQUIRE(::waitpid(child, &status, 0) == child);
    REQUIRE(WIFSIGNALED(status));
    CHECK(WTERMSIG(status) == SIGXFSZ);
    CHECK(file_bytes(path) == before);
    LineLearner loaded({}, 3);
    loaded.learn->load(path);
    check_same_parameters(*loaded.model, *trained.model);

    // The dead writer's temporary goes at the next save; a live writer's stays.
    const fs::path dead = dir / (".checkpoint.pt.partial-" + std::to_string(child));
    const fs::path live = dir / (".checkpoint.pt.partial-" + std::to_string(::getppid()));
    CHECK(fs::exists(dead));
    std::ofstream(live) << "being written";
    trained.learn->save(path);
    CHECK_FALSE(fs::exists(dead));
    CHECK(fs::exists(live));
}
