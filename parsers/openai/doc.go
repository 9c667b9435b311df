// Package openai parses OpenAI-compatible requests and responses, the APIs
// vLLM, SGLang and most engines serve: completions, chat/completions,
// embeddings, responses, conversations and vLLM's render endpoints.
//
// Bodies are read once with a parsers.Decoder into the typed parsers.Body:
// no reflection, no generic map. Chat messages keep their role and their text
// (text parts, refusals, tool calls as name + arguments); images, audio,
// video and files become Message.Media. Responses-API input items (messages,
// function calls and their outputs, reasoning summaries) and conversation
// items become messages the same way.
package openai
