module github.com/eppkit/eppkit

go 1.26

require (
	github.com/cespare/xxhash/v2 v2.3.0
	gopkg.in/yaml.v3 v3.0.1
)
