package server

import (
	"bytes"
	"fmt"
	"html"
)

// The two HTML pages of GET / (the landing page and the dashboard's
// page) are written here with html.EscapeString, not with html/template.
// Executing a template looks fields and methods up by name through
// reflection, and once that is reachable the linker keeps every exported
// method of every type in the binary: 5 MB more code, which every petrel
// command maps and starts with, client commands included
// (docs/BENCHMARKS.md, issue 15; cmd/petrel's TestNoReflectMethodLookup
// keeps it out). Every value below is text in an element or a quoted
// attribute, where escaping &, <, >, ' and " is the whole of the job.

// htmlPage builds a page: raw appends markup, text appends a value
// escaped.
type htmlPage struct{ bytes.Buffer }

func (p *htmlPage) raw(s string) { p.WriteString(s) }

func (p *htmlPage) text(s string) { p.WriteString(html.EscapeString(s)) }

// head writes the document's start, up to and including <body>, with the
// relay's name as the title and extra inside <head>.
func (p *htmlPage) head(d nip11, extra string) {
	p.raw("<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><meta name=\"viewport\" content=\"width=device-width,initial-scale=1\">\n<title>")
	p.text(d.Name)
	p.raw("</title>\n")
	p.raw(extra)
	p.raw("</head><body>\n")
}

const landingStyle = "<style>body{font-family:system-ui,sans-serif;max-width:40em;margin:3em auto;padding:0 1em;line-height:1.5;color:#222}code{background:#f3f3f3;padding:.1em .3em}</style>\n"

// landingPage is the plain page of GET / for a client that asks for
// neither NIP-11 nor HTML.
func landingPage(d nip11) []byte {
	var p htmlPage
	p.head(d, landingStyle)
	p.raw("<h1>")
	p.text(d.Name)
	p.raw("</h1>\n")
	if d.Description != "" {
		p.raw("<p>")
		p.text(d.Description)
		p.raw("</p>\n")
	}
	p.raw(`<p>This is a <a href="https://github.com/nostr-protocol/nips">Nostr</a> relay. Connect a Nostr client to it with its WebSocket URL (this address with <code>ws://</code> or <code>wss://</code>).</p>
<ul>
<li>Relay information (NIP-11): request this page with <code>Accept: application/nostr+json</code></li>
<li>Live dashboard: open this address in a web browser</li>
<li><a href="/stats">/stats</a>: live counters (JSON)</li>
<li><a href="/metrics">/metrics</a>: Prometheus metrics</li>
</ul>
<p>Supported NIPs: `)
	for i, n := range d.SupportedNIPs {
		if i > 0 {
			p.raw(", ")
		}
		fmt.Fprintf(&p, "%d", n)
	}
	p.raw(".</p>\n<p><small>petrel ")
	p.text(d.Version)
	p.raw("</small></p>\n</body></html>\n")
	return p.Bytes()
}

// dashboardPageHTML is the dashboard's page (what a browser gets for
// GET /): the relay's NIP-11 identity, and the elements the embedded
// script (dashboard/app.js) fills from /stats/series.
func dashboardPageHTML(d nip11) []byte {
	var p htmlPage
	p.head(d, "<link rel=\"stylesheet\" href=\"/dashboard/app.css\">\n<script src=\"/dashboard/app.js\" defer></script>\n")
	p.raw("<header>\n<h1>")
	p.text(d.Name)
	p.raw("</h1>\n")
	if d.Description != "" {
		p.raw(`<p class="desc">`)
		p.text(d.Description)
		p.raw("</p>")
	}
	p.raw("\n<p class=\"meta\">A <a href=\"https://github.com/nostr-protocol/nips\">Nostr</a> relay: connect a Nostr client to this address with <code>wss://</code> (or <code>ws://</code>).\n")
	if d.Contact != "" {
		p.raw("Contact: ")
		p.text(d.Contact)
		p.raw(". ")
	}
	if d.PubKey != "" {
		p.raw(`Operator: <code class="pk">`)
		p.text(d.PubKey)
		p.raw("</code>. ")
	}
	p.raw("</p>\n<p class=\"nips\">NIPs served:")
	for _, n := range d.SupportedNIPs {
		fmt.Fprintf(&p, ` <a class="nip" href="https://github.com/nostr-protocol/nips/blob/master/%02d.md">%02d</a>`, n, n)
	}
	p.raw("</p>\n<p class=\"meta\"><a href=\"/stats\">/stats</a> · <a href=\"/metrics\">/metrics</a> · NIP-11: this address with <code>Accept: application/nostr+json</code> · petrel ")
	p.text(d.Version)
	p.raw(`</p>
</header>
<main id="dash" data-state="loading">
<p id="status" role="status">Loading the last 15 minutes…</p>
<p id="alert" class="alert" role="alert" hidden></p>
<section id="tiles" class="tiles"></section>
<section id="charts" class="charts"></section>
</main>
<noscript><p>The live charts need JavaScript; the same figures are at <a href="/stats">/stats</a>.</p></noscript>
</body></html>
`)
	return p.Bytes()
}
