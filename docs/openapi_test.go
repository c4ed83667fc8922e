package docs

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"math/big"
	"os"
	"strconv"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
	"go.yaml.in/yaml/v4"
)

var update = flag.Bool("update", false, "rewrite openapi.json from openapi.yaml")

// TestOpenAPIJSON checks that openapi.json, which the server embeds, is
// openapi.yaml converted; with -update (go generate) it rewrites it.
func TestOpenAPIJSON(t *testing.T) {
	src, err := os.ReadFile("openapi.yaml")
	if err != nil {
		t.Fatal(err)
	}
	want, err := yamlToJSON(src)
	if err != nil {
		t.Fatalf("openapi.yaml: %v", err)
	}
	if *update {
		if err := os.WriteFile("openapi.json", want, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	if !bytes.Equal(OpenAPIJSON, want) {
		t.Fatalf("openapi.json is not openapi.yaml converted: run go generate ./docs")
	}
}

// TestOpenAPIValid loads the embedded document as a server's clients would
// and checks that it is a valid OpenAPI 3.1 document whose examples match
// their schemas.
func TestOpenAPIValid(t *testing.T) {
	doc, err := openapi3.NewLoader().LoadFromData(OpenAPIJSON)
	if err != nil {
		t.Fatal(err)
	}
	if !doc.IsOpenAPI31OrLater() || doc.OpenAPI != "3.1.0" {
		t.Errorf("openapi %q, want 3.1.0", doc.OpenAPI)
	}
	if err := doc.Validate(context.Background(), openapi3.EnableExamplesValidation()); err != nil {
		t.Fatal(err)
	}
	// Every token schema says that tokens need 64 bits.
	for _, name := range []string{"Token", "TokenOrZero", "Revision"} {
		s := doc.Components.Schemas[name].Value
		if s.Format != "int64" || !bytes.Contains([]byte(s.Description), []byte("2^53")) {
			t.Errorf("schema %s: format %q, description %q; want int64 and a word on 2^53", name, s.Format, s.Description)
		}
	}
}

// yamlToJSON converts a YAML document to indented JSON, keeping the order of
// mapping keys and the exact digits of integers (a float64 would turn
// 9223372036854775807 into 9223372036854775808). It accepts plain JSON-like
// YAML only: no anchors, aliases, merge keys or tags other than the core ones.
func yamlToJSON(src []byte) ([]byte, error) {
	var root yaml.Node
	if err := yaml.Unmarshal(src, &root); err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	if err := writeJSON(&buf, &root); err != nil {
		return nil, err
	}
	var out bytes.Buffer
	if err := json.Indent(&out, buf.Bytes(), "", "  "); err != nil {
		return nil, err
	}
	out.WriteByte('\n')
	return out.Bytes(), nil
}

func writeJSON(buf *bytes.Buffer, n *yaml.Node) error {
	if n.Anchor != "" {
		return fmt.Errorf("line %d: anchors are not supported", n.Line)
	}
	switch n.Kind {
	case yaml.DocumentNode:
		if len(n.Content) != 1 {
			return errors.New("want one document")
		}
		return writeJSON(buf, n.Content[0])
	case yaml.MappingNode:
		buf.WriteByte('{')
		seen := map[string]bool{}
		for i := 0; i+1 < len(n.Content); i += 2 {
			k := n.Content[i]
			if k.Kind != yaml.ScalarNode || k.ShortTag() == "!!merge" {
				return fmt.Errorf("line %d: a key must be a plain scalar", k.Line)
			}
			if seen[k.Value] {
				return fmt.Errorf("line %d: duplicate key %q", k.Line, k.Value)
			}
			seen[k.Value] = true
			if i > 0 {
				buf.WriteByte(',')
			}
			writeString(buf, k.Value)
			buf.WriteByte(':')
			if err := writeJSON(buf, n.Content[i+1]); err != nil {
				return err
			}
		}
		buf.WriteByte('}')
	case yaml.SequenceNode:
		buf.WriteByte('[')
		for i, e := range n.Content {
			if i > 0 {
				buf.WriteByte(',')
			}
			if err := writeJSON(buf, e); err != nil {
				return err
			}
		}
		buf.WriteByte(']')
	case yaml.ScalarNode:
		return writeScalar(buf, n)
	default:
		return fmt.Errorf("line %d: aliases are not supported", n.Line)
	}
	return nil
}

func writeScalar(buf *bytes.Buffer, n *yaml.Node) error {
	switch n.ShortTag() {
	case "!!str":
		writeString(buf, n.Value)
	case "!!null":
		buf.WriteString("null")
	case "!!bool":
		var b bool
		if err := n.Decode(&b); err != nil {
			return err
		}
		buf.WriteString(strconv.FormatBool(b))
	case "!!int":
		i, ok := new(big.Int).SetString(n.Value, 0)
		if !ok {
			return fmt.Errorf("line %d: integer %q", n.Line, n.Value)
		}
		buf.WriteString(i.String())
	case "!!float":
		var f float64
		if err := n.Decode(&f); err != nil {
			return err
		}
		b, err := json.Marshal(f)
		if err != nil {
			return fmt.Errorf("line %d: %w", n.Line, err)
		}
		buf.Write(b)
	default:
		return fmt.Errorf("line %d: tag %s is not supported", n.Line, n.ShortTag())
	}
	return nil
}

// writeString writes s as a JSON string, leaving <, > and & as they are.
func writeString(buf *bytes.Buffer, s string) {
	enc := json.NewEncoder(buf)
	enc.SetEscapeHTML(false)
	// A string always encodes; Encode ends it with a newline.
	enc.Encode(s)
	buf.Truncate(buf.Len() - 1)
}
