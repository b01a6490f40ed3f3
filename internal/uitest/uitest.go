// Package uitest serves a dashboard handler (package ui) over HTTP in tests
// and drives it as a browser's forms would, cookies and confirmations
// included.
package uitest

import (
	"fmt"
	"html"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"
)

// Client is a test HTTP server for a handler, and a client of it that keeps
// cookies (the CSRF nonce) and does not follow redirects, so a test sees an
// action's 303.
type Client struct {
	// URL is the server's base URL, without the handler's prefix.
	URL string
	// HTTP is the client, for requests the methods below do not cover.
	HTTP *http.Client
}

// Serve serves h under prefix ("" for the root) until the test ends.
func Serve(tb testing.TB, h http.Handler, prefix string) *Client {
	tb.Helper()
	mux := http.NewServeMux()
	mux.Handle(prefix+"/", h)
	srv := httptest.NewServer(mux)
	tb.Cleanup(srv.Close)
	jar, _ := cookiejar.New(nil)
	c := &http.Client{Jar: jar, Timeout: 10 * time.Second,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	tb.Cleanup(c.CloseIdleConnections)
	return &Client{URL: srv.URL, HTTP: c}
}

// Get fetches path and returns the response (its body read) and the body.
func (c *Client) Get(tb testing.TB, path string) (*http.Response, string) {
	tb.Helper()
	resp, err := c.HTTP.Get(c.URL + path)
	if err != nil {
		tb.Fatal(err)
	}
	return read(resp)
}

// Post submits form to path, with the extra headers hdr.
func (c *Client) Post(tb testing.TB, path string, form url.Values, hdr map[string]string) (*http.Response, string) {
	tb.Helper()
	req, _ := http.NewRequest("POST", c.URL+path, strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := c.HTTP.Do(req)
	if err != nil {
		tb.Fatal(err)
	}
	return read(resp)
}

var (
	formAction  = regexp.MustCompile(`<form method="post" action="([^"]+)"`)
	hiddenInput = regexp.MustCompile(`<input type="hidden" name="(\w+)" value="([^"]*)"`)
)

// Act opens an action's confirmation page and submits its form, hidden
// fields (the CSRF token among them) as the page set them, and returns the
// POST's response and body.
func (c *Client) Act(tb testing.TB, confirmPath string) (*http.Response, string) {
	tb.Helper()
	resp, body := c.Get(tb, confirmPath)
	action := formAction.FindStringSubmatch(body)
	if resp.StatusCode != 200 || action == nil {
		tb.Fatalf("GET %s = %d without a form:\n%s", confirmPath, resp.StatusCode, body)
	}
	form := url.Values{}
	for _, m := range hiddenInput.FindAllStringSubmatch(body, -1) {
		form.Set(m[1], html.UnescapeString(m[2]))
	}
	return c.Post(tb, html.UnescapeString(action[1]), form, nil)
}

func read(resp *http.Response) (*http.Response, string) {
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, string(b)
}

// Spellings returns rawPath spelled otherwise, segment by segment: a letter
// and every letter percent-encoded, the case changed, ";x" appended, and
// "//", "/./", "/../" (plain and percent-encoded) and "%2F" before it.
// Routers and checks that read a path apart disagree on some of these; a
// test sends each as is (http.Request.URL.Opaque) and asserts that no
// spelling reaches a handler its caller may not use.
func Spellings(rawPath string) []string {
	seg := strings.Split(rawPath, "/")
	var out []string
	add := func(i int, s string) {
		v := append([]string(nil), seg...)
		v[i] = s
		out = append(out, strings.Join(v, "/"))
	}
	letter := func(c byte) bool { return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' }
	for i := 1; i < len(seg); i++ {
		s := seg[i]
		if j := strings.IndexFunc(s, func(r rune) bool { return r < 128 && letter(byte(r)) }); j >= 0 {
			add(i, s[:j]+fmt.Sprintf("%%%02X", s[j])+s[j+1:])
			var all strings.Builder
			for _, c := range []byte(s) {
				if letter(c) {
					fmt.Fprintf(&all, "%%%02x", c)
				} else {
					all.WriteByte(c)
				}
			}
			add(i, all.String())
		}
		if u := strings.ToUpper(s); u != s {
			add(i, u)
		}
		add(i, s+";x")
		if i > 1 {
			// Not before the first segment: a request target starting
			// with "//" is not a path.
			add(i, "/"+s)
			add(i-1, seg[i-1]+"%2F"+s)
		}
		add(i, "./"+s)
		add(i, "%2E/"+s)
		add(i, "zz/../"+s)
		add(i, "zz/%2E%2E/"+s)
	}
	seen := map[string]bool{rawPath: true}
	var uniq []string
	for _, v := range out {
		if !seen[v] {
			seen[v] = true
			uniq = append(uniq, v)
		}
	}
	return uniq
}
