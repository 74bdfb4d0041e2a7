#pragma once
// fastai's ClassificationInterpretation for the Learner: from the predictions
// of a whole data set (Learner::get_preds), the confusion matrix, the pairs of classes
// most confused and the items with the largest losses.
#include <mpify/abi.hpp>
#include <mpify/learner/confusion.hpp>
#include <mpify/learner/learner.hpp>

#include <cstdint>
#include <string>
#include <vector>

MPIFY_BEGIN_NAMESPACE
namespace learner {

/// Interprets the outputs of a single-label classifier: logits (N, classes), targets (N).
class ClassificationInterpretation {
public:
    /// Throws std::invalid_argument when the outputs are not (N, classes) with classes ==
    /// class_names.size(), or the targets and losses are not N long.
    ClassificationInterpretation(Predictions predictions, std::vector<std::string> class_names);
    /// From `learn`'s predictions on its validation set (every rank calls it under DDP).
    static ClassificationInterpretation from_learner(Learner& learn, std::vector<std::string> class_names);

    /// How often each class was predicted as each class, over all the items.
    ConfusionMatrix confusion_matrix() const;
    /// The `k` items of largest loss, largest first; with `images`, each carries its input
    /// as a picture (inputs of (1, H, W) or (H, W), values as tensor_image takes them).
    std::vector<TopLoss> top_losses(std::int64_t k, const at::Tensor& images = at::Tensor()) const;
    /// The predictions it interprets, as given.
    const Predictions& predictions() const { return predictions_; }

private:
    Predictions predictions_;
    std::vector<std::string> class_names_;
    at::Tensor predicted_;      ///< the argmax class of each item
    at::Tensor probabilities_;  ///< softmax of the outputs
};

}  // namespace learner
MPIFY_END_NAMESPACE
