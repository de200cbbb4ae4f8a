// Package fuzz holds the go test -fuzz targets over sipedge's public parsing
// API. Seed corpora live in testdata/fuzz/; crashers found become seeds.
package fuzz
