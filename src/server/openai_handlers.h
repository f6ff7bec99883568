// Endpoints of the OpenAI API: chat completions, completions, models.
#pragma once
#include "server/handler_context.h"
#include "server/openai_request.h"
#include "server/turn.h"

namespace rapid::server {

void handle_chat_completions(HandlerContext& ctx, const httplib::Request& req, httplib::Response& res);
void handle_completions(HandlerContext& ctx, const httplib::Request& req, httplib::Response& res);
void handle_list_models(const ModelRegistry& models, const EmbeddingService* embeddings, const httplib::Request& req,
                        httplib::Response& res);
void handle_get_model(const ModelRegistry& models, const EmbeddingService* embeddings, const httplib::Request& req,
                      httplib::Response& res);

// Turn spec for a chat-shaped request (shared with the Anthropic and Responses handlers).
TurnSpec make_chat_turn(HandlerContext& ctx, const nlohmann::ordered_json& messages, const nlohmann::ordered_json& tools,
                        ToolMode mode, const std::string& forced, const ConstraintSpec& constraint,
                        engine::GenerationRequest gen, const nlohmann::ordered_json& template_extra);
// A request body as the turn it asks for (parsed into `cr`, model checked, prompt rendered and
// fitted to the context); the generation handlers and the render endpoints share them.
TurnSpec chat_turn(HandlerContext& ctx, const nlohmann::ordered_json& body, ChatRequest& cr);
TurnSpec completion_turn(HandlerContext& ctx, const nlohmann::ordered_json& body, CompletionRequest& cr);

}  // namespace rapid::server
