package passthrough_test

import (
	"fmt"

	"github.com/eppkit/eppkit/parsers/passthrough"
)

// The fallback parser never rejects a body; it reads the model when the body
// is a well-formed JSON object.
func ExampleParser_ParseRequest() {
	p := &passthrough.Parser{}
	b, _ := p.ParseRequest("", []byte(`{"model":"custom","instances":[1,2]}`))
	fmt.Printf("%q\n", b.Model)
	b, _ = p.ParseRequest("", []byte(`binary \x00 payload`))
	fmt.Printf("%q %d\n", b.Model, len(b.Raw))
	// Output:
	// "custom"
	// "" 19
}
