package docs_test

// The OpenAPI document against the server's own tables (the routes of
// wire.Routes as httpapi answers them, the problem codes of package wire) and
// against API.md, so that none of the three can gain a route, a method or a
// code that the others do not have.

import (
	"fmt"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"

	"github.com/fence-lock/fence/docs"
	"github.com/fence-lock/fence/httpapi"
	"github.com/fence-lock/fence/wire"
)

func loadDoc(t *testing.T) *openapi3.T {
	t.Helper()
	doc, err := openapi3.NewLoader().LoadFromData(docs.OpenAPIJSON)
	if err != nil {
		t.Fatal(err)
	}
	return doc
}

// TestOpenAPIDriftRoutes fails when the server has a route or a method that
// the document does not, or the other way round, or when they disagree on
// whether a route is answered locally (x-fence-local).
func TestOpenAPIDriftRoutes(t *testing.T) {
	doc := loadDoc(t)
	server := map[string]httpapi.Route{}
	for _, rt := range httpapi.Routes() {
		server[rt.Pattern] = rt
		item := doc.Paths.Value(rt.Pattern)
		if item == nil {
			t.Errorf("the server has %s %s, which docs/openapi.yaml does not", strings.Join(rt.Methods, ", "), rt.Pattern)
			continue
		}
		var methods []string
		for m := range item.Operations() {
			methods = append(methods, strings.ToUpper(m))
		}
		if want, got := sorted(rt.Methods), sorted(methods); !slices.Equal(want, got) {
			t.Errorf("%s: the server answers %s, docs/openapi.yaml has %s", rt.Pattern, strings.Join(want, ", "), strings.Join(got, ", "))
		}
		if local := item.Extensions["x-fence-local"] == true; local != rt.Local {
			t.Errorf("%s: local %v in the server, x-fence-local %v in docs/openapi.yaml", rt.Pattern, rt.Local, local)
		}
		for m, op := range item.Operations() {
			if limited := op.Responses.Status(429) != nil; limited == rt.Exempt {
				t.Errorf("%s %s: exempt from rate limits %v in the server, but 429 documented %v", m, rt.Pattern, rt.Exempt, limited)
			}
		}
	}
	for _, path := range doc.Paths.InMatchingOrder() {
		if _, ok := server[path]; !ok {
			t.Errorf("docs/openapi.yaml has %s, which the server does not", path)
		}
	}
}

// TestOpenAPIDriftOperations fails when an operation of the route table
// (wire.Routes) and the document's operation of the same method and path
// differ in operationId, in the permission it needs (x-fence-permission), or
// in whether it needs credentials at all (security).
func TestOpenAPIDriftOperations(t *testing.T) {
	doc := loadDoc(t)
	for _, rt := range wire.Routes {
		item := doc.Paths.Value(rt.Pattern)
		if item == nil {
			continue // TestOpenAPIDriftRoutes says so
		}
		for _, op := range rt.Ops {
			dop := item.GetOperation(op.Method)
			if dop == nil {
				continue // TestOpenAPIDriftRoutes says so
			}
			if dop.OperationID != op.ID {
				t.Errorf("%s %s: operationId %q in docs/openapi.yaml, %q in wire.Routes", op.Method, rt.Pattern, dop.OperationID, op.ID)
			}
			perm, _ := dop.Extensions["x-fence-permission"].(string)
			if wire.Perm(perm) != op.Perm {
				t.Errorf("%s: x-fence-permission %q in docs/openapi.yaml, %q in wire.Routes", op.ID, perm, op.Perm)
			}
			open := dop.Security != nil && len(*dop.Security) == 0
			optional := dop.Security != nil && slices.ContainsFunc(*dop.Security, func(r openapi3.SecurityRequirement) bool { return len(r) == 0 })
			switch {
			case op.Access == wire.Open && !open:
				t.Errorf("%s: open in wire.Routes, but docs/openapi.yaml asks for credentials", op.ID)
			case op.Access == wire.AdminIfProtected && !optional:
				t.Errorf("%s: credentials optional in wire.Routes, but not in docs/openapi.yaml (security: [{}, bearerAuth])", op.ID)
			case op.Access != wire.Open && op.Access != wire.AdminIfProtected && (open || optional):
				t.Errorf("%s: needs credentials in wire.Routes, but not in docs/openapi.yaml", op.ID)
			}
		}
	}
}

