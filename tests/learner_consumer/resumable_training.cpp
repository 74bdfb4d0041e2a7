// Trains a small classifier on two processes with the installed Learner, checkpointing
// after every epoch into the folder it is given; run again after a kill, it goes on from
// the last checkpoint.
//   resumable_training CHECKPOINT_DIR [--pause-after-epoch N]
// --pause-after-epoch: after epoch N's checkpoint, rank 0 says so and waits for its
// standard input to close, so that a test can kill the program at a known point.
#include <mpify/ddp_guard.hpp>
#include <mpify/learner/learner.hpp>
#include <mpify/mpify.hpp>

#include <torch/torch.h>

#include <cstdint>
#include <cstdlib>
#include <iostream>
#include <string>

namespace {

/// Three classes of 2-D points around three centres.
mpify::learner::DataSet points(std::int64_t n, std::uint64_t seed) {
    auto generator = at::detail::createCPUGenerator(seed);
    const at::Tensor labels = torch::randint(0, 3, {n}, generator, torch::kLong);
    const at::Tensor centres = torch::tensor({{0.0f, 1.0f}, {1.0f, -0.5f}, {-1.0f, -0.5f}});
    return {centres.index_select(0, labels) + 0.6 * torch::randn({n, 2}, generator), labels};
}

struct Classifier : torch::nn::Module {
    torch::nn::Linear hidden{register_module("hidden", torch::nn::Linear(2, 16))};
    torch::nn::Linear out{register_module("out", torch::nn::Linear(16, 3))};
    at::Tensor forward(const at::Tensor& x) { return out(torch::relu(hidden(x))); }
};

/// Counts the epochs this run trains, and pauses after one of them when asked.
class EpochCounter : public mpify::learner::Callback {
public:
    explicit EpochCounter(int pause_after) : pause_after_(pause_after) {}
    void before_epoch(const mpify::learner::Learner&, int, std::int64_t) override { ++trained; }
    void after_epoch(const mpify::learner::Learner& learner, const mpify::learner::History& history) override {
        const int epoch = static_cast<int>(history.epochs.size());
        if (learner.rank() != 0 || epoch != pause_after_) return;
        std::cout << "paused after epoch " << epoch << std::endl;
        std::string line;
        while (std::getline(std::cin, line)) {
        }
    }
    int trained = 0;

private:
    int pause_after_;
};

struct Outcome {
    int epochs_in_history = 0;
    int epochs_trained_here = 0;
    double final_accuracy = 0;

    template <class Archive>
    void serialize(Archive& ar, const unsigned int) {
        ar & epochs_in_history & epochs_trained_here & final_accuracy;
    }
};

Outcome train(std::string checkpoint_dir, int pause_after) {
    torch::manual_seed(0);
    mpify::learner::DataLoaders data{points(2048, 1), points(512, 2), 64, 3};
    mpify::learner::LearnerOptions options;
    options.checkpoint_dir = checkpoint_dir;
    auto cross_entropy = [](const at::Tensor& logits, const at::Tensor& labels) {
        return torch::nn::functional::cross_entropy(logits, labels);
    };
    mpify::learner::Learner learner(data, std::make_shared<Classifier>(), cross_entropy, {mpify::learner::accuracy()},
                                    options);
    auto counter = std::make_shared<EpochCounter>(pause_after);
    learner.add_callback(counter);
    const mpify::learner::History history = learner.fit_one_cycle(4, 1e-2);
    return {static_cast<int>(history.epochs.size()), counter->trained, history.epochs.back().metrics.at(0)};
}
MPIFY_REGISTER(train);

}  // namespace

int main(int argc, char** argv) {
    mpify::init(argc, argv);
    if (argc != 2 && !(argc == 4 && std::string(argv[2]) == "--pause-after-epoch")) {
        std::cerr << "usage: resumable_training CHECKPOINT_DIR [--pause-after-epoch N]\n";
        return 2;
    }
    const int pause_after = argc == 4 ? std::atoi(argv[3]) : 0;
    const Outcome outcome = mpify::in_ddp(2, train, std::string(argv[1]), pause_after);
    std::cout << "epochs in the history: " << outcome.epochs_in_history << "\n"
              << "epochs trained by this run: " << outcome.epochs_trained_here << "\n"
              << "accuracy: " << outcome.final_accuracy << std::endl;
}
