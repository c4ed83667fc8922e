// Package report writes the HTML reports of fence's long runs (fence bench
// --report, fence chaos --report): one self-contained file, readable
// offline and attachable to an issue. It fetches nothing: the styles are
// inline and the charts are inline SVG.
package report

import (
	"bytes"
	"fmt"
	"html/template"
	"io"
	"regexp"
	"slices"
	"strings"
)

// Page is one report: a title, a line under it, and sections in order.
type Page struct {
	Title    string
	Subtitle string
	sections []section
	styles   []string // extra CSS of the blocks used, each once
}

type section struct {
	Title  string
	ID     string
	Blocks []template.HTML
}

// Block is what a section holds: text, a table, a chart. Each renders
// itself as HTML, with everything escaped that needs to be.
type Block interface {
	// HTML returns the block's markup.
	HTML() template.HTML
}

// Styled is a Block with CSS of its own, added to the page once per kind.
type Styled interface {
	Block
	// CSS returns the style rules the block's markup needs.
	CSS() string
}

// Section adds a section titled title, with id (an anchor that links may
// point at; "" for none), holding blocks in order.
func (p *Page) Section(title, id string, blocks ...Block) {
	s := section{Title: title, ID: id}
	for _, b := range blocks {
		s.Blocks = append(s.Blocks, b.HTML())
		if st, ok := b.(Styled); ok && !slices.Contains(p.styles, st.CSS()) {
			p.styles = append(p.styles, st.CSS())
		}
	}
	p.sections = append(p.sections, s)
}

// WriteTo writes the page as one HTML document.
func (p *Page) WriteTo(w io.Writer) (int64, error) {
	var b bytes.Buffer
	err := pageTemplate.Execute(&b, struct {
		Title, Subtitle string
		Style           template.CSS
		Sections        []section
	}{p.Title, p.Subtitle, template.CSS(baseCSS + strings.Join(p.styles, "\n")), p.sections})
	if err != nil {
		return 0, fmt.Errorf("report: %w", err)
	}
	return b.WriteTo(w)
}

// Text is a paragraph of plain text.
type Text string

// HTML implements Block.
func (t Text) HTML() template.HTML {
	return template.HTML("<p>" + template.HTMLEscapeString(string(t)) + "</p>")
}

// Pre is preformatted text (a command line, a configuration).
type Pre string

// HTML implements Block.
func (t Pre) HTML() template.HTML {
	return template.HTML("<pre>" + template.HTMLEscapeString(string(t)) + "</pre>")
}

// Table is a table with a header row.
type Table struct {
	Header []string
	Rows   [][]string
}

// HTML implements Block.
func (t Table) HTML() template.HTML {
	var b strings.Builder
	b.WriteString("<table><thead><tr>")
	for _, h := range t.Header {
		b.WriteString("<th>" + template.HTMLEscapeString(h) + "</th>")
	}
	b.WriteString("</tr></thead><tbody>")
	for _, r := range t.Rows {
		b.WriteString("<tr>")
		for _, c := range r {
			b.WriteString("<td>" + template.HTMLEscapeString(c) + "</td>")
		}
		b.WriteString("</tr>")
	}
	b.WriteString("</tbody></table>")
	return template.HTML(b.String())
}

const baseCSS = `
body { font: 14px/1.45 system-ui, sans-serif; margin: 2em auto; max-width: 72em; padding: 0 1em; color: #1d2330; overflow-wrap: break-word; }
h1 { font-size: 1.6em; margin-bottom: 0.2em; }
.subtitle { color: #5b6475; margin-top: 0; }
h2 { font-size: 1.2em; margin-top: 2em; border-bottom: 1px solid #d8dce4; padding-bottom: 0.2em; }
table { border-collapse: collapse; margin: 0.5em 0; display: block; max-width: 100%; overflow-x: auto; }
th, td { text-align: left; padding: 0.2em 0.8em 0.2em 0; border-bottom: 1px solid #eceef2; font-variant-numeric: tabular-nums; }
pre { background: #f5f6f8; padding: 0.6em; overflow-x: auto; }
svg { max-width: 100%; height: auto; }
figure { margin: 1em 0; }
figcaption { color: #5b6475; font-size: 0.9em; }
`

var pageTemplate = template.Must(template.New("page").Parse(`<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{{.Title}}</title>
<style>{{.Style}}</style>
</head>
<body>
<h1>{{.Title}}</h1>
{{if .Subtitle}}<p class="subtitle">{{.Subtitle}}</p>{{end}}
{{range .Sections}}<section{{if .ID}} id="{{.ID}}"{{end}}>
<h2>{{.Title}}</h2>
{{range .Blocks}}{{.}}
{{end}}</section>
{{end}}</body>
</html>
`))

// externalRef matches what would make a browser fetch something, or send
// the reader elsewhere: a src or href that is not an anchor in the page
// (#...) nor data:, a CSS url() or @import. A URL in the text (the server
// a run was aimed at) is none of those.
var externalRef = regexp.MustCompile(`(?i)(?:\b(?:src|href|xlink:href|action)\s*=\s*["']?(?:[^"'#\s>][^"'\s>]*))|url\(\s*["']?[^"')#\s][^"')]*|@import`)

// ExternalReferences returns the places in doc, an HTML document, that
// would make a browser fetch something from outside the file (data: URLs
// and links to anchors in the page are not): a report must have none.
func ExternalReferences(doc []byte) []string {
	var refs []string
	for _, m := range externalRef.FindAll(doc, -1) {
		s := string(m)
		if strings.Contains(strings.ToLower(s), "data:") {
			continue
		}
		refs = append(refs, s)
	}
	return refs
}
