// Package models lets plugins know which models and LoRA adapters each
// endpoint serves: the models-data-source plugin (Source) polls the
// OpenAI-compatible GET /v1/models of every endpoint and stores the list in
// the endpoint attribute Key; Of and Serves read it.
//
// The source extracts its own data, so configuring it alone is enough; the
// models-data-extractor plugin (Extractor) does the same job for
// configurations that name an extractor explicitly, as llm-d's do.
package models
