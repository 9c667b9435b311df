package discovery_test

import (
	"fmt"

	"github.com/eppkit/eppkit/datalayer/discovery"
)

// An endpoints file: YAML or JSON, ports as numbers or strings.
func ExampleParseFile() {
	ts, err := discovery.ParseFile([]byte(`endpoints:
- name: vllm-0
  address: 10.0.0.1
  port: 8000
  labels: {llm-d.ai/engine-type: vllm}
- name: vllm-1
  address: 10.0.0.2
  port: "8000"
`))
	fmt.Println(err)
	for _, t := range ts {
		fmt.Println(t.Name, t.Address, t.Port, t.Labels)
	}
	_, err = discovery.ParseFile([]byte(`endpoints: [{name: vllm-0, address: vllm-0.local, port: 8000}]`))
	fmt.Println(err)
	// Output:
	// <nil>
	// vllm-0 10.0.0.1 8000 map[llm-d.ai/engine-type:vllm]
	// vllm-1 10.0.0.2 8000 map[]
	// endpoints[0]: vllm-0: address "vllm-0.local" is not an IP address
}
