// Package client is a typed Go client for payd's HTTP API, generated from
// handler/openapi.yaml (the document payd serves at /openapi.yaml) with the
// oapi-codegen version pinned as a tool in go.mod, so it works offline from
// the module cache. A test fails when the committed code differs from what
// the generator makes of the current document: regenerate with
// `go generate ./client`.
package client

//go:generate go run github.com/oapi-codegen/oapi-codegen/v2/cmd/oapi-codegen -config oapi-codegen.yaml -o client.gen.go ../handler/openapi.yaml
