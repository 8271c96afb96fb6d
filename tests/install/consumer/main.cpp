// Uses the installed public API: a built-in config, a quantization, a checkpoint's layout named,
// and a clear error where there is no GPU. Prints what it found; exit 0 when all is as expected.
#include <cstdio>
#include <vector>

#include <megamoe/megamoe.hpp>

int main() {
  const megamoe::Config c = megamoe::load_config("kimi_k3_a8w4");
  std::printf("%s: %d experts, topk %d\n", c.name.c_str(), c.model.experts, c.model.topk);
  std::vector<float> w1(2 * 2 * 64 * 64, 0.25f), w2(2 * 64 * 64, -0.5f);
  const megamoe::Mxfp4ExpertWeights q = megamoe::quantize_expert_weights(w1.data(), w2.data(), 2, 64, 64);
  q.check();
  std::printf("quantized: %zu packed bytes\n", q.w1_packed.size());
  const megamoe::CheckpointTensors t{.w1 = q.w1_packed.data(), .w1_scales = q.w1_scales.data(),
                                     .w2 = q.w2_packed.data(), .w2_scales = q.w2_scales.data()};
  const megamoe::Mxfp4ExpertWeights l = megamoe::load_checkpoint(megamoe::CheckpointLayout::halves, 2, 64, 64, t);
  try {
    megamoe::Runtime::create("kimi_k3_a8w4");
    std::printf("a GPU is present\n");
  } catch (const megamoe::NoGpuError& e) {
    std::printf("no GPU: %s\n", e.what());
  }
  return c.model.experts == 896 && q.w1_packed.size() == 2 * 128 * 32 && l.w1_packed == q.w1_packed ? 0 : 1;
}
