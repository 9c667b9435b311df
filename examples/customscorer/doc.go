// Package customscorer shows a plugin author's whole job: a scorer in one
// small file, registered beside the stock set, used from YAML, and
// unit-tested in a few lines with the test kit.
package customscorer
