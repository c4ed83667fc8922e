package report

import (
	"bytes"
	"strings"
	"testing"
)

func TestPage(t *testing.T) {
	var p Page
	p.Title, p.Subtitle = "fence bench <run>", "a & b"
	p.Section("Configuration", "config", Text("clients: 4 <all>"), Pre("fence bench --clients 4"),
		Table{Header: []string{"step", "p50"}, Rows: [][]string{{"acquire", "1.2 ms"}, {"<script>", "x"}}})
	var b bytes.Buffer
	if _, err := p.WriteTo(&b); err != nil {
		t.Fatal(err)
	}
	doc := b.String()
	for _, want := range []string{"<!DOCTYPE html>", "<title>fence bench &lt;run&gt;</title>", `<section id="config">`,
		"clients: 4 &lt;all&gt;", "<td>&lt;script&gt;</td>", "a &amp; b"} {
		if !strings.Contains(doc, want) {
			t.Errorf("the page lacks %q:\n%s", want, doc)
		}
	}
	if refs := ExternalReferences(b.Bytes()); len(refs) > 0 {
		t.Errorf("the page refers outside itself: %q", refs)
	}
	// Nothing makes the page scroll sideways: a wide table scrolls in its
	// own box, a long word (a path) breaks, a chart shrinks to the page.
	for _, want := range []string{
		"table { border-collapse: collapse; margin: 0.5em 0; display: block; max-width: 100%; overflow-x: auto; }",
		"overflow-wrap: break-word;", "svg { max-width: 100%; height: auto; }", "pre { background: #f5f6f8; padding: 0.6em; overflow-x: auto; }",
	} {
		if !strings.Contains(doc, want) {
			t.Errorf("the page's style lacks %q", want)
		}
	}
}

func TestExternalReferences(t *testing.T) {
	for doc, want := range map[string]int{
		`<a href="#op-12">op 12</a>`:                    0,
		`<img src="data:image/png;base64,AAAA">`:        0,
		`<script src="https://cdn.example/x.js">`:       1,
		`<link href="style.css" rel="stylesheet">`:      1,
		`<style>@import "x.css";</style>`:               1,
		`<div style="background: url(x.png)">`:          1,
		`<div style="fill: url(#grad)">`:                0,
		`<form action="https://example.com/x">`:         1,
		`see http://example.com`:                        0,
		`<svg><use xlink:href="#dot"/></svg>`:           0,
		`<image xlink:href="http://example.com/a.png">`: 1,
	} {
		if got := ExternalReferences([]byte(doc)); len(got) != want {
			t.Errorf("ExternalReferences(%s) = %q, want %d", doc, got, want)
		}
	}
}
