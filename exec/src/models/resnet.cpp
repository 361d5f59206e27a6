// ResNet-152 as torchvision's resnet152(): Bottleneck blocks [3, 8, 36, 3] (v1.5: the stride
// on the 3x3 convolution), BatchNorm eps 1e-5, input N x 3 x 224 x 224 (any H, W >= 32 run),
// 1000 classes.

#include <vector>

#include "models/zoo_base.hpp"

namespace psw::exec::detail {
namespace {

namespace nn = torch::nn;

constexpr double kResNetBnEps = 1e-5;
constexpr std::int64_t kResNetImage = 224;  // example_input
constexpr std::int64_t kResNetMinImage = 32;  // forward: H, W >= 32 (1 x 1 before the pooling)

class ResNet152 final : public ZooBase {
 public:
  ResNet152() : ZooBase("resnet152") {
    conv1_ = conv("conv1", 3, 64, {7, 7}, {2, 2}, {3, 3});
    bn1_ = bn("bn1", 64, kResNetBnEps);
    std::int64_t inplanes = 64;
    const std::int64_t planes_of[] = {64, 128, 256, 512};
    const int blocks_of[] = {3, 8, 36, 3};
    for (int li = 0; li < 4; ++li) {
      const std::int64_t planes = planes_of[li];
      for (int bi = 0; bi < blocks_of[li]; ++bi) {
        const std::int64_t s = (bi == 0 && li > 0) ? 2 : 1;
        const std::string p = "layer" + std::to_string(li + 1) + "." + std::to_string(bi);
        Block b;
        b.conv1 = conv(p + ".conv1", inplanes, planes, {1, 1});
        b.bn1 = bn(p + ".bn1", planes, kResNetBnEps);
        b.conv2 = conv(p + ".conv2", planes, planes, {3, 3}, {s, s}, {1, 1});
        b.bn2 = bn(p + ".bn2", planes, kResNetBnEps);
        b.conv3 = conv(p + ".conv3", planes, planes * 4, {1, 1});
        b.bn3 = bn(p + ".bn3", planes * 4, kResNetBnEps);
        if (bi == 0 && (s != 1 || inplanes != planes * 4)) {
          b.down_conv = conv(p + ".downsample.0", inplanes, planes * 4, {1, 1}, {s, s});
          b.down_bn = bn(p + ".downsample.1", planes * 4, kResNetBnEps);
        }
        blocks_.push_back(std::move(b));
        inplanes = planes * 4;
      }
    }
    fc_ = linear("fc", 512 * 4, 1000);
    initialise(/*embedding_std=*/0.0);
    // Residual branches end small, as in trained networks, so that the 50 residual additions
    // do not blow the activations up.
    for (Block& b : blocks_) scale_bn_weight(b.bn3, 0.2);
  }

  torch::Tensor example_input(int batch, std::uint64_t seed) const override {
    return random_images(batch, kResNetImage, seed);
  }

  std::vector<torch::Tensor> outputs(const torch::Tensor& input, Cursor& c) override {
    check_image(input, kResNetMinImage);
    torch::Tensor x = torch::relu(step(c, bn1_, step(c, conv1_, input)));
    x = torch::max_pool2d(x, {3, 3}, {2, 2}, {1, 1});
    for (Block& b : blocks_) {
      torch::Tensor y = torch::relu(step(c, b.bn1, step(c, b.conv1, x)));
      y = torch::relu(step(c, b.bn2, step(c, b.conv2, y)));
      y = step(c, b.bn3, step(c, b.conv3, y));
      torch::Tensor identity = x;
      if (!b.down_conv.is_empty()) identity = step(c, b.down_bn, step(c, b.down_conv, x));
      x = torch::relu(y + identity);
    }
    x = torch::adaptive_avg_pool2d(x, {1, 1}).flatten(1);
    x = step(c, fc_, x);
    c.finish();
    return {x};
  }

 private:
  struct Block {
    nn::Conv2d conv1{nullptr}, conv2{nullptr}, conv3{nullptr}, down_conv{nullptr};
    nn::BatchNorm2d bn1{nullptr}, bn2{nullptr}, bn3{nullptr}, down_bn{nullptr};
  };
  nn::Conv2d conv1_{nullptr};
  nn::BatchNorm2d bn1_{nullptr};
  std::vector<Block> blocks_;
  nn::Linear fc_{nullptr};
};

}  // namespace

std::unique_ptr<ZooModel> build_resnet152() { return std::make_unique<ResNet152>(); }

}  // namespace psw::exec::detail
