// Builds SerialEngine runners that generate with the real model (engine/generator.h).
#pragma once
#include <memory>

#include "engine/serial_engine.h"
#include "model/model.h"
#include "tokenizer/tokenizer.h"

namespace rapid {

// Each request gets its own Generator (and KV cache) over the shared model and tokenizer.
RunnerFactory make_generator_runner_factory(std::shared_ptr<Model> model, std::shared_ptr<const Tokenizer> tok);

}  // namespace rapid
