package runreport

import (
	"bytes"
	"encoding/base64"
	"fmt"
	"html/template"
	"regexp"
	"strings"

	"github.com/fence-lock/fence/internal/tools/chaos/check"
	"github.com/fence-lock/fence/internal/tools/report"
)

// svgNamespace is the one URL in the code of porcupine's visualisation:
// the name of SVG's namespace, which no browser fetches.
const svgNamespace = "http://www.w3.org/2000/svg"

// codeURL matches a URL in styles or a script.
var codeURL = regexp.MustCompile(`\bhttps?://[^\s"'<>)]+`)

// porcupineData starts the history that porcupine's visualisation draws:
// JSON, after its styles and its script.
const porcupineData = "const data = "

// fetchesOutside returns what in porcupine's visualisation, doc, would make
// a browser fetch something: in its markup, styles and script, any
// reference or URL but the SVG namespace; in its data, which it shows with innerHTML, any markup
// (an escaped '<'). The URLs in the data, in the errors of operations, are
// text, and fetch nothing.
func fetchesOutside(doc []byte) []string {
	code, data := doc, []byte(nil)
	if i := bytes.Index(doc, []byte(porcupineData)); i >= 0 {
		code, data = doc[:i], doc[i:]
	}
	refs := report.ExternalReferences(code)
	// And any URL in the code but the namespace's: its script could fetch it.
	for _, u := range codeURL.FindAllString(string(code), -1) {
		if u != svgNamespace {
			refs = append(refs, u)
		}
	}
	if data != nil {
		end := bytes.Index(data, []byte("render(data)"))
		if end < 0 {
			end = len(data)
		}
		if json := data[:end]; bytes.Contains(json, []byte(`\u003c`)) || bytes.Contains(json, []byte("<")) {
			refs = append(refs, "the markup in its data")
		}
		refs = append(refs, fetchesOutside(data[end:])...) // the rest of its script
	}
	return refs
}

// porcupineBlocks embeds porcupine's visualisation of the partitions that
// failed, when it fetches nothing (its script and styles are inline) and
// is small enough, and names its file otherwise.
func porcupineBlocks(lin check.Linearizability) []report.Block {
	var blocks []report.Block
	if lin.HTML != "" {
		doc, err := readSmall(lin.HTML, reportEmbedMax)
		switch outside := fetchesOutside(doc); {
		case err != nil:
			blocks = append(blocks, report.Text(fmt.Sprintf("Porcupine's visualisation is in %s, not embedded here: %v.", lin.HTML, err)))
		case len(outside) > 0:
			blocks = append(blocks, report.Text(fmt.Sprintf("Porcupine's visualisation is in %s, not embedded here: it would fetch %s.", lin.HTML, strings.Join(outside, ", "))))
		default:
			blocks = append(blocks, report.Text("Porcupine's own view of the resources that are not linearizable, with the faults as annotations: the longest linearizable prefix, and the operation that cannot follow it (in red). It is embedded from "+lin.HTML+"."),
				htmlBlock{template.HTML(`<iframe class="porcupine" title="porcupine's visualisation" src="data:text/html;base64,` +
					base64.StdEncoding.EncodeToString(doc) + `"></iframe>`), pageCSS})
		}
	}
	if lin.HTMLError != "" {
		blocks = append(blocks, report.Text("Visualisation: "+lin.HTMLError))
	}
	return blocks
}
