#include "engine/engine_runner.h"

#include "engine/generator.h"

namespace rapid {

namespace {

class GeneratorRunner : public SequenceRunner {
 public:
  GeneratorRunner(std::shared_ptr<Model> model, std::shared_ptr<const Tokenizer> tok, const GenerationRequest& req)
      : model_(std::move(model)), tok_(std::move(tok)), gen_(*model_, *tok_, req) {}
  GenerationEvent step() override { return gen_.step(); }

 private:
  std::shared_ptr<Model> model_;
  std::shared_ptr<const Tokenizer> tok_;
  Generator gen_;
};

}  // namespace

RunnerFactory make_generator_runner_factory(std::shared_ptr<Model> model, std::shared_ptr<const Tokenizer> tok) {
  return [model, tok](const GenerationRequest& req) { return std::make_unique<GeneratorRunner>(model, tok, req); };
}

}  // namespace rapid
