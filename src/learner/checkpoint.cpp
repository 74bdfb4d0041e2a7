#include "learner/checkpoint.hpp"

#include "learner/checksum_frame.hpp"

#include <mpify/error.hpp>
#include <mpify/grad_scaler.hpp>

#include <torch/torch.h>

#include <boost/archive/binary_iarchive.hpp>
#include <boost/archive/binary_oarchive.hpp>
#include <c10/util/Type.h>

#include <climits>
#include <mutex>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <vector>

MPIFY_BEGIN_NAMESPACE
namespace learner {
namespace {

constexpr const char* format_name = "mpify-learner";

std::runtime_error bad_file(const std::string& path, const std::string& what) {
    return std::runtime_error("checkpoint " + path + ": " + what);
}

// The model's tensors in a fixed order, and one line per tensor naming it and its shape:
// what a checkpoint is checked against before anything is loaded.
struct Layout {
    std::vector<at::Tensor> tensors;
    std::vector<std::string> lines;
};

std::string shape_of(const at::Tensor& t) {
    std::string text = "[";
    for (std::int64_t d = 0; d < t.dim(); ++d) text += (d ? ", " : "") + std::to_string(t.size(d));
    return text + "]";
}

Layout layout_of(const torch::nn::Module& model) {
    Layout layout;
    for (const auto& item : model.named_parameters()) {
        layout.tensors.push_back(item.value());
        layout.lines.push_back("parameter " + item.key() + " " + shape_of(item.value()));
    }
    for (const auto& item : model.named_buffers()) {
        layout.tensors.push_back(item.value());
        layout.lines.push_back("buffer " + item.key() + " " + shape_of(item.value()));
    }
    return layout;
}

std::string joined(const std::vector<std::string>& lines) {
    std::string text;
    for (const std::string& line : lines) text += line + "\n";
    return text;
}

std::vector<std::string> split_lines(const std::string& text) {
    std::vector<std::string> lines;
    std::istringstream in(text);
    for (std::string line; std::getline(in, line);) lines.push_back(line);
    return lines;
}

// "parameter conv1.weight" of "parameter conv1.weight [32, 1, 3, 3]".
std::string name_part(const std::string& line) { return line.substr(0, line.rfind(" [")); }

// The first difference between the saved layout and the model's, as a sentence.
std::string first_difference(const std::vector<std::string>& saved, const std::vector<std::string>& here) {
    for (std::size_t i = 0; i < std::max(saved.size(), here.size()); ++i) {
        if (i >= saved.size()) return "this model has " + here[i] + ", which the file lacks";
        if (i >= here.size()) return "the file has " + saved[i] + ", which this model lacks";
        if (saved[i] == here[i]) continue;
        if (name_part(saved[i]) == name_part(here[i]))
            return name_part(here[i]) + " is " + saved[i].substr(saved[i].rfind(" [") + 1) + " in the file and " +
                   here[i].substr(here[i].rfind(" [") + 1) + " in this model";
        return "the file has " + saved[i] + " where this model has " + here[i];
    }
    return "";
}

void write_model(torch::serialize::OutputArchive& archive, const torch::nn::Module& model, const char* kind) {
    archive.write("format", c10::IValue(std::string(format_name)));
    archive.write("version", c10::IValue(checkpoint_format));
    archive.write("kind", c10::IValue(std::string(kind)));
    const Layout layout = layout_of(model);
    archive.write("layout", c10::IValue(joined(layout.lines)));
    for (std::size_t i = 0; i < layout.tensors.size(); ++i)
        archive.write("tensor" + std::to_string(i), layout.tensors[i].detach(), /*is_buffer=*/true);
}

std::string archive_bytes(torch::serialize::OutputArchive& archive) {
    std::ostringstream out;
    archive.save_to(out);
    return out.str();
}

std::string optimizer_kind(const torch::optim::Optimizer& optimizer) { return c10::demangle(typeid(optimizer).name()); }

// Reads a value the header or position must have, of the kind it must be: LibTorch's own
// conversions would throw a c10::Error that names neither the file nor the value.
c10::IValue required(torch::serialize::InputArchive& archive, const std::string& path, const std::string& key) {
    c10::IValue value;
    if (!archive.try_read(key, value))
        throw bad_file(path, "it has no '" + key + "': it is damaged, or not a checkpoint");
    return value;
}
std::runtime_error wrong_kind(const std::string& path, const std::string& key, const char* kind) {
    return bad_file(path, "its '" + key + "' is not " + kind + ": it is damaged");
}
std::int64_t required_int(torch::serialize::InputArchive& archive, const std::string& path, const std::string& key) {
    const c10::IValue value = required(archive, path, key);
    if (!value.isInt()) throw wrong_kind(path, key, "an integer");
    return value.toInt();
}
double required_double(torch::serialize::InputArchive& archive, const std::string& path, const std::string& key) {
    const c10::IValue value = required(archive, path, key);
    if (!value.isDouble()) throw wrong_kind(path, key, "a number");
    return value.toDouble();
}
std::string required_string(torch::serialize::InputArchive& archive, const std::string& path, const std::string& key) {
    const c10::IValue value = required(archive, path, key);
    if (!value.isString()) throw wrong_kind(path, key, "a string");
    return value.toStringRef();
}
at::Tensor required_tensor(torch::serialize::InputArchive& archive, const std::string& path, const std::string& key) {
    at::Tensor tensor;
    if (!archive.try_read(key, tensor, /*is_buffer=*/true))
        throw bad_file(path, "it has no '" + key + "': it is damaged, or not a checkpoint");
    return tensor;
}

// A byte string as a tensor of uint8 (the History in the archive), and back.
at::Tensor bytes_as_tensor(const std::string& bytes) {
    at::Tensor t = torch::empty({static_cast<std::int64_t>(bytes.size())}, torch::kUInt8);
    std::copy(bytes.begin(), bytes.end(), reinterpret_cast<char*>(t.data_ptr<std::uint8_t>()));
    return t;
}

std::string tensor_as_bytes(const at::Tensor& tensor) {
    const at::Tensor c = tensor.contiguous();
    return std::string(reinterpret_cast<const char*>(c.data_ptr<std::uint8_t>()), static_cast<std::size_t>(c.numel()));
}

// An archive whose frame, header and model were checked, its model's values read, nothing
// loaded yet.
struct CheckedFile {
    torch::serialize::InputArchive archive;
    Layout model;                    ///< the model's own tensors, to load into
    std::vector<at::Tensor> values;  ///< the file's, in the same order
};

// Opens the archive and checks its frame, what file it is and that its model fits `model`;
// reads the model's values without touching the model.
CheckedFile open_checked(const CheckpointBytes& bytes, torch::nn::Module& model) {
    const std::string& path = bytes.path();
    const PayloadSpan payload = bytes.payload();
    CheckedFile file;
    file.model = layout_of(model);
    // Tensors come to the model's device, where an optimizer's state must be.
    const c10::Device device = file.model.tensors.empty() ? c10::Device(c10::kCPU) : file.model.tensors[0].device();
    torch::serialize::InputArchive& archive = file.archive;
    try {
        // Read in pieces where LibTorch wants them: its records are the only copy in memory.
        archive.load_from(
            [bytes, payload](std::uint64_t at, void* into, std::size_t n) -> std::size_t {
                if (at >= payload.length) return 0;
                const std::size_t wanted = static_cast<std::size_t>(std::min<std::uint64_t>(n, payload.length - at));
                return bytes.read_at(payload.offset + at, static_cast<char*>(into), wanted);
            },
            [payload]() -> std::size_t { return static_cast<std::size_t>(payload.length); }, device);
    } catch (const std::exception& e) {
        const auto* c10_error = dynamic_cast<const c10::Error*>(&e);
        const std::string reason = c10_error != nullptr ? c10_error->what_without_backtrace() : e.what();
        throw bad_file(path, (bytes.size() == 0 ? "the file is empty"
                                                : "it is not a LibTorch archive, or it is truncated "
                                                  "or damaged") +
                                 std::string(" (") + reason.substr(0, reason.find('\n')) + ")");
    }
    c10::IValue format;
    if (!archive.try_read("format", format) || !format.isString() || format.toStringRef() != format_name)
        throw bad_file(path, "it is a LibTorch archive, but not one mpify's Learner wrote");
    const std::int64_t version = required_int(archive, path, "version");
    if (version > checkpoint_format)
        throw bad_file(path, "it was written in format " + std::to_string(version) + ", newer than this build reads (" +
                                 std::to_string(checkpoint_format) + "): load it with the version that wrote it");
    const std::vector<std::string> saved = split_lines(required_string(archive, path, "layout"));
    const std::string difference = first_difference(saved, file.model.lines);
    if (!difference.empty()) throw bad_file(path, "it holds another model: " + difference);
    for (std::size_t i = 0; i < file.model.tensors.size(); ++i) {
        at::Tensor value;
        if (!archive.try_read("tensor" + std::to_string(i), value, /*is_buffer=*/true))
            throw bad_file(path, "the values of " + file.model.lines[i] + " are missing: it is damaged");
        if (!value.sizes().equals(file.model.tensors[i].sizes()))
            throw bad_file(path, "the values of " + file.model.lines[i] + " have the shape " + shape_of(value) +
                                     ": it is damaged");
        file.values.push_back(value);
    }
    return file;
}

// The file's values into the model (their shapes were checked).
void load_values(CheckedFile& file) {
    torch::NoGradGuard no_grad;
    for (std::size_t i = 0; i < file.values.size(); ++i) file.model.tensors[i].copy_(file.values[i]);
}

// A checkpoint as one archive (its tensors the model's and the optimizer's own, not copies).
torch::serialize::OutputArchive checkpoint_archive(const torch::nn::Module& model,
                                                   const torch::optim::Optimizer* optimizer, const GradScaler* scaler,
                                                   const FitPosition& position, const History& history) {
    torch::serialize::OutputArchive archive;
    write_model(archive, model, "checkpoint");
    if (optimizer != nullptr) {
        archive.write("optimizer_kind", c10::IValue(optimizer_kind(*optimizer)));
        torch::serialize::OutputArchive state;
        optimizer->save(state);
        archive.write("optimizer", state);
    }
    if (scaler != nullptr && scaler->is_enabled()) {
        torch::serialize::OutputArchive state;
        scaler->save(state);
        archive.write("scaler", state);
    }
    archive.write("schedule", c10::IValue(position.schedule));
    archive.write("epochs", c10::IValue(static_cast<std::int64_t>(position.epochs)));
    archive.write("lr", c10::IValue(position.lr));
    archive.write("epoch", c10::IValue(static_cast<std::int64_t>(position.epoch)));
    archive.write("batch", c10::IValue(position.batch));
    archive.write("batches_per_epoch", c10::IValue(position.batches_per_epoch));
    archive.write("world_size", c10::IValue(static_cast<std::int64_t>(position.world_size)));
    archive.write("seed", c10::IValue(static_cast<std::int64_t>(position.seed)));
    archive.write("partial_loss_sum", c10::IValue(position.partial_loss_sum));
    archive.write("samples_done", c10::IValue(position.samples_done));
    archive.write("partial_batches", c10::IValue(position.partial_batches));
    at::Generator generator = at::detail::getDefaultCPUGenerator();
    {
        std::lock_guard<std::mutex> lock(generator.mutex());
        archive.write("rng", generator.get_state(), /*is_buffer=*/true);
    }
    std::ostringstream history_bytes;
    {
        boost::archive::binary_oarchive out(history_bytes);
        out << history;
    }
    archive.write("history", bytes_as_tensor(history_bytes.str()), /*is_buffer=*/true);
    return archive;
}

torch::serialize::OutputArchive export_archive(const torch::nn::Module& model) {
    torch::serialize::OutputArchive archive;
    write_model(archive, model, "export");
    return archive;
}

// `archive` framed at `path`, written as LibTorch serializes it: record by record.
void write_archive(const std::string& path, torch::serialize::OutputArchive& archive) {
    write_framed_file_atomically(path, [&](const ByteSink& sink) {
        archive.save_to([&](const void* data, std::size_t n) -> std::size_t {
            sink(static_cast<const char*>(data), n);
            return n;
        });
    });
}

}  // namespace

std::string checkpoint_bytes(const torch::nn::Module& model, const torch::optim::Optimizer* optimizer,
                             const GradScaler* scaler, const FitPosition& position, const History& history) {
    torch::serialize::OutputArchive archive = checkpoint_archive(model, optimizer, scaler, position, history);
    return framed(archive_bytes(archive));
}

void write_checkpoint_file(const std::string& path, const torch::nn::Module& model,
                           const torch::optim::Optimizer* optimizer, const GradScaler* scaler,
                           const FitPosition& position, const History& history) {
    torch::serialize::OutputArchive archive = checkpoint_archive(model, optimizer, scaler, position, history);
    write_archive(path, archive);
}

void write_export_file(const std::string& path, const torch::nn::Module& model) {
    torch::serialize::OutputArchive archive = export_archive(model);
    write_archive(path, archive);
}

namespace {

// The first line of LibTorch's message, without its backtrace: for a reason in parentheses.
std::string first_line(const c10::Error& error) {
    const std::string reason = error.what_without_backtrace();
    return reason.substr(0, reason.find('\n'));
}

// Where the fit stood, every value in range (format 1 and 2 files counted in batches of
// `batch_size` at one world size).
FitPosition read_position(torch::serialize::InputArchive& archive, const std::string& path, std::int64_t batch_size) {
    FitPosition p;
    p.schedule = required_string(archive, path, "schedule");
    const std::int64_t epochs = required_int(archive, path, "epochs");
    p.lr = required_double(archive, path, "lr");
    const std::int64_t epoch = required_int(archive, path, "epoch");
    p.batch = required_int(archive, path, "batch");
    p.batches_per_epoch = required_int(archive, path, "batches_per_epoch");
    const std::int64_t world_size = required_int(archive, path, "world_size");
    p.seed = static_cast<std::uint64_t>(required_int(archive, path, "seed"));
    p.partial_loss_sum = required_double(archive, path, "partial_loss_sum");
    const auto out_of_range = [&] {
        return bad_file(path, "its position is out of range (epoch " + std::to_string(epoch) + " of " +
                                  std::to_string(epochs) + ", batch " + std::to_string(p.batch) + ", world size " +
                                  std::to_string(world_size) + ")");
    };
    if (epochs < 0 || epochs > INT_MAX || epoch < 0 || epoch > INT_MAX || p.batch < 0 || world_size < 1 ||
        world_size > INT_MAX)
        throw out_of_range();
    p.epochs = static_cast<int>(epochs);
    p.epoch = static_cast<int>(epoch);
    p.world_size = static_cast<int>(world_size);
    // Formats 1 and 2 counted batches at one world size only: as many samples.
    c10::IValue samples_done, partial_batches;
    const bool in_samples = archive.try_read("samples_done", samples_done) && samples_done.isInt() &&
                            archive.try_read("partial_batches", partial_batches) && partial_batches.isInt();
    if (in_samples) {
        p.samples_done = samples_done.toInt();
        p.partial_batches = partial_batches.toInt();
    } else if (__builtin_mul_overflow(p.batch, world_size, &p.partial_batches) ||
               __builtin_mul_overflow(p.partial_batches, batch_size, &p.samples_done)) {
        throw out_of_range();
    }
    if (p.samples_done < 0 || p.partial_batches < 0) throw out_of_range();
    return p;
}

// The random generator's state, tried on a generator of its own: LibTorch checks a state
// only as it takes it, which is the last step of a load.
at::Tensor read_generator_state(torch::serialize::InputArchive& archive, const std::string& path) {
    const at::Tensor rng = required_tensor(archive, path, "rng").cpu();
    try {
        at::Generator scratch = at::detail::createCPUGenerator();
        scratch.set_state(rng);
    } catch (const c10::Error& e) {
        throw bad_file(path, "its random generator state is damaged (" + first_line(e) + ")");
    }
    return rng;
}

// The loss scaler's state, checked; none in the file (a float32 fit's, or one of an older
// build): a fresh scaler's.
std::optional<GradScalerState> read_scaler_state(torch::serialize::InputArchive& archive, const std::string& path) {
    torch::serialize::InputArchive state;
    if (!archive.try_read("scaler", state)) return std::nullopt;
    GradScaler scratch;
    try {
        scratch.load(state);
    } catch (const UsageError& e) {
        throw bad_file(path, std::string("its loss scaler's state cannot be used (") + e.what() + "): it is damaged");
    }
    return scratch.state();
}

History read_history(torch::serialize::InputArchive& archive, const std::string& path) {
    const at::Tensor bytes = required_tensor(archive, path, "history").cpu();
    History history;
    try {
        std::istringstream in(tensor_as_bytes(bytes));
        boost::archive::binary_iarchive read(in);
        read >> history;
    } catch (const std::exception& e) {
        throw bad_file(path, std::string("its History cannot be read (") + e.what() + "): it is damaged");
    }
    return history;
}

}  // namespace

LoadedCheckpoint load_checkpoint(const CheckpointBytes& bytes, torch::nn::Module& model,
                                 torch::optim::Optimizer* optimizer, GradScaler* scaler, std::int64_t batch_size) {
    // Everything is read and checked first; the model, the optimizer and the random
    // generator change only when the whole file is good.
    const std::string& path = bytes.path();
    CheckedFile file = open_checked(bytes, model);
    torch::serialize::InputArchive& archive = file.archive;
    if (required_string(archive, path, "kind") != "checkpoint")
        throw bad_file(path, "it is an export (a model without its training state): load it with load_model");
    LoadedCheckpoint loaded;
    c10::IValue kind;
    loaded.has_optimizer = archive.try_read("optimizer_kind", kind);
    if (loaded.has_optimizer && !kind.isString()) throw wrong_kind(path, "optimizer_kind", "a string");
    torch::serialize::InputArchive optimizer_state;
    if (optimizer != nullptr && loaded.has_optimizer) {
        if (kind.toStringRef() != optimizer_kind(*optimizer))
            throw bad_file(path, "it holds the state of a " + kind.toStringRef() +
                                     " optimizer, and this Learner "
                                     "trains with " +
                                     optimizer_kind(*optimizer));
        if (!archive.try_read("optimizer", optimizer_state))
            throw bad_file(path, "its optimizer state is missing: it is damaged");
    }
    std::optional<GradScalerState> scaling;
    if (scaler != nullptr && scaler->is_enabled()) scaling = read_scaler_state(archive, path);
    loaded.position = read_position(archive, path, batch_size);
    const at::Tensor rng = read_generator_state(archive, path);
    loaded.history = read_history(archive, path);

    if (optimizer != nullptr && loaded.has_optimizer) {
        try {
            optimizer->load(optimizer_state);
        } catch (const c10::Error& e) {
            throw bad_file(path, "its optimizer state does not fit this optimizer (" + first_line(e) + ")");
        }
    }
    if (scaling) scaler->load_state(*scaling);
    load_values(file);
    at::Generator generator = at::detail::getDefaultCPUGenerator();
    {
        std::lock_guard<std::mutex> lock(generator.mutex());
        generator.set_state(rng);
    }
    return loaded;
}

void load_model_bytes(const CheckpointBytes& bytes, torch::nn::Module& model) {
    CheckedFile file = open_checked(bytes, model);
    load_values(file);
}

}  // namespace learner
MPIFY_END_NAMESPACE
