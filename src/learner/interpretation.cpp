#include <mpify/learner/interpretation.hpp>

#include <mpify/learner/tensor_image.hpp>

#include <torch/torch.h>

#include <algorithm>
#include <stdexcept>

MPIFY_BEGIN_NAMESPACE
namespace learner {

std::vector<Confusion> ConfusionMatrix::most_confused(std::int64_t min_count) const {
    std::vector<Confusion> out;
    for (std::size_t actual = 0; actual < counts.size(); ++actual)
        for (std::size_t predicted = 0; predicted < counts[actual].size(); ++predicted)
            if (actual != predicted && counts[actual][predicted] >= min_count && counts[actual][predicted] > 0)
                out.push_back({class_names[actual], class_names[predicted], counts[actual][predicted]});
    std::stable_sort(out.begin(), out.end(), [](const Confusion& a, const Confusion& b) { return a.count > b.count; });
    return out;
}

double ConfusionMatrix::accuracy() const {
    std::int64_t right = 0, all = 0;
    for (std::size_t actual = 0; actual < counts.size(); ++actual)
        for (std::size_t predicted = 0; predicted < counts[actual].size(); ++predicted) {
            all += counts[actual][predicted];
            if (actual == predicted) right += counts[actual][predicted];
        }
    return all == 0 ? 0.0 : static_cast<double>(right) / static_cast<double>(all);
}

ClassificationInterpretation::ClassificationInterpretation(Predictions predictions,
                                                           std::vector<std::string> class_names)
    : predictions_(std::move(predictions)), class_names_(std::move(class_names)) {
    const at::Tensor& outputs = predictions_.outputs;
    const auto classes = static_cast<std::int64_t>(class_names_.size());
    if (outputs.dim() != 2 || outputs.size(1) != classes)
        throw std::invalid_argument("ClassificationInterpretation: the outputs are " + std::to_string(outputs.dim()) +
                                    "-dimensional with " + std::to_string(outputs.dim() == 2 ? outputs.size(1) : 0) +
                                    " columns; a classifier of the " + std::to_string(classes) +
                                    " classes named gives (items, " + std::to_string(classes) + ")");
    if (predictions_.targets.numel() != outputs.size(0) || predictions_.losses.numel() != outputs.size(0))
        throw std::invalid_argument("ClassificationInterpretation: " + std::to_string(outputs.size(0)) +
                                    " outputs, but " + std::to_string(predictions_.targets.numel()) + " targets and " +
                                    std::to_string(predictions_.losses.numel()) + " losses");
    predicted_ = outputs.argmax(1);
    probabilities_ = torch::softmax(outputs.to(torch::kFloat), 1);
}

ClassificationInterpretation ClassificationInterpretation::from_learner(Learner& learn,
                                                                        std::vector<std::string> class_names) {
    return ClassificationInterpretation(learn.get_preds(), std::move(class_names));
}

ConfusionMatrix ClassificationInterpretation::confusion_matrix() const {
    const auto classes = static_cast<std::int64_t>(class_names_.size());
    const at::Tensor cells = predictions_.targets.to(torch::kLong).reshape({-1}) * classes + predicted_;
    const at::Tensor counts = torch::bincount(cells, {}, classes * classes).reshape({classes, classes});
    ConfusionMatrix matrix;
    matrix.class_names = class_names_;
    for (std::int64_t actual = 0; actual < classes; ++actual) {
        const at::Tensor row = counts[actual].contiguous();
        matrix.counts.emplace_back(row.data_ptr<std::int64_t>(), row.data_ptr<std::int64_t>() + classes);
    }
    return matrix;
}

std::vector<TopLoss> ClassificationInterpretation::top_losses(std::int64_t k, const at::Tensor& images) const {
    k = std::clamp<std::int64_t>(k, 0, predictions_.losses.numel());
    const auto [losses, indices] = predictions_.losses.topk(k);
    std::vector<TopLoss> out;
    for (std::int64_t i = 0; i < k; ++i) {
        TopLoss item;
        item.index = indices[i].item<std::int64_t>();
        const std::int64_t predicted = predicted_[item.index].item<std::int64_t>();
        item.actual = class_names_.at(static_cast<std::size_t>(predictions_.targets[item.index].item<std::int64_t>()));
        item.predicted = class_names_.at(static_cast<std::size_t>(predicted));
        item.loss = losses[i].item<double>();
        item.probability = probabilities_[item.index][predicted].item<double>();
        if (images.defined()) item.image = image_from_tensor(images[item.index]);
        out.push_back(std::move(item));
    }
    return out;
}

}  // namespace learner
MPIFY_END_NAMESPACE
