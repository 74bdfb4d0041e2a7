#pragma once
// fastai-style pictures of a training run, as SVG: the loss curves (plot_losses), a grid
// of training images with their labels (show_batch), and test images with the model's
// answer beside the truth (show_results).
//
// Free of LibTorch: a notebook includes it and shows the pictures with xcpp::display
// (include notebook.hpp for that); a compiled program saves them (Svg::save).
#include <mpify/abi.hpp>
#include <mpify/learner/confusion.hpp>
#include <mpify/learner/history.hpp>
#include <mpify/learner/lr_finder.hpp>
#include <mpify/learner/image.hpp>

#include <string>
#include <vector>

MPIFY_BEGIN_NAMESPACE
namespace learner {

/// An SVG document.
struct Svg {
    std::string text;  ///< the whole document, `<svg ...>...</svg>`
    /// Writes the document to `path`; throws std::runtime_error naming it on failure.
    void save(const std::string& path) const;
};

/// Training loss of every batch (rank 0's) and validation loss of every epoch, against
/// the number of batches trained, as fastai's Recorder.plot_loss draws them.
Svg plot_losses(const History& history);

/// Images in a grid of `columns`, each captioned with its label.
Svg show_batch(const std::vector<LabeledImage>& images, int columns = 6);

/// Images in a grid of `columns`, each captioned "truth → predicted", green when the
/// model was right and red when it was not.
Svg show_results(const std::vector<LabeledImage>& images, int columns = 4);

/// The finder's smoothed loss against the learning rate (a log scale), its valley and
/// minimum suggestions marked (fastai's lr_find plot).
Svg plot_lr_find(const LrFinderResult& result);
/// The confusion matrix as a grid of cells shaded by count, the truth down the side and
/// the model's answer along the bottom (fastai's plot_confusion_matrix).
Svg plot_confusion_matrix(const ConfusionMatrix& matrix);
/// The items of largest loss in a grid of `columns`, each captioned "predicted / actual"
/// and "loss / probability" (fastai's plot_top_losses); items without an image get a
/// caption only.
Svg plot_top_losses(const std::vector<TopLoss>& items, int columns = 4);
/// A PNG file's bytes for a grayscale image (used inside the SVGs).
std::string encode_png(const Image& image);

/// Base64 of `bytes` (RFC 4648, with padding).
std::string base64(const std::string& bytes);

}  // namespace learner
MPIFY_END_NAMESPACE
