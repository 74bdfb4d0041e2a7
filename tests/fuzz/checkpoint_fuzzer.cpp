// libFuzzer target: the Learner's checkpoint reader (src/learner/checkpoint.cpp), on
// archives that LibTorch wrote, framed as mpify frames them, whose entries the input
// chooses: each header entry, position, random generator state, History, model tensor and
// the optimizer's state kept good, left out, given another kind, or given other values.
// The archive format itself is not fuzzed: LibTorch's reader of it (TorchScript's) crashes
// on malformed archives within seconds, and a checkpoint is trusted input, as
// torch::load's is (docs/restarts-and-checkpoints.md). What must hold: the reader loads, or
// throws std::runtime_error naming the file with the model left as it was.
#include "learner/checkpoint.hpp"
#include "learner/checksum_frame.hpp"

#include <fuzzer/FuzzedDataProvider.h>
#include <torch/torch.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

namespace {

struct Net : torch::nn::Module {
    Net() : linear(register_module("linear", torch::nn::Linear(3, 2))) {}
    torch::nn::Linear linear;
};

struct Trained {
    std::shared_ptr<Net> model = std::make_shared<Net>();
    torch::optim::SGD optimizer{model->parameters(), torch::optim::SGDOptions(0.1).momentum(0.9)};
    torch::serialize::InputArchive good;  // a checkpoint of them, as the Learner writes it

    Trained() {
        model->linear->weight.sum().backward();
        optimizer.step();  // momentum buffers: the optimizer's state has tensors
        const std::string framed = mpify::learner::checkpoint_bytes(*model, &optimizer, nullptr, {}, {});
        const std::string content = framed.substr(mpify::learner::in_memory("good.pt", framed).payload().offset);
        good.load_from(content.data(), content.size());
    }
};

Trained& trained() {
    static Trained t;
    return t;
}

enum class Kind { integer, number, text, tensor };

struct Entry {
    const char* key;
    Kind kind;
};

// Every entry load_checkpoint reads, by the kind the Learner writes.
const std::vector<Entry> entries = {
    {"format", Kind::text},
    {"version", Kind::integer},
    {"layout", Kind::text},
    {"kind", Kind::text},
    {"optimizer_kind", Kind::text},
    {"schedule", Kind::text},
    {"epochs", Kind::integer},
    {"lr", Kind::number},
    {"epoch", Kind::integer},
    {"batch", Kind::integer},
    {"batches_per_epoch", Kind::integer},
    {"world_size", Kind::integer},
    {"seed", Kind::integer},
    {"partial_loss_sum", Kind::number},
    {"samples_done", Kind::integer},
    {"partial_batches", Kind::integer},
    {"rng", Kind::tensor},
    {"history", Kind::tensor},
    {"tensor0", Kind::tensor},
    {"tensor1", Kind::tensor},
};

// A small tensor of the input's dtype, shape and bytes.
at::Tensor fuzzed_tensor(FuzzedDataProvider& input) {
    const auto dtypes = {at::kByte, at::kChar, at::kInt, at::kLong, at::kFloat, at::kDouble, at::kBool};
    const at::ScalarType dtype = *(dtypes.begin() + input.ConsumeIntegralInRange<std::size_t>(0, dtypes.size() - 1));
    std::vector<std::int64_t> sizes(input.ConsumeIntegralInRange<std::size_t>(0, 3));
    for (std::int64_t& size : sizes) size = input.ConsumeIntegralInRange<std::int64_t>(0, 8);
    at::Tensor tensor = at::zeros(sizes, at::TensorOptions().dtype(dtype));
    const std::string bytes = input.ConsumeBytesAsString(tensor.nbytes());
    if (!bytes.empty()) std::memcpy(tensor.data_ptr(), bytes.data(), bytes.size());
    if (dtype == at::kBool) tensor = tensor.ne(0);  // only 0 and 1 are booleans
    return tensor;
}

void write_fuzzed(torch::serialize::OutputArchive& archive, const Entry& entry, Kind kind, FuzzedDataProvider& input) {
    switch (kind) {
        case Kind::integer: archive.write(entry.key, c10::IValue(input.ConsumeIntegral<std::int64_t>())); break;
        case Kind::number: archive.write(entry.key, c10::IValue(input.ConsumeFloatingPoint<double>())); break;
        case Kind::text: archive.write(entry.key, c10::IValue(input.ConsumeRandomLengthString(64))); break;
        case Kind::tensor: archive.write(entry.key, fuzzed_tensor(input), /*is_buffer=*/true); break;
    }
}

// The good value of `entry`, when the good checkpoint has one.
void write_good(torch::serialize::OutputArchive& archive, const Entry& entry) {
    torch::serialize::InputArchive& good = trained().good;
    if (entry.kind == Kind::tensor) {
        at::Tensor tensor;
        if (good.try_read(entry.key, tensor, /*is_buffer=*/true)) archive.write(entry.key, tensor, /*is_buffer=*/true);
        return;
    }
    c10::IValue value;
    if (good.try_read(entry.key, value)) archive.write(entry.key, value);
}

// Bit for bit (a NaN a good load put there equals itself).
bool same_bytes(const at::Tensor& a, const at::Tensor& b) {
    const at::Tensor x = a.contiguous(), y = b.detach().contiguous();
    return x.nbytes() == y.nbytes() && std::memcmp(x.data_ptr(), y.data_ptr(), x.nbytes()) == 0;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    Trained& t = trained();
    FuzzedDataProvider input(data, size);
    torch::serialize::OutputArchive archive;
    for (const Entry& entry : entries) {
        switch (input.ConsumeIntegralInRange<int>(0, 7)) {
            case 0: break;  // left out
            case 1:
                write_fuzzed(archive, entry, static_cast<Kind>((static_cast<int>(entry.kind) + 1) % 4), input);
                break;
            case 2: write_fuzzed(archive, entry, entry.kind, input); break;
            default: write_good(archive, entry);
        }
    }
    if (input.ConsumeBool()) {
        torch::serialize::InputArchive good_state;
        if (t.good.try_read("optimizer", good_state)) {
            torch::serialize::OutputArchive state;  // an InputArchive cannot be written back: the optimizer's own
            t.optimizer.save(state);
            archive.write("optimizer", state);
        }
    }
    std::ostringstream content;
    archive.save_to(content);
    const std::string file = mpify::learner::framed(content.str());
    const at::Tensor before = t.model->linear->weight.detach().clone();
    try {
        mpify::learner::load_checkpoint(mpify::learner::in_memory("fuzzed.pt", file), *t.model, &t.optimizer, nullptr,
                                        8);
    } catch (const std::runtime_error& e) {
        if (std::string(e.what()).find("fuzzed.pt") == std::string::npos) std::abort();  // names the file
        if (!same_bytes(before, t.model->linear->weight)) {  // nothing loaded
            std::fprintf(stderr, "the model changed, and then: %s\n", e.what());
            std::abort();
        }
    }
    return 0;
}
