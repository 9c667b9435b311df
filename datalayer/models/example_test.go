package models_test

import (
	"fmt"

	"github.com/eppkit/eppkit/datalayer"
	"github.com/eppkit/eppkit/datalayer/models"
)

// Plugins ask an endpoint which models and adapters it serves.
func ExampleServes() {
	list, _ := models.Parse([]byte(`{"object":"list","data":[{"id":"llama"},{"id":"sql-lora","parent":"llama"}]}`))
	e := datalayer.New("vllm-0", "10.0.0.1", 8000, nil)
	_ = models.Extractor{}.Extract(list, e) // what the data layer does on each poll
	fmt.Println(models.Serves(e, "sql-lora"), models.Serves(e, "other"))
	// Output:
	// true false
}
