// Package anthropic parses Anthropic Messages API requests and responses:
// messages and messages/count_tokens.
//
// The system prompt (a string or text blocks) becomes Body.System, the tool
// definitions Body.Tools, and each message's content blocks are flattened in
// order: text, thinking, redacted thinking, tool use (name and input) and
// tool results (their nested content) add to the message text; images and
// documents become Message.Media. Responses report usage split over the
// stream: input and cache tokens in message_start, output tokens in
// message_delta; ParseResponse adds them up.
package anthropic