// TestOpenAPIDriftProblemCodes fails when the server's problem codes and the
// document's ProblemCode enum differ, or a code has no schema of its own
// with its code and status.
func TestOpenAPIDriftProblemCodes(t *testing.T) {
	doc := loadDoc(t)
	var enum []string
	for _, v := range doc.Components.Schemas["ProblemCode"].Value.Enum {
		enum = append(enum, fmt.Sprint(v))
	}
	if server := httpapi.ProblemCodes(); !slices.Equal(server, enum) {
		t.Errorf("the server's problem codes, in order:\n  %s\nthe ProblemCode enum of docs/openapi.yaml:\n  %s", strings.Join(server, " "), strings.Join(enum, " "))
	}
	statuses := docStatuses(t, doc)
	// The table in ProblemCode's description.
	table := codeTable(t, "ProblemCode's description", doc.Components.Schemas["ProblemCode"].Value.Description)
	for _, code := range enum {
		if table[code] != statuses[code] {
			t.Errorf("%s: status %d in ProblemCode's description, %d in its schema", code, table[code], statuses[code])
		}
	}
	if len(table) != len(enum) {
		t.Errorf("ProblemCode's description lists %d codes, its enum %d", len(table), len(enum))
	}
}

// docStatuses returns the status of each code of the enum, from its
// <Code>Problem schema, and fails t for a code without one.
func docStatuses(t *testing.T, doc *openapi3.T) map[string]int {
	t.Helper()
	statuses := map[string]int{}
	for _, v := range doc.Components.Schemas["ProblemCode"].Value.Enum {
		code := fmt.Sprint(v)
		name := schemaName(code)
		ref := doc.Components.Schemas[name]
		if ref == nil {
			t.Errorf("code %s has no schema %s", code, name)
			continue
		}
		s := ref.Value
		c, st, ty := s.Properties["code"], s.Properties["status"], s.Properties["type"]
		if c == nil || st == nil || ty == nil || c.Value.Const != code || ty.Value.Const != "urn:fence:problem:"+code {
			t.Errorf("schema %s does not fix code %s and its type", name, code)
			continue
		}
		status, ok := st.Value.Const.(float64)
		if !ok {
			t.Errorf("schema %s does not fix a status", name)
			continue
		}
		statuses[code] = int(status)
		found := false
		for _, one := range doc.Components.Schemas["AnyProblem"].Value.OneOf {
			found = found || one.Ref == "#/components/schemas/"+name
		}
		if !found {
			t.Errorf("AnyProblem lacks %s", name)
		}
	}
	return statuses
}

// schemaName returns the schema of a code: fenced is FencedProblem.
func schemaName(code string) string {
	var b strings.Builder
	for w := range strings.SplitSeq(code, "_") {
		b.WriteString(strings.ToUpper(w[:1]) + w[1:])
	}
	return b.String() + "Problem"
}

// codeTable reads the rows "| `code` | status | ..." of a Markdown table.
func codeTable(t *testing.T, what, text string) map[string]int {
	t.Helper()
	row := regexp.MustCompile("(?m)^\\| `([a-z_]+)` \\| ([0-9]{3}) \\|")
	m := map[string]int{}
	for _, r := range row.FindAllStringSubmatch(text, -1) {
		if _, dup := m[r[1]]; dup {
			t.Errorf("%s lists %s twice", what, r[1])
		}
		m[r[1]], _ = strconv.Atoi(r[2])
	}
	if len(m) == 0 {
		t.Fatalf("%s has no table of codes", what)
	}
	return m
}

// TestAPIMDErrorTable fails when the error table of API.md and the
// document's codes differ, in codes or in statuses.
func TestAPIMDErrorTable(t *testing.T) {
	md, err := os.ReadFile("API.md")
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(md), "\n## Errors\n")
	if !ok {
		t.Fatal("API.md has no section ## Errors")
	}
	section, _, _ = strings.Cut(section, "\n## ")
	table := codeTable(t, "API.md's error table", section)
	doc := loadDoc(t)
	statuses := docStatuses(t, doc)
	for code, status := range table {
		want, ok := statuses[code]
		switch {
		case !ok:
			t.Errorf("API.md's error table has %s, which the ProblemCode enum of docs/openapi.yaml does not", code)
		case status != want:
			t.Errorf("%s: status %d in API.md, %d in docs/openapi.yaml", code, status, want)
		}
	}
	for code := range statuses {
		if _, ok := table[code]; !ok {
			t.Errorf("docs/openapi.yaml has code %s, which API.md's error table does not", code)
		}
	}
}

func sorted(s []string) []string {
	s = slices.Clone(s)
	slices.Sort(s)
	return s
}
