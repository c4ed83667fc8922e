// Package docs holds the documents of the fence v1 HTTP API: API.md, the
// human contract, and openapi.yaml, the same contract as an OpenAPI 3.1
// document, embedded as JSON so that a server can answer it without a YAML
// parser.
package docs

import _ "embed" // for go:embed

//go:generate go test -run TestOpenAPIJSON -update

// OpenAPIJSON is openapi.yaml converted to JSON (members in the YAML's order):
// the OpenAPI 3.1 document of the v1 HTTP API, which every server answers at
// GET /v1/openapi.json. "go generate" rewrites openapi.json from the YAML, and
// TestOpenAPIJSON fails when the two differ.
//
//go:embed openapi.json
var OpenAPIJSON []byte
