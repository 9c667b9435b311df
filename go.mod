module github.com/eppkit/eppkit

go 1.26
