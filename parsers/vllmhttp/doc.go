// Package vllmhttp parses vLLM's token-in, token-out generate API
// (inference/v1/generate): the client sends the prompt's token ids, so
// prefix routing hashes the real tokens. OpenAI-compatible paths of a vLLM
// server belong to the openai parser.
package vllmhttp
